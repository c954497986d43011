"""Requantization: int32 accumulators back to 8-bit codes, as TFLite/gemmlowp do.

The real factor ``s_in * s_w / s_out`` becomes a positive int32 mantissa and
a power-of-two shift (:func:`quantize_multiplier`), applied with
:func:`multiply_by_quantized_multiplier`; :func:`requantize` runs the whole
epilogue in the C library, :func:`requantize_reference` states it in NumPy.
All names are also in :mod:`approxmul_cffi.quant`. See docs/quantization.md.

>>> m, s = quantize_multiplier(0.5)
>>> requantize(np.array([[10, -10]]), 0, m, s, 0, -128, 127).tolist()
[[5, -5]]
"""

from __future__ import annotations

import numpy as np

from ._buffers import DTYPES, REAL_TYPES, dtype_name
from ._library import check, ffi, lib
from .errors import AccumulatorOverflowError, DTypeError, InvalidArgumentError, ShapeError

__all__ = ["INT32_MAX", "INT32_MIN", "ROUNDINGS", "multiply_by_quantized_multiplier",
           "quantize_multiplier", "requantize", "requantize_reference", "round_half_away"]


INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
ROUNDINGS = ("double", "single")

def round_half_away(x):
    """Round to nearest, ties away from zero (C ``round``, TFLite's choice).

    >>> round_half_away(np.array([-2.5, -0.5, 0.5, 1.5, 2.5])).tolist()
    [-3.0, -1.0, 1.0, 2.0, 3.0]
    """
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)

def _channel_shape(ndim, axis):
    shape = [1] * ndim
    shape[axis] = -1
    return shape

