"""Layers without a multiplier: activations, pooling, reshaping, softmax, residual add.

Each class has its float ``forward`` and its integer forward on codes
(``forward_codes``, or ``lower`` when it needs quantization parameters, as
Add does). Code layers keep their input's grid, so they give the same
values in both code domains.

>>> import numpy as np
>>> MaxPool2d(2).forward(np.arange(16.0).reshape(1, 1, 4, 4))[0, 0].tolist()
[[5.0, 7.0], [13.0, 15.0]]
"""

from __future__ import annotations

import numpy as np

from .. import quant
from ..errors import ModelError
from ..requant_float import qlinear_add, qlinear_average_pool, qlinear_global_average_pool
from .integer import QTensor, in_own_domains
from .layers import Layer, need_ndim, pair, register, window_output
from .windows import pool, rounded_mean, windows

__all__ = ["Add", "AvgPool2d", "Flatten", "GlobalAvgPool", "MaxPool2d", "ReLU", "ReLU6",
           "Softmax"]


@register
class ReLU(Layer):
    """max(x, 0); fused into the preceding Conv2d/Linear's clamp when quantized."""

    activation = "relu"

    def forward(self, x):
        return np.maximum(x, 0)

    def forward_codes(self, x):
        lo, hi = quant.activation_bounds(x.qparams, self.activation)
        return QTensor(np.clip(x.codes, lo, hi).astype(x.codes.dtype), x.qparams)


@register
class ReLU6(ReLU):
    """min(max(x, 0), 6)."""

    activation = "relu6"

    def forward(self, x):
        return np.clip(x, 0, 6)


