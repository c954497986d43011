"""ONNX Runtime's requantization: a float32 scale and round-half-to-even.

The evaluator's default (:mod:`approxmul_cffi.requant`) is gemmlowp/TFLite
arithmetic: a fixed-point mantissa and shift. ONNX Runtime's CPU kernels
(QLinearConv, QLinearMatMul, QGemm; MLAS) instead convert ``acc + bias`` to
float32, multiply by the float32 factor ``s_in * s_w / s_out`` and round
half to even; QuantizeLinear divides by the float32 scale and rounds the
same way; QLinearAdd (what ONNX Runtime runs for a quantized residual add) is
float32 arithmetic with fused multiply-adds (:func:`qlinear_add`), QLinearMul
float32 without (:func:`qlinear_mul`), and its
quantized pooling and softmax have rules of their own
(:func:`qlinear_average_pool`, :func:`qlinear_global_average_pool`,
:func:`qlinear_softmax`), and DynamicQuantizeLinear picks a tensor's grid
from its own range (:func:`dynamic_qparams`).
``QuantConfig(requantization="onnxruntime")`` selects this arithmetic, so a
model quantized by ONNX Runtime gives its integer tensors bit for bit.
docs/quantization.md compares the two.

>>> float_scale(0.5, 0.25, 0.1).dtype.name
'float32'
>>> requantize_float(np.array([[5, 15, -25]]), 0, np.float32(0.5), 10, 0, 255).tolist()
[[12, 18, 0]]
"""

from __future__ import annotations

import math

import numpy as np

from .errors import InvalidArgumentError

__all__ = ["REQUANTIZATIONS", "float_scale", "qlinear_add", "qlinear_average_pool",
           "qlinear_global_average_pool", "qlinear_mul", "qlinear_softmax", "quantize_float",
           "requantize_float"]

#: the requantization arithmetics QuantConfig accepts
REQUANTIZATIONS = ("gemmlowp", "onnxruntime")


def float_scale(in_scale, weight_scale, out_scale):
    """``in_scale * weight_scale / out_scale`` in float32, in that order (ONNX Runtime's).

    >>> float(float_scale(0.5, 0.5, 0.5))
    0.5
    """
    f32 = np.float32
    return (f32(in_scale) * np.asarray(weight_scale, f32)) / f32(out_scale)


def requantize_float(acc, bias, scale, zero_point, qmin, qmax, *, axis=1):
    """``clamp(rint(float32(acc + bias) * scale) + zero_point, qmin, qmax)``, ties to even.

    ``bias`` and ``scale`` are scalars or per channel along ``axis``.

    >>> requantize_float(np.array([1, 3]), 0, np.float32(0.5), 0, -128, 127).tolist()
    [0, 2]
    """
    acc = np.asarray(acc, dtype=np.int64)
    bias, scale = np.asarray(bias, np.int64), np.asarray(scale, np.float32)
    if scale.ndim or bias.ndim:
        shape = [1] * acc.ndim
        shape[axis % acc.ndim] = -1
        bias = bias.reshape(shape) if bias.ndim else bias
        scale = scale.reshape(shape) if scale.ndim else scale
    if not np.all(np.isfinite(scale) & (scale > 0)):
        raise InvalidArgumentError(f"requantization scales must be finite and positive: {scale}")
    total = (acc + bias).astype(np.float32) * scale
    out = np.rint(total).astype(np.int64) + int(zero_point)
    return np.clip(out, qmin, qmax)


def quantize_float(x, qparams):
    """ONNX Runtime's QuantizeLinear: ``rint(float32(x) / float32(scale)) + zp``, saturated.

    >>> from approxmul_cffi.quant import QParams
    >>> quantize_float(np.array([0.25, 0.75, 9.0]), QParams(0.5, 0, signed=True)).tolist()
    [0, 2, 18]
    """
    x = np.asarray(x, dtype=np.float32)
    if qparams.axis is None:
        scale, zp = np.float32(qparams.scale), qparams.zero_point
    else:
        shape = [1] * x.ndim
        shape[qparams.axis] = -1
        scale = qparams.scale.astype(np.float32).reshape(shape)
        zp = qparams.zero_point.reshape(shape)
    q = np.rint(x / scale).astype(np.int64) + zp
    return np.clip(q, qparams.qmin, qparams.qmax).astype(qparams.dtype)


