"""Dynamically quantized layers: the activation grid is chosen per batch.

ONNX Runtime's dynamic quantization (``quantize_dynamic``) stores int8/uint8
weight codes and quantizes each activation batch on the grid of its own
range (DynamicQuantizeLinear), multiplies codes (ConvInteger,
MatMulInteger), and turns the int32 accumulators back into float32 with
``float32(acc) * (s_x * s_w)``; everything between such layers stays float.
:class:`DynamicQuantized` is one such layer, its products through a
multiplier; :class:`~approxmul_cffi.nn.DynamicQuantizedModel` runs a float
graph holding them, with one multiplier per dynamic layer, behind the
interface of :class:`~approxmul_cffi.nn.QuantizedModel` (``approxmul
evaluate`` runs it unchanged). The arithmetic is ONNX Runtime's (:mod:`approxmul_cffi.requant_float`).

>>> import numpy as np
>>> from approxmul_cffi import nn
>>> fc = DynamicQuantized(nn.Linear(2, 1, False), np.array([[100, -100]], np.int8),
...                       np.float32(0.01), 0)
>>> fc.forward(np.array([[1.0, 0.5]], np.float32)).astype(float).round(3).tolist()
[[0.502]]
"""

from __future__ import annotations

import numpy as np

from .. import quant
from ..errors import ModelError
from ..multipliers import Multiplier
from ..requant_float import dynamic_qparams, quantize_float
from .integer import QTensor
from .layers import Layer

__all__ = ["DynamicQuantized"]


class DynamicQuantized(Layer):
    """A Conv2d or Linear (``layer``: its shape and integer product) on given
    weight codes, quantizing its float input per batch.

    ``weight_codes``: int8 or uint8 in ``layer``'s weight layout;
    ``weight_zero_point``: one per tensor (the kernels take a scalar);
    ``scale``: the weight scale the accumulators are multiplied by after the
    input's, as a float32 array broadcast against the output (per tensor, or
    per output channel in the output's layout); None until an importer sets it.
    """

    def __init__(self, layer, weight_codes, scale, weight_zero_point):
        codes = np.asarray(weight_codes)
        if codes.dtype not in (np.int8, np.uint8):
            raise ModelError(f"weight codes must be int8 or uint8, got {codes.dtype}")
        if codes.shape != layer.weight.shape:
            raise ModelError(f"weight codes of shape {codes.shape}, the layer needs "
                             f"{layer.weight.shape}")
        zps = np.unique(np.asarray(weight_zero_point))
        if zps.size != 1:
            raise ModelError("per-channel weight zero points must be equal (the kernels take "
                             f"one per tensor), got {zps.size} different ones")
        self.layer, self.codes = layer, codes
        self.scale = None if scale is None else np.asarray(scale, np.float32)
        self.zero_point = int(zps[0])
        self._by_domain = {}

    def output_shape(self, shape):
        return self.layer.output_shape(shape)

    def config(self):
        raise ModelError("dynamically quantized layers are not saved as model files; keep the "
                         "ONNX file")

    def _weights(self, signed):
        """Weight codes and zero point in the int8 (``signed``) or uint8 domain."""
        if signed not in self._by_domain:
            shift = 0 if (self.codes.dtype == np.int8) == signed else (128 if signed else -128)
            self._by_domain[signed] = (quant.convert_codes(self.codes, signed),
                                       self.zero_point - shift)
        return self._by_domain[signed]

    @staticmethod
    def quantize(x):
        """One batch's uint8 codes on the grid of its own range (DynamicQuantizeLinear)."""
        x = np.asarray(x, np.float32)
        if not np.all(np.isfinite(x)):
            raise ModelError("input contains NaN or infinity: no quantization grid holds it")
        scale, zero_point = dynamic_qparams(x)
        grid = quant.QParams(np.float64(scale), np.int64(zero_point), signed=False)
        return QTensor(quantize_float(x, grid), grid)

    def accumulate(self, x, multiplier):
        """The integer accumulators (ConvInteger/MatMulInteger) of input codes ``x`` (a QTensor)."""
        x = x.to_domain(bool(multiplier.signed))
        w_codes, w_zero_point = self._weights(bool(multiplier.signed))
        return self.layer.accumulate(x.codes, w_codes, multiplier, int(x.qparams.zero_point),
                                        w_zero_point)

    def forward_with(self, x, multiplier):
        """float32 output of one batch, its products through ``multiplier``."""
        if self.scale is None:
            raise ModelError("the weight scale is not set")
        q = self.quantize(x)
        acc = self.accumulate(q, multiplier)
        # ONNX Runtime: Cast(int32 -> float32), then Mul by float32(s_x * s_w)
        return acc.astype(np.float32) * (np.float32(q.qparams.scale) * self.scale)

    def param_shapes(self):
        return self.layer.param_shapes()

    def params(self):
        return self.layer.params()

    def forward(self, x):
        """The model's own result: the exact products."""
        return self.forward_with(x, Multiplier.exact(bits=8, signed=False))
