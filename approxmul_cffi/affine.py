"""Affine quantization in the C library: real values to integer codes and back.

A real value ``r`` is held as a code ``q`` with ``r = scale * (q - zero_point)``.
:func:`quantize` computes, in double,
``clamp(round_half_away(x / scale) + zero_point, qmin, qmax)`` and
:func:`dequantize` ``scale * (codes - zero_point)``, in one multithreaded
pass each (``approxmul_quantize``, ``approxmul_dequantize``).
:func:`quantize_reference` and :func:`dequantize_reference` state the same
arithmetic in NumPy; the two are tested to agree bit for bit.
:class:`approxmul_cffi.quant.QParams` calls these. See docs/quantization.md.

>>> quantize(np.array([-1.0, 0.25, 0.75, 9.0]), 0.5, 1, -128, 127).tolist()
[-1, 2, 3, 19]
>>> dequantize(np.array([-1, 2, 3], np.int8), 0.5, 1).tolist()
[-1.0, 0.5, 1.0]
"""

from __future__ import annotations

import numpy as np

from ._library import check, ffi, lib
from ._buffers import DTYPES
from .errors import DTypeError, InvalidArgumentError, ShapeError
from .requant import _channel_shape, round_half_away

__all__ = ["dequantize", "dequantize_reference", "quantize", "quantize_reference"]

REAL_TYPES = {"float32": lib.APPROXMUL_FLOAT32, "float64": lib.APPROXMUL_FLOAT64}
CODE_TYPES = ("int8", "uint8", "int16", "uint16")
# dequantize reads 32-bit codes too (exact in double, like NumPy's int64 difference)
DEQUANTIZE_CODE_TYPES = CODE_TYPES + ("int32",)


def _layout(shape, scale, zero_point, axis):
    """(outer, channels, inner, scale, zero_point) of the C calls' [outer, channels, inner]."""
    scale = np.asarray(scale, dtype=np.float64)
    zero_point = np.asarray(zero_point)
    if zero_point.dtype.kind not in "iu" and zero_point.size:
        raise DTypeError(f"zero_point: dtype {zero_point.dtype}; expected integers")
    if scale.shape != zero_point.shape or scale.ndim > 1:
        raise ShapeError(f"scale {scale.shape} and zero_point {zero_point.shape} must be "
                         "equal 0-d or 1-d shapes")
    if (scale.ndim == 1) != (axis is not None):
        raise InvalidArgumentError("per-channel parameters need an axis, per-tensor ones none")
    if np.any(zero_point < -2**31) or np.any(zero_point >= 2**31):
        raise InvalidArgumentError(f"zero points must fit int32, got {zero_point}")
    size = int(np.prod(shape, dtype=np.int64))
    if axis is None:
        outer, channels, inner = 1, 1, size
    else:
        if not -len(shape) <= axis < len(shape):
            raise ShapeError(f"axis {axis} is outside an array of {len(shape)} dimensions")
        axis %= len(shape)
        channels = shape[axis]
        if scale.shape != (channels,):
            raise ShapeError(f"{scale.size} scales for {channels} channels along axis {axis}")
        outer = int(np.prod(shape[:axis], dtype=np.int64))
        inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return (outer, channels, inner, np.ascontiguousarray(scale.reshape(-1)),
            np.ascontiguousarray(zero_point.reshape(-1), dtype=np.int32))


def _contiguous(a):
    # np.ascontiguousarray would turn a 0-d array into a 1-d one
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def quantize(x, scale, zero_point, qmin, qmax, *, axis=None, dtype=np.int8):
    """Codes of real values: round half away from zero, add the zero point, clamp.

    ``scale`` and ``zero_point`` are scalars (per tensor) or 1-d arrays along
    ``axis`` (per channel). ``dtype`` is the codes' type: int8, uint8, int16
    or uint16. float32 and float64 arrays are read as they are, anything else
    is first converted to float64. +-inf clamp to qmin/qmax; a NaN raises
    :class:`~approxmul_cffi.errors.InvalidArgumentError`.

    >>> quantize(np.array([[0.5, -0.5], [2.5, 100.0]], np.float32), [1.0, 0.5], [0, 3],
    ...          0, 255, axis=0, dtype=np.uint8).tolist()
    [[1, 0], [8, 203]]
    """
    x = np.asarray(x)
    if x.dtype.name not in REAL_TYPES or not x.dtype.isnative:
        x = x.astype(np.float64)
    x = _contiguous(x)
    dtype = np.dtype(dtype)
    if dtype.name not in CODE_TYPES:
        raise DTypeError(f"codes: dtype {dtype}; expected one of {', '.join(CODE_TYPES)}")
    outer, channels, inner, scale, zero_point = _layout(x.shape, scale, zero_point, axis)
    out = np.empty(x.shape, dtype=dtype)
    # exports released right after the call (see _buffers.Tensor)
    with ffi.from_buffer(x) as x_p, ffi.from_buffer("double[]", scale) as scale_p, \
            ffi.from_buffer("int32_t[]", zero_point) as zp_p, \
            ffi.from_buffer(out, require_writable=True) as out_p:
        check(lib.approxmul_quantize(outer, channels, inner, REAL_TYPES[x.dtype.name], x_p,
                                     scale_p, zp_p, int(qmin), int(qmax),
                                     DTYPES[dtype.name], out_p))
    return out