def dynamic_qparams(x):
    """ONNX Runtime's DynamicQuantizeLinear grid of a float32 tensor: (scale, uint8 zero point).

    The range is widened to hold 0, ``scale = float32(hi - lo) / 255`` (1 when
    the tensor is all zeros) and ``zp = rint(clamp(-lo / scale, 0, 255))``,
    all in float32; the codes are then :func:`quantize_float`'s.

    >>> scale, zp = dynamic_qparams(np.array([-1.0, 0.5, 3.0], np.float32))
    >>> bool(scale == np.float32(4.0) / np.float32(255)), zp
    (True, 64)
    """
    x = np.asarray(x, dtype=np.float32)
    lo = min(np.float32(x.min()) if x.size else np.float32(0), np.float32(0))
    hi = max(np.float32(x.max()) if x.size else np.float32(0), np.float32(0))
    scale = np.float32(1) if hi == lo else np.float32((hi - lo) / np.float32(255))
    zp = np.rint(np.clip(np.float32(0) - lo / scale, np.float32(0), np.float32(255)))
    return scale, int(zp)


def fma32(x, y, z):
    """float32 ``x * y + z`` rounded once (a fused multiply-add), for float32 operands.

    ``x * y`` of two float32 values is exact in float64; the sum is rounded
    to odd in float64 (round to nearest, then one ulp towards the exact sum
    when inexact and even), which makes the cast to float32 round the exact
    value once.

    >>> a = np.float32(1 + 2.0 ** -12)
    >>> float(fma32(a, a, np.float32(-1.0))) == 2.0 ** -11 + 2.0 ** -24
    True
    """
    p = np.asarray(x, np.float32).astype(np.float64) * np.asarray(y, np.float32)
    z = np.asarray(z, np.float32).astype(np.float64)
    s = np.atleast_1d(p + z)
    # TwoSum: the exact rounding error of p + z (both float64)
    pv = s - z
    err = (p - pv) + (z - (s - pv))
    even = (s.view(np.int64) & 1) == 0
    towards = np.where(err > 0, np.inf, -np.inf)
    odd = np.where((err != 0) & even, np.nextafter(s, towards), s)
    return odd.astype(np.float32).reshape(np.shape(p + z))


def _float32_scales(op, *grids):
    """The grids' scales as ONNX Runtime holds them (float32), which must stay positive."""
    scales = [np.float32(float(q.scale)) for q in grids]
    if not all(np.isfinite(v) and v > 0 for v in scales):
        raise InvalidArgumentError(f"{op} scales must be finite and positive in float32: "
                                   f"{', '.join(str(v) for v in scales)}")
    return scales


def qlinear_add(a, a_qparams, b, b_qparams, out_qparams):
    """ONNX Runtime's QLinearAdd on x86-64 (MLAS, float32 with fused multiply-adds).

    Codes ``a`` and ``b`` in their grids' own domains; with ``r_a = s_a / s_c``
    and ``r_b = s_b / s_c`` in float32 and ``c = z_c - fma(r_a, z_a, r_b z_b)``,
    the output code is ``rint(fma(a, r_a, fma(b, r_b, c)))`` (ties to even),
    saturated. This matches ONNX Runtime 1.32's CPU kernel on every pair of
    8-bit codes (tests/test_onnx_qlinear_ops.py); other builds of it (ARM's
    fixed-point kernel) may round differently.

    >>> from approxmul_cffi.quant import QParams
    >>> g = QParams(0.5, 10, signed=False)
    >>> qlinear_add(np.array([12, 250], np.uint8), g, np.array([14], np.uint8), g, g).tolist()
    [16, 254]
    """
    f32 = np.float32
    sa, sb, sc = _float32_scales("QLinearAdd", a_qparams, b_qparams, out_qparams)
    ra, rb = sa / sc, sb / sc
    za, zb, zc = (f32(int(q.zero_point)) for q in (a_qparams, b_qparams, out_qparams))
    fixed = f32(zc - fma32(ra, za, rb * zb))
    a = np.asarray(a).astype(np.float32)
    b = np.asarray(b).astype(np.float32)
    value = fma32(a, ra, fma32(b, rb, fixed))
    codes = np.rint(value.astype(np.float64))
    return np.clip(codes, out_qparams.qmin, out_qparams.qmax).astype(out_qparams.dtype)


def qlinear_global_average_pool(centered_sum, count, in_qparams, out_qparams):
    """ONNX Runtime's QLinearGlobalAveragePool from ``sum(q - z_x)`` over ``count`` pixels:
    times the float32 ``s_x / (s_y * count)``, rounded half to even, plus ``z_y``, saturated.

    >>> from approxmul_cffi.quant import QParams
    >>> g = QParams(0.5, 0, signed=True)
    >>> qlinear_global_average_pool(np.array([5, 7, -5]), 2, g, g).tolist()
    [2, 4, -2]
    """
    f32 = np.float32
    scale = f32(float(in_qparams.scale)) / (f32(float(out_qparams.scale)) * f32(count))
    out = out_qparams
    codes = requantize_float(centered_sum, 0, scale, int(out.zero_point), out.qmin, out.qmax)
    return codes.astype(out.dtype)