def quantize_multiplier(real):
    """(mantissa, shift) with ``real ~= mantissa * 2**(shift - 31)``.

    The mantissa is an int32 in [2**30, 2**31) (0 for real 0), as in
    TFLite's ``QuantizeMultiplier``; a positive shift is a left shift.
    Works elementwise on arrays.

    >>> m, s = quantize_multiplier(0.75)
    >>> int(m), int(s), int(m) * 2.0 ** (int(s) - 31)
    (1610612736, 0, 0.75)
    """
    real = np.asarray(real, dtype=np.float64)
    if np.any(real < 0) or not np.all(np.isfinite(real)):
        raise InvalidArgumentError("requantization factors must be finite and non-negative")
    frac, exp = np.frexp(real)
    mantissa = round_half_away(frac * 2.0**31).astype(np.int64)
    carry = mantissa == 2**31
    mantissa = np.where(carry, mantissa // 2, mantissa)
    exp = np.where(carry, exp + 1, exp).astype(np.int64)
    # Below 2**-31 every int32 accumulator rounds to 0 anyway.
    tiny = (exp < -31) | (mantissa == 0)
    mantissa = np.where(tiny, 0, mantissa)
    exp = np.where(tiny, 0, exp)
    if np.any(exp > 30):
        raise AccumulatorOverflowError("requantization factor too large (>= 2**30)")
    return mantissa.astype(np.int32), exp.astype(np.int32)


def _trunc_shift(x, n):
    """x / 2**n truncated toward zero, like C integer division."""
    # Negative x: adding 2**n - 1 before the flooring shift makes it truncate.
    return (x + ((x >> 63) & ((1 << n) - 1))) >> n


def _saturate_int32(x):
    return np.clip(x, INT32_MIN, INT32_MAX)


def multiply_by_quantized_multiplier(x, mantissa, shift, rounding="double"):
    """Integer ``x * mantissa * 2**(shift - 31)`` rounded as TFLite does.

    ``rounding="double"`` is gemmlowp's
    ``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << left, m), right)``:
    two roundings: the doubling high multiply rounds ties upward, the
    power-of-two division rounds ties away from zero.
    ``rounding="single"`` is TFLite's ``TFLITE_SINGLE_ROUNDING``:
    ``(x * m + 2**(30 - shift)) >> (31 - shift)``, one rounding, ties up.
    ``x`` is saturated to int32 first (and again after a left shift), as a
    saturating int32 datapath would. Returns int64.

    >>> m, s = quantize_multiplier(0.25)
    >>> multiply_by_quantized_multiplier(np.array([-6, -2, 2, 6]), m, s).tolist()
    [-2, -1, 1, 2]
    >>> multiply_by_quantized_multiplier(np.array([-6, -2, 2, 6]), m, s, "single").tolist()
    [-1, 0, 1, 2]
    """
    x = _saturate_int32(np.asarray(x, dtype=np.int64))
    m = np.asarray(mantissa, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if rounding == "double":
        left = np.maximum(shift, 0)
        right = np.maximum(-shift, 0)
        x = _saturate_int32(x << left)
        prod = x * m  # |x|, |m| < 2**31: fits int64
        nudge = np.where(prod >= 0, 1 << 30, 1 - (1 << 30))
        high = _trunc_shift(prod + nudge, 31)
        mask = (np.int64(1) << right) - 1
        remainder = high & mask
        threshold = (mask >> 1) + (high < 0)
        return (high >> right) + (remainder > threshold)
    if rounding == "single":
        total = 31 - shift
        return (x * m + (np.int64(1) << (total - 1))) >> total
    raise InvalidArgumentError(f"unknown rounding {rounding!r}; use one of {ROUNDINGS}")


def code_dtype(signed, bits=8):
    """The NumPy type of ``bits``-bit codes: 8-bit integers up to 8 bits, else 16-bit.

    >>> code_dtype(True), code_dtype(False, bits=12)
    (dtype('int8'), dtype('uint16'))
    """
    if not 2 <= bits <= 16:
        raise InvalidArgumentError(f"codes of {bits} bits: approxmul quantizes to 2..16 bits")
    if bits > 8:
        return np.dtype(np.int16 if signed else np.uint16)
    return np.dtype(np.int8 if signed else np.uint8)


def _channel_parameters(channels, *values):
    """bias, mantissa, shift as contiguous int32 arrays of one value per channel."""
    def per_channel(v, name):
        if isinstance(v, np.ndarray) and v.dtype == np.int32:  # fits int32 by its type
            if v.shape == (channels,) and v.flags.c_contiguous:
                return v  # as QuantizedModel's layers keep them: no copy, no checks
            if not v.ndim:
                return np.full(channels, v, dtype=np.int32)
        v = np.asarray(v, dtype=np.int64)
        if v.ndim and v.shape != (channels,):
            raise ShapeError(f"{name}: {v.shape[0]} values for {channels} channels")
        if np.any(v < INT32_MIN) or np.any(v > INT32_MAX):
            raise AccumulatorOverflowError(f"{name}: values must fit int32")
        return np.ascontiguousarray(np.broadcast_to(v, (channels,)), dtype=np.int32)

    return [per_channel(v, n) for v, n in zip(values, ("bias", "mantissa", "shift"))]


def _rounding_code(rounding):
    if rounding not in ROUNDINGS:
        raise InvalidArgumentError(f"unknown rounding {rounding!r}; use one of {ROUNDINGS}")
    return {"double": lib.APPROXMUL_ROUND_DOUBLE, "single": lib.APPROXMUL_ROUND_SINGLE}[rounding]


def requantize(acc, bias, mantissa, shift, zero_point, qmin, qmax, *, axis=1,
               signed=True, rounding="double", bits=8, real=None):
    """Output codes from accumulators, as integer inference hardware does.

    ``codes = clamp(zero_point + MBQM(sat32(acc + bias), mantissa, shift), qmin, qmax)``
    where MBQM is :func:`multiply_by_quantized_multiplier`; ``bias``,
    ``mantissa`` and ``shift`` are scalars or per channel along ``axis``.
    A fused ReLU/ReLU6 is only a tighter ``qmin``/``qmax``
    (:func:`activation_bounds`). The codes are :func:`code_dtype` (``signed``,
    ``bits``). Runs in the C library (``approxmul_requantize``);
    :func:`requantize_reference` is the same arithmetic in NumPy.
    ``real=(scale, dtype)`` returns the codes' real values instead,
    ``scale * (codes - zero_point)`` as float32 or float64, bit for bit as
    dequantizing the codes, in the same pass (``approxmul_requantize_dequantize``).

    >>> m, s = quantize_multiplier(0.1)
    >>> requantize(np.array([[100, -100, 5000]]), 0, m, s, 3, -128, 127).tolist()
    [[13, -7, 127]]
    """
    acc = np.asarray(acc)
    if acc.dtype.kind not in "iu" or acc.dtype == np.uint64:
        raise DTypeError(f"acc: dtype {acc.dtype}; expected integer accumulators (int64 at most)")
    rounding_code = _rounding_code(rounding)
    shape = acc.shape
    if acc.ndim < 2:  # one row whose entries are the channels
        acc, axis = acc.reshape(1, -1), 1
    if acc.dtype not in (np.int32, np.int64):
        acc = acc.astype(np.int64)
    axis = axis % acc.ndim
    acc = np.ascontiguousarray(np.moveaxis(acc, axis, 1)) if axis != 1 else \
        np.ascontiguousarray(acc)
    channels = acc.shape[1]

    bias, mantissa, shift = _channel_parameters(channels, bias, mantissa, shift)
    code_type = code_dtype(signed, bits)
    codes = DTYPES[dtype_name(code_type)]
    out = np.empty(acc.shape, dtype=code_type if real is None else real[1])
    # exports released right after the call (see _buffers.Tensor)
    with ffi.from_buffer(acc) as acc_p, ffi.from_buffer("int32_t[]", bias) as bias_p, \
            ffi.from_buffer("int32_t[]", mantissa) as mantissa_p, \
            ffi.from_buffer("int32_t[]", shift) as shift_p, \
            ffi.from_buffer(out, require_writable=True) as out_p:
        common = (acc.shape[0], channels, acc[0, 0].size if acc.size else 0,
                  DTYPES[dtype_name(acc.dtype)], acc_p, bias_p, mantissa_p, shift_p,
                  int(zero_point), int(qmin), int(qmax), rounding_code, codes)
        if real is None:
            check(lib.approxmul_requantize(*common, out_p))
        else:
            check(lib.approxmul_requantize_dequantize(
                *common, float(real[0]), REAL_TYPES[dtype_name(out.dtype)], out_p))
    out = np.moveaxis(out, 1, axis) if axis != 1 else out
    return out.reshape(shape)


def requantize_reference(acc, bias, mantissa, shift, zero_point, qmin, qmax, *, axis=1,
                         signed=True, rounding="double", bits=8):
    """NumPy statement of :func:`requantize`: the arithmetic, spelled out.

    :func:`requantize` runs the same arithmetic in the C library; the two
    are tested to agree bit for bit. Use this one to read or to check.

    ``codes = clamp(zero_point + MBQM(sat32(acc + bias), mantissa, shift), qmin, qmax)``
    where MBQM is :func:`multiply_by_quantized_multiplier`; ``bias``,
    ``mantissa`` and ``shift`` are scalars or per channel along ``axis``.
    A fused ReLU/ReLU6 is only a tighter ``qmin``/``qmax``
    (:func:`activation_bounds`).

    >>> m, s = quantize_multiplier(0.1)
    >>> requantize(np.array([[100, -100, 5000]]), 0, m, s, 3, -128, 127).tolist()
    [[13, -7, 127]]
    """
    acc = np.asarray(acc, dtype=np.int64)

    def along(v):
        v = np.asarray(v, dtype=np.int64)
        return v.reshape(_channel_shape(acc.ndim, axis)) if v.ndim == 1 else v

    total = _saturate_int32(np.clip(acc, -2**32, 2**32) + along(bias))  # no int64 wrap
    y = multiply_by_quantized_multiplier(total, along(mantissa), along(shift), rounding)
    y = np.clip(y + zero_point, qmin, qmax)
    return y.astype(code_dtype(signed, bits))
