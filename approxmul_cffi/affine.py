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

import math

import numpy as np

from ._library import check, ffi, lib
from ._buffers import DTYPES, REAL_TYPES, dtype_name
from .errors import DTypeError, InvalidArgumentError, ShapeError
from .requant import _channel_shape, round_half_away

__all__ = ["dequantize", "dequantize_reference", "quantize", "quantize_reference"]

CODE_TYPES = ("int8", "uint8", "int16", "uint16")
# dequantize reads 32-bit codes too (exact in double, like NumPy's int64 difference)
DEQUANTIZE_CODE_TYPES = CODE_TYPES + ("int32",)


class CParams:
    """Scales and zero points as the C calls take them: validated once, kept.

    ``QParams`` holds one, so that a layer's repeated calls skip the checks
    and conversions (tiny tensors would otherwise cost more in Python than
    in C).
    """

    def __init__(self, scale, zero_point, axis):
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
        self.axis = axis
        self.scale = np.array(scale.reshape(-1), dtype=np.float64)  # own copies
        self.zero_point = np.array(zero_point.reshape(-1), dtype=np.int32)
        # exported for the object's life: the arrays are private and never change
        self.scale_p = ffi.from_buffer("double[]", self.scale)
        self.zero_point_p = ffi.from_buffer("int32_t[]", self.zero_point)

    def sizes(self, shape):
        """(outer, channels, inner) of an array of this shape, as the C calls lay it out."""
        if self.axis is None:
            return 1, 1, math.prod(shape)
        if not -len(shape) <= self.axis < len(shape):
            raise ShapeError(f"axis {self.axis} is outside an array of {len(shape)} dimensions")
        axis = self.axis % len(shape)
        channels = shape[axis]
        if self.scale.size != channels:
            raise ShapeError(f"{self.scale.size} scales for {channels} channels along axis {axis}")
        return math.prod(shape[:axis]), channels, math.prod(shape[axis + 1:])

    def quantize(self, x, qmin, qmax, dtype, out=None, finite=False):
        x = np.asarray(x)
        if dtype_name(x.dtype) not in REAL_TYPES or not x.dtype.isnative:
            x = x.astype(np.float64)
        if out is None and self.axis is None and not x.flags.c_contiguous:
            # one scale for all: a dense layout in another axis order (a
            # channels-last image) is quantized as it lies, into codes of
            # the same layout, instead of copied first
            order = _memory_order(x)
            if order is not None:
                codes = self.quantize(x.transpose(order), qmin, qmax, dtype, None, finite)
                return codes.transpose(np.argsort(order))
        x = _contiguous(x)
        dtype = np.dtype(dtype if out is None else out.dtype)
        if dtype_name(dtype) not in CODE_TYPES:
            raise DTypeError(f"codes: dtype {dtype}; expected one of {', '.join(CODE_TYPES)}")
        _check_out(out, x.shape)
        outer, channels, inner = self.sizes(x.shape)
        if out is None:
            out = np.empty(x.shape, dtype=dtype)
        # exports released right after the call (see _buffers.Tensor)
        with ffi.from_buffer(x) as x_p, ffi.from_buffer(out, require_writable=True) as out_p:
            # finite: +-inf refused like NaN instead of clamped, in the same pass
            call = lib.approxmul_quantize_finite if finite else lib.approxmul_quantize
            check(call(outer, channels, inner, REAL_TYPES[dtype_name(x.dtype)], x_p,
                       self.scale_p, self.zero_point_p, int(qmin), int(qmax),
                       DTYPES[dtype_name(dtype)], out_p))
        return out

    def dequantize(self, codes, dtype, out):
        codes = np.asarray(codes)
        if codes.dtype.kind not in "iub":
            raise DTypeError(f"codes: dtype {codes.dtype}; expected integer codes")
        dtype = np.dtype(dtype if out is None else out.dtype)
        if dtype_name(dtype) not in REAL_TYPES:
            raise DTypeError(f"dequantized values: dtype {dtype}; expected float32 or float64")
        _check_out(out, codes.shape)
        outer, channels, inner = self.sizes(codes.shape)
        if dtype_name(codes.dtype) not in DEQUANTIZE_CODE_TYPES or not codes.dtype.isnative:
            per_tensor = self.axis is None
            values = dequantize_reference(
                codes, self.scale.reshape(()) if per_tensor else self.scale,
                self.zero_point.reshape(()) if per_tensor else self.zero_point, axis=self.axis)
            if out is None:
                return np.asarray(values, dtype=dtype)
            out[...] = values
            return out
        codes = _contiguous(codes)
        if out is None:
            out = np.empty(codes.shape, dtype=dtype)
        with ffi.from_buffer(codes) as codes_p, \
                ffi.from_buffer(out, require_writable=True) as out_p:
            check(lib.approxmul_dequantize(outer, channels, inner,
                                           DTYPES[dtype_name(codes.dtype)], codes_p,
                                           self.scale_p, self.zero_point_p,
                                           REAL_TYPES[dtype_name(dtype)], out_p))
        return out


def _check_out(out, shape):
    if out is not None and (not isinstance(out, np.ndarray) or out.shape != shape
                            or not out.flags.c_contiguous or not out.flags.writeable
                            or not out.dtype.isnative):
        raise ShapeError(f"out must be a writable C-contiguous array of shape {shape}")


def _memory_order(a):
    """The axes of ``a`` by decreasing stride when that order makes it
    C-contiguous (a dense layout), else None."""
    order = sorted(range(a.ndim), key=lambda axis: -a.strides[axis])
    return order if a.transpose(order).flags.c_contiguous else None


def _contiguous(a):
    # np.ascontiguousarray would turn a 0-d array into a 1-d one
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def quantize(x, scale, zero_point, qmin, qmax, *, axis=None, dtype=np.int8, out=None,
             finite=False):
    """Codes of real values: round half away from zero, add the zero point, clamp.

    ``scale`` and ``zero_point`` are scalars (per tensor) or 1-d arrays along
    ``axis`` (per channel). ``dtype`` is the codes' type: int8, uint8, int16
    or uint16. float32 and float64 arrays are read as they are, anything else
    is first converted to float64. +-inf clamp to qmin/qmax (with
    ``finite``, they raise as NaN does: ``approxmul_quantize_finite``); a NaN
    raises :class:`~approxmul_cffi.errors.InvalidArgumentError`. ``out``, a
    C-contiguous array of ``x``'s shape, receives the codes (its dtype wins).

    >>> quantize(np.array([[0.5, -0.5], [2.5, 100.0]], np.float32), [1.0, 0.5], [0, 3],
    ...          0, 255, axis=0, dtype=np.uint8).tolist()
    [[1, 0], [8, 203]]
    """
    return CParams(scale, zero_point, axis).quantize(x, qmin, qmax, dtype, out, finite)


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
    return CParams(scale, zero_point, axis).dequantize(codes, dtype, out)


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