def qlinear_average_pool(windows, in_qparams, out_qparams, count=None):
    """ONNX Runtime's QLinearAveragePool over (..., KH, KW) windows of codes.

    Each code is dequantized to float32 (``s_x * (q - z_x)``), the taps are
    summed one by one in float32 in row-major order, divided by ``count``
    (KH*KW where the padding counts, else each window's taps inside the
    input, broadcast against the windows' leading axes), then
    ``rint(mean / s_y + z_y)`` (ties to even) is saturated. Padded taps must
    hold ``z_x``: they add an exact 0.0, as the taps ONNX Runtime skips.

    >>> from approxmul_cffi.quant import QParams
    >>> g = QParams(0.5, 0, signed=True)
    >>> qlinear_average_pool(np.array([[[1, 2], [3, 4]]]), g, g).tolist()
    [2]
    """
    f32 = np.float32
    values = f32(float(in_qparams.scale)) * (np.asarray(windows, np.int64)
                                             - int(in_qparams.zero_point)).astype(f32)
    kh, kw = values.shape[-2:]
    total = np.zeros(values.shape[:-2], f32)
    for i in range(kh):
        for j in range(kw):
            total = total + values[..., i, j]
    mean = total / np.asarray(kh * kw if count is None else count, f32)
    out = out_qparams
    codes = np.rint(mean / f32(float(out.scale)) + f32(int(out.zero_point)))
    return np.clip(codes, out.qmin, out.qmax).astype(out.dtype)


def qlinear_softmax(codes, in_qparams, out_qparams):
    """ONNX Runtime's QLinearSoftmax over the last axis (of D values).

    A 256-entry float32 table ``exp((i - 255 + shift) * s_x)`` (computed in
    double, ``shift`` keeping D entries' sum inside float32) is read at
    ``255 - max + q`` for each code, the entries are summed one by one in
    float32, and the output code is ``rint(entry * floor(1 / s_y) / sum) +
    z_y``, saturated. The input zero point cancels; the result is the same in
    both code domains.

    >>> from approxmul_cffi.quant import QParams
    >>> qlinear_softmax(np.array([[10, 10], [0, 255]], np.uint8), QParams(0.1, 0, signed=False),
    ...                 QParams(1 / 256, 0, signed=False)).tolist()
    [[128, 128], [0, 255]]
    """
    f32 = np.float32
    codes = np.asarray(codes).astype(np.int64)
    count = codes.shape[-1]
    x_scale = float(f32(float(in_qparams.scale)))
    shift = max(0.0, math.log(float(f32(np.finfo(f32).max) / f32(count))) - 5.0) / x_scale
    table = np.exp((np.arange(256) - 255 + shift) * x_scale).astype(f32)
    entries = table[255 - codes.max(axis=-1, keepdims=True) + codes]
    total = np.zeros(codes.shape[:-1], f32)
    for j in range(count):  # in order, in float32
        total = total + entries[..., j]
    factor = f32(np.floor(f32(1.0) / f32(float(out_qparams.scale))))
    out = np.rint(entries * factor / total[..., None]).astype(np.int64)
    out += int(out_qparams.zero_point)
    return np.clip(out, out_qparams.qmin, out_qparams.qmax).astype(out_qparams.dtype)


def qlinear_mul(a, a_qparams, b, b_qparams, out_qparams):
    """ONNX Runtime's QLinearMul on x86-64: ``rint(float32((a - z_a)(b - z_b)) * r + z_c)``
    in float32 (no fused multiply-add), ``r = s_a s_b / s_c`` in float32, saturated.

    Codes in their grids' own domains; ``a`` and ``b`` broadcast. Matches ONNX
    Runtime 1.32's kernel on every pair of 8-bit codes (300 random grids when
    it was written, 32 in tests/test_onnx_qlinear_ops.py); a fused
    multiply-add there rounds differently.

    >>> from approxmul_cffi.quant import QParams
    >>> g = QParams(0.5, 10, signed=False)
    >>> qlinear_mul(np.array([12, 14], np.uint8), g, np.array([16], np.uint8), g, g).tolist()
    [16, 22]
    """
    f32 = np.float32
    sa, sb, sc = _float32_scales("QLinearMul", a_qparams, b_qparams, out_qparams)
    ratio = (sa * sb) / sc
    product = ((np.asarray(a, np.int64) - int(a_qparams.zero_point)) *
               (np.asarray(b, np.int64) - int(b_qparams.zero_point))).astype(f32)
    value = product * ratio + f32(int(out_qparams.zero_point))
    codes = np.rint(value.astype(np.float64))
    return np.clip(codes, out_qparams.qmin, out_qparams.qmax).astype(out_qparams.dtype)