def dequantize(codes, scale, zero_point, *, axis=None, dtype=np.float64, out=None):
    """Real values of codes, ``scale * (codes - zero_point)`` computed in double.

    ``dtype`` (float64 or float32) is the result's type; float32 results are
    the float64 ones rounded once. ``out``, a C-contiguous array of the
    codes' shape, receives them instead of a new array (its dtype wins).
    Codes of other integer types than int8/uint8/int16/uint16/int32 take the
    NumPy statement, :func:`dequantize_reference`.

    >>> dequantize(np.array([0, 255], np.uint8), 0.1, 128, dtype=np.float32).tolist()
    [-12.800000190734863, 12.699999809265137]
    """
    codes = np.asarray(codes)
    if codes.dtype.kind not in "iub":
        raise DTypeError(f"codes: dtype {codes.dtype}; expected integer codes")
    dtype = np.dtype(dtype if out is None else out.dtype)
    if dtype.name not in REAL_TYPES:
        raise DTypeError(f"dequantized values: dtype {dtype}; expected float32 or float64")
    if out is not None and (not isinstance(out, np.ndarray) or out.shape != codes.shape
                            or not out.flags.c_contiguous or not out.flags.writeable
                            or not out.dtype.isnative):
        raise ShapeError(f"out must be a writable C-contiguous array of shape {codes.shape}")
    outer, channels, inner, scale, zero_point = _layout(codes.shape, scale, zero_point, axis)
    if codes.dtype.name not in DEQUANTIZE_CODE_TYPES or not codes.dtype.isnative:
        values = dequantize_reference(codes, scale.reshape(()) if axis is None else scale,
                                      zero_point.reshape(()) if axis is None else zero_point,
                                      axis=axis)
        if out is None:
            return np.asarray(values, dtype=dtype)
        out[...] = values
        return out
    codes = _contiguous(codes)
    if out is None:
        out = np.empty(codes.shape, dtype=dtype)
    with ffi.from_buffer(codes) as codes_p, ffi.from_buffer("double[]", scale) as scale_p, \
            ffi.from_buffer("int32_t[]", zero_point) as zp_p, \
            ffi.from_buffer(out, require_writable=True) as out_p:
        check(lib.approxmul_dequantize(outer, channels, inner, DTYPES[codes.dtype.name],
                                       codes_p, scale_p, zp_p, REAL_TYPES[dtype.name], out_p))
    return out


def _broadcast(ndim, scale, zero_point, axis):
    scale = np.asarray(scale, dtype=np.float64)
    zero_point = np.asarray(zero_point, dtype=np.int64)
    if axis is None:
        return scale, zero_point
    shape = _channel_shape(ndim, axis)
    return scale.reshape(shape), zero_point.reshape(shape)


def quantize_reference(x, scale, zero_point, qmin, qmax, *, axis=None, dtype=np.int8):
    """NumPy statement of :func:`quantize`: the arithmetic, spelled out (float64).

    >>> quantize_reference(np.array([-1.0, 0.25, 0.75, 9.0]), 0.5, 1, -128, 127).tolist()
    [-1, 2, 3, 19]
    """
    x = np.asarray(x, dtype=np.float64)
    scale, zero_point = _broadcast(x.ndim, scale, zero_point, axis)
    q = round_half_away(x / scale) + zero_point
    return np.clip(q, qmin, qmax).astype(dtype)


def dequantize_reference(codes, scale, zero_point, *, axis=None):
    """NumPy statement of :func:`dequantize` (float64 result).

    >>> dequantize_reference(np.array([-1, 2, 3], np.int8), 0.5, 1).tolist()
    [-1.0, 0.5, 1.0]
    """
    scale, zero_point = _broadcast(np.ndim(codes), scale, zero_point, axis)
    return scale * (np.asarray(codes, dtype=np.int64) - zero_point)
