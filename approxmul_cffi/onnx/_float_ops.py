"""ONNX operators that never touch a multiplier: float NumPy nodes of an imported graph.

An :class:`OnnxFloatOp` is an ``nn.Layer`` whose float forward is a NumPy
function of its activation inputs (constant operands are bound at import).
In a quantized model it dequantizes its inputs, computes in float and
quantizes to its own calibrated grid, so the imported graph runs "as in the
model" while Conv/Gemm/MatMul go through the integer path. A
:class:`ShapeOp` only moves values around, so on codes it keeps its input's
grid and is exact.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..quant import quantize_values
from ..requant_float import qlinear_add, qlinear_mul, qlinear_softmax
from ..nn.integer import CodeOp, QTensor, in_own_domains
from ..nn.layers import Layer
from ..nn.windows import pool


class OnnxFloatOp(Layer):
    """A float node: ``fn(*inputs)`` on full-batch arrays; ``op`` names it in messages."""

    def __init__(self, op, fn, arity=1, detail=None):
        self.op, self.fn, self.arity, self.detail = op, fn, int(arity), detail

    def config(self):
        return {"op": self.op, **({"detail": self.detail} if self.detail else {})}

    def output_shape(self, *shapes):
        # Run the op on one zero sample: the shape rule is the forward itself.
        probe = [np.zeros((1, *s), np.float32) for s in shapes]
        try:
            with np.errstate(all="ignore"):
                out = np.asarray(self.fn(*probe))
        except (ValueError, IndexError, TypeError) as error:
            raise ModelError(f"ONNX {self.op} on inputs {list(shapes)}: {error}") from None
        if out.ndim == 0 or out.shape[0] != 1:
            raise ModelError(f"ONNX {self.op} mixes the batch dimension (output {out.shape})")
        return tuple(int(s) for s in out.shape[1:])

    def forward(self, *xs):
        dtype = xs[0].dtype if xs and xs[0].dtype.kind == "f" else np.float32
        return np.asarray(self.fn(*xs)).astype(dtype, copy=False)

    def lower(self, in_qparams, out_qparams, config):
        return _FloatNode(self, out_qparams, config)


class _FloatNode:
    """Quantized-graph form: dequantize, compute in float, quantize to the node's grid."""

    takes_multiplier = False

    def __init__(self, layer, out_qparams, config):
        self.layer, self.out_qparams, self.config = layer, out_qparams, config

    def forward(self, inputs, multiplier=None):
        out_qp = self.out_qparams.to_domain(inputs[0].qparams.signed)
        # float32, as ONNX Runtime's DequantizeLinear -> op -> QuantizeLinear
        y = self.layer.forward(*(x.dequantize().astype(np.float32) for x in inputs))
        return QTensor(quantize_values(y, out_qp, self.config), out_qp)


class SoftmaxOp(OnnxFloatOp):
    """ONNX Softmax over ``axis``, or (``flatten=True``, opset < 13) over all axes from it on.

    With ``requantization="onnxruntime"`` its quantized form is ONNX Runtime's
    QLinearSoftmax (which it fuses DQ -> Softmax -> Q into): over the flattened
    trailing axes, or over one axis moved last, as ONNX Runtime transposes it.
    """

    def __init__(self, axis, flatten):
        fn = (lambda x: softmax(x, None, axis)) if flatten else (lambda x: softmax(x, axis))
        super().__init__("Softmax", fn)
        self.axis, self.flatten = axis, flatten

    def lower(self, in_qparams, out_qparams, config):
        if config.requantization != "onnxruntime":
            return super().lower(in_qparams, out_qparams, config)
        return _SoftmaxNode(self.axis, self.flatten, in_qparams[0], out_qparams)


class _SoftmaxNode:
    takes_multiplier = False

    def __init__(self, axis, flatten, in_qparams, out_qparams):
        self.axis, self.flatten = axis, flatten
        self.in_qparams, self.out_qparams = in_qparams, out_qparams

    def forward(self, inputs, multiplier=None):
        codes = inputs[0].codes
        signed = inputs[0].qparams.signed  # either domain: the same codes (qlinear_softmax)
        x_qp, out_qp = (q.to_domain(signed) for q in (self.in_qparams, self.out_qparams))
        if self.flatten:
            rows = codes.reshape(int(np.prod(codes.shape[:self.axis])), -1)
            out = qlinear_softmax(rows, x_qp, out_qp).reshape(codes.shape)
        else:
            out = np.moveaxis(qlinear_softmax(np.moveaxis(codes, self.axis, -1), x_qp, out_qp),
                              -1, self.axis)
        return QTensor(np.ascontiguousarray(out), out_qp)


class BinaryOp(OnnxFloatOp):
    """ONNX Add or Mul of an activation by an activation or a quantized constant
    (``constant``: its codes, QParams and input position). With
    ``requantization="onnxruntime"`` its quantized form is ONNX Runtime's QLinearAdd or
    QLinearMul (which it fuses DQ -> op -> Q into), broadcasting as ONNX does."""

    ARITHMETIC = {"Add": qlinear_add, "Mul": qlinear_mul}

    def __init__(self, op, fn, arity, constant=None):
        super().__init__(op, fn, arity)
        self.constant = constant

    def lower(self, in_qparams, out_qparams, config):
        if config.requantization != "onnxruntime" or (self.arity == 1 and self.constant is None):
            return super().lower(in_qparams, out_qparams, config)
        return _BinaryNode(self.ARITHMETIC[self.op], in_qparams, out_qparams, self.constant)