class _Pool(Layer):
    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size = pair(kernel_size, "kernel_size")
        self.stride = pair(self.kernel_size if stride is None else stride, "stride")
        self.padding = pair(padding, "padding")
        # Pooling is not a C operation: its own rule, PyTorch's.
        if min(*self.kernel_size, *self.stride) < 1 or min(self.padding) < 0 or any(
                p > k // 2 for p, k in zip(self.padding, self.kernel_size)):
            raise ModelError(f"{type(self).__name__}: invalid sizes {self.config()}"
                             " (padding must be at most half the kernel)")

    def config(self):
        return dict(kernel_size=list(self.kernel_size), stride=list(self.stride),
                    padding=list(self.padding))

    def output_shape(self, shape):
        need_ndim(self, shape, 3, "(C, H, W) input")
        # A window over one channel: the C library's convolution arithmetic.
        oh, ow = window_output(self, (1, 1, *shape[1:]), (1, 1, *self.kernel_size),
                               self.stride, self.padding, 1, 1)[2:]
        return (shape[0], oh, ow)

    def _pool(self, x, kind, pad_value):
        out_hw = self.output_shape(x.shape[1:])[1:]
        return pool(x, kind, self.kernel_size, self.stride, self.padding, out_hw, pad_value)


@register
class MaxPool2d(_Pool):
    """Max pooling (padding never wins the max)."""

    def forward(self, x):
        return self._pool(x, "max", -np.inf)

    def forward_codes(self, x):
        return QTensor(self._pool(x.codes, "max", x.qparams.qmin), x.qparams)


def _mean_codes(x, centered, count):
    """Mean of (q - zp) plus zp, so the result is the same in both code domains."""
    zp = int(x.qparams.zero_point)
    out = rounded_mean(centered, count) + zp
    return QTensor(np.asarray(out).astype(x.codes.dtype), x.qparams)


class _Requantizing:
    """Means that keep their input's grid when quantized, or with ``requantize=True``
    are requantized to their own grid by ONNX Runtime's QLinear pooling arithmetic
    (imported ONNX models; ``requantization="onnxruntime"`` only)."""

    def lower(self, in_qparams, out_qparams, config):
        if not self.requantize:
            return super().lower(in_qparams, out_qparams, config)
        if config.requantization != "onnxruntime":
            raise ModelError("requantizes its mean (ONNX Runtime's QLinear pooling): only with "
                             "QuantConfig(requantization='onnxruntime')")
        return _RequantizedMean(self, in_qparams[0], out_qparams)

    def _config(self, base):
        return {**base, "requantize": True} if self.requantize else base


class _RequantizedMean:
    """The integer node of a requantizing mean: the layer's ``requantized_mean(codes,
    in_qparams, out_qparams)`` in the grids' own code domains."""

    takes_multiplier = False

    def __init__(self, layer, in_qparams, out_qparams):
        self.layer, self.in_qparams, self.out_qparams = layer, in_qparams, out_qparams

    def forward(self, inputs, multiplier=None):
        return in_own_domains(
            lambda codes: self.layer.requantized_mean(codes, self.in_qparams, self.out_qparams),
            inputs, [self.in_qparams], self.out_qparams)


@register
class AvgPool2d(_Requantizing, _Pool):
    """Average pooling. With ``count_include_pad=True`` (PyTorch's default) padded
    taps count as zeros; with ``False`` (ONNX's default, Keras' "same") each
    window divides by the taps inside the input."""

    def __init__(self, kernel_size, stride=None, padding=0, requantize=False,
                 count_include_pad=True):
        super().__init__(kernel_size, stride, padding)
        self.requantize = bool(requantize)
        # without padding both rules agree: keep the one spelling of that pool
        self.count_include_pad = bool(count_include_pad) or not any(self.padding)

    def config(self):
        base = self._config(super().config())
        return base if self.count_include_pad else {**base, "count_include_pad": False}

    def counts(self, hw):
        """Each window's divisor over an (H, W) input: (OH, OW) int64, or the kernel's
        size where the padding counts.

        >>> AvgPool2d(3, 2, 1, count_include_pad=False).counts((4, 4)).tolist()
        [[4, 6], [6, 9]]
        """
        kh, kw = self.kernel_size
        if self.count_include_pad:
            return kh * kw
        out_hw = self.output_shape((1, *hw))[1:]

        def inside(n, k, s, p, size):  # taps of each window along one axis within [0, n)
            start = np.arange(size, dtype=np.int64) * s - p
            return np.minimum(start + k, n) - np.maximum(start, 0)
        rows, cols = (inside(*a) for a in zip(hw, self.kernel_size, self.stride, self.padding,
                                               out_hw))
        return np.multiply.outer(rows, cols)

    def forward(self, x):
        return self._pool(x, "avg", 0.0) / self.counts(x.shape[2:])

    def forward_codes(self, x):
        kh, kw = self.kernel_size
        total = self._pool(x.codes, "avg", int(x.qparams.zero_point))
        # padded taps hold the zero point: centered, they add nothing to any count
        centered = total - kh * kw * int(x.qparams.zero_point)
        return _mean_codes(x, centered, self.counts(x.codes.shape[2:]))

    def requantized_mean(self, codes, in_qparams, out_qparams):
        out_hw = self.output_shape(codes.shape[1:])[1:]
        taps = windows(codes, self.kernel_size, self.stride, self.padding, (1, 1), out_hw,
                       int(in_qparams.zero_point))
        return qlinear_average_pool(taps, in_qparams, out_qparams, self.counts(codes.shape[2:]))


@register
class GlobalAvgPool(_Requantizing, Layer):
    """Mean over H and W: (C, H, W) -> (C,)."""

    def __init__(self, requantize=False):
        self.requantize = bool(requantize)

    def config(self):
        return self._config({})

    def output_shape(self, shape):
        need_ndim(self, shape, 3, "(C, H, W) input")
        return (shape[0],)

    def forward(self, x):
        return x.mean(axis=(2, 3))

    def forward_codes(self, x):
        count = x.codes.shape[2] * x.codes.shape[3]
        total = x.codes.sum(axis=(2, 3), dtype=np.int64)
        return _mean_codes(x, total - count * int(x.qparams.zero_point), count)

    def requantized_mean(self, codes, in_qparams, out_qparams):
        n = codes.shape[2] * codes.shape[3]
        centered = codes.sum(axis=(2, 3), dtype=np.int64) - n * int(in_qparams.zero_point)
        return qlinear_global_average_pool(centered, n, in_qparams, out_qparams)


@register
class Flatten(Layer):
    """(C, H, W) -> (C*H*W,) in C order, like torch.flatten(x, 1)."""

    def output_shape(self, shape):
        return (int(np.prod(shape)),)

    def forward(self, x):
        return x.reshape(x.shape[0], -1)

    def forward_codes(self, x):
        return QTensor(x.codes.reshape(x.codes.shape[0], -1), x.qparams)


@register
class Softmax(Layer):
    """Softmax over features; in a quantized model it runs in float, last."""

    output_only = True

    def output_shape(self, shape):
        need_ndim(self, shape, 1, "a flat (features,) input")
        return shape

    def forward(self, x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def forward_codes(self, x):
        """Float probabilities of the dequantized input (the model's last step)."""
        return self.forward(x.dequantize())


@register
class Add(Layer):
    """Elementwise sum of two inputs of equal shape (residual connection)."""

    arity = 2

    def output_shape(self, a, b):
        if a != b:
            raise ModelError(f"Add needs inputs of equal shape, got {a} and {b}")
        return a

    def forward(self, a, b):
        return a + b

    def lower(self, in_qparams, out_qparams, config):
        return _QuantizedAdd(in_qparams, out_qparams, config)


class _QuantizedAdd:
    """TFLite's integer add: both inputs rescaled to 2*max(s) with 20 bits headroom
    (28 - bits for codes wider than 8 bits, so that the sum stays within int32);
    with ``requantization="onnxruntime"``, ONNX Runtime's QLinearAdd instead."""

    takes_multiplier = False

    def __init__(self, in_qparams, out_qparams, config):
        self.LEFT_SHIFT = min(20, 28 - max(q.bits for q in (*in_qparams, out_qparams)))
        s1, s2, so = (float(q.scale) for q in (*in_qparams, out_qparams))
        twice_max = 2 * max(s1, s2)
        self.factors = [quant.quantize_multiplier(s / twice_max) for s in (s1, s2)]
        self.out_factor = quant.quantize_multiplier(twice_max / ((1 << self.LEFT_SHIFT) * so))
        self.in_qparams, self.out_qparams, self.rounding = in_qparams, out_qparams, config.rounding
        self.float32 = config.requantization == "onnxruntime"
        self._tables = {}  # forward's output codes by input bytes, per pair of input grids

    def forward(self, inputs, multiplier=None):
        if self.float32:
            (qa, qb), out = self.in_qparams, self.out_qparams
            return in_own_domains(lambda a, b: qlinear_add(a, qa, b, qb, out), inputs,
                                  self.in_qparams, out)
        a, b = inputs
        out_qp = self.out_qparams.to_domain(a.qparams.signed)
        if a.codes.dtype.itemsize != 1 or b.codes.dtype.itemsize != 1:
            return QTensor(self.add_codes(a.codes, a.qparams, b.codes, b.qparams, out_qp), out_qp)
        # 8-bit codes: each output code is a function of the two input bytes,
        # tabulated once per pair of input grids (the int64 arithmetic cost
        # 16-25 ns an element: most of a residual network's forward)
        key = (a.qparams.signed, int(a.qparams.zero_point), b.qparams.signed,
               int(b.qparams.zero_point))
        table = self._tables.get(key)
        if table is None:
            raw = np.arange(256, dtype=np.uint8)
            table = self.add_codes(raw.view(a.codes.dtype)[:, None], a.qparams,
                                   raw.view(b.codes.dtype)[None, :], b.qparams, out_qp).reshape(-1)
            self._tables[key] = table
        index = (a.codes.view(np.uint8).astype(np.intp) << 8) | b.codes.view(np.uint8)
        return QTensor(table[index], out_qp)

    def add_codes(self, a, qa, b, qb, out_qp):
        """TFLite's add of codes ``a`` (on grid ``qa``) and ``b`` (``qb``): output codes."""
        total = 0
        for x, q, (m, s) in zip((a, b), (qa, qb), self.factors):
            centered = x.astype(np.int64) - int(q.zero_point)
            total = total + quant.multiply_by_quantized_multiplier(
                centered << self.LEFT_SHIFT, m, s, self.rounding)
        y = quant.multiply_by_quantized_multiplier(total, *self.out_factor, self.rounding)
        return np.clip(y + int(out_qp.zero_point), out_qp.qmin, out_qp.qmax).astype(out_qp.dtype)
