"""ONNX Runtime's requantization: a float32 scale and round-half-to-even.

The evaluator's default (:mod:`approxmul_cffi.requant`) is gemmlowp/TFLite
arithmetic: a fixed-point mantissa and shift. ONNX Runtime's CPU kernels
(QLinearConv, QLinearMatMul, QGemm; MLAS) instead convert ``acc + bias`` to
float32, multiply by the float32 factor ``s_in * s_w / s_out`` and round
half to even; QuantizeLinear divides by the float32 scale and rounds the
same way. ``QuantConfig(requantization="onnxruntime")`` selects this
arithmetic, so a model quantized by ONNX Runtime gives its integer tensors bit
for bit. docs/quantization.md compares the two.

>>> float_scale(0.5, 0.25, 0.1).dtype.name
'float32'
>>> requantize_float(np.array([[5, 15, -25]]), 0, np.float32(0.5), 10, 0, 255).tolist()
[[12, 18, 0]]
"""

from __future__ import annotations

import numpy as np

from .errors import InvalidArgumentError

__all__ = ["REQUANTIZATIONS", "float_scale", "quantize_float", "requantize_float"]

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