class _BinaryNode:
    takes_multiplier = False

    def __init__(self, arithmetic, in_qparams, out_qparams, constant):
        self.arithmetic, self.in_qparams = arithmetic, in_qparams
        self.out_qparams, self.constant = out_qparams, constant

    def forward(self, inputs, multiplier=None):
        def compute(*codes):
            operands = list(zip(codes, self.in_qparams))
            if self.constant is not None:
                constant_codes, qparams, position = self.constant
                operands.insert(position, (constant_codes, qparams))
            (a, a_qp), (b, b_qp) = operands
            return self.arithmetic(a, a_qp, b, b_qp, self.out_qparams)
        return in_own_domains(compute, inputs, self.in_qparams, self.out_qparams)


class ShapeOp(OnnxFloatOp):
    """Reshape, Transpose, Squeeze, ...: the same function on codes, on the input's grid."""

    def lower(self, in_qparams, out_qparams, config):
        return CodeOp(self, in_qparams[0])

    def forward_codes(self, x):
        return QTensor(np.asarray(self.fn(x.codes)), x.qparams)


class ZeroPad(ShapeOp):
    """A convolution's asymmetric zero padding: on codes it pads with the zero point."""

    def __init__(self, widths):
        super().__init__("Pad", lambda x: np.pad(x, widths), 1, "conv padding")
        self.widths = widths

    def forward_codes(self, x):
        zp = int(x.qparams.zero_point)
        return QTensor(np.pad(x.codes, self.widths, constant_values=zp), x.qparams)


def bind(fn, slots):
    """``fn`` over ONNX inputs, where ``slots`` holds constants and None for activations.

    >>> add = bind(np.add, [None, np.float32(2)])
    >>> add(np.ones(2)).tolist()
    [3.0, 3.0]
    """
    def bound(*xs):
        it = iter(xs)
        return fn(*(next(it) if s is None else s for s in slots))
    return bound


def window_pool(kind, kernel, strides, pads, dilations, ceil_mode, count_include_pad):
    """ONNX MaxPool/AveragePool on NCHW: explicit (asymmetric) pads, ceil mode, dilation 1.

    >>> f = window_pool("max", (2, 2), (2, 2), (0, 0, 1, 1), (1, 1), False, False)
    >>> f(np.arange(9.0).reshape(1, 1, 3, 3))[0, 0].tolist()
    [[4.0, 5.0], [7.0, 8.0]]
    """
    if tuple(dilations) != (1, 1):
        raise ModelError(f"{kind} pooling with dilations {list(dilations)} is not supported")
    kernel, strides = tuple(kernel), tuple(strides)

    def out_size(n, k, s, p0, p1):
        span = n + p0 + p1 - k
        size = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (size - 1) * s >= n + p0:  # ONNX: the last window starts inside
            size -= 1
        return size

    def fn(x):
        h, w = x.shape[2:]
        oh = out_size(h, kernel[0], strides[0], pads[0], pads[2])
        ow = out_size(w, kernel[1], strides[1], pads[1], pads[3])
        extra_h = max((oh - 1) * strides[0] + kernel[0] - (h + pads[0] + pads[2]), 0)
        extra_w = max((ow - 1) * strides[1] + kernel[1] - (w + pads[1] + pads[3]), 0)
        widths = ((0, 0), (0, 0), (pads[0], pads[2] + extra_h), (pads[1], pads[3] + extra_w))
        fill = -np.inf if kind == "max" else 0.0
        padded = np.pad(x, widths, constant_values=fill)
        if kind == "max":
            return pool(padded, "max", kernel, strides, (0, 0), (oh, ow), fill)
        total = pool(padded, "avg", kernel, strides, (0, 0), (oh, ow), 0.0)
        # Divisor: the taps inside the input, plus the explicit pads if counted.
        mask = np.zeros((1, 1, *padded.shape[2:]), x.dtype)
        if count_include_pad:
            mask[..., :h + pads[0] + pads[2], :w + pads[1] + pads[3]] = 1
        else:
            mask[..., pads[0]:pads[0] + h, pads[1]:pads[1] + w] = 1
        count = pool(mask, "avg", kernel, strides, (0, 0), (oh, ow), 0.0)
        return total / np.maximum(count, 1)
    return fn


def softmax(x, axis, flatten_from=None):
    """Softmax over ``axis``; ``flatten_from`` gives opset < 13's coerce-to-2-D rule."""
    if flatten_from is not None:
        shape = x.shape
        flat = x.reshape(int(np.prod(shape[:flatten_from])), -1)
        return softmax(flat, 1).reshape(shape)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lrn(x, size, alpha, beta, bias):
    """Local response normalization across channels (ONNX LRN)."""
    sq = np.pad(x * x, ((0, 0), ((size - 1) // 2, size // 2), (0, 0), (0, 0)))
    total = sum(sq[:, i:i + x.shape[1]] for i in range(size))
    return x / (bias + alpha / size * total) ** beta
