"""Small neural networks: float inference, quantization, integer inference.

A :class:`Model` is a graph of named nodes (a sequence is the common case)
over NumPy float arrays in NCHW layout. :func:`quantize` calibrates it into a
:class:`QuantizedModel`, whose integer inference sends every multiplication
of a Conv2d or Linear layer through an approximate multiplier (one per layer,
assignable by name) and does everything else exactly in integers, as 8-bit
inference hardware would. docs/quantization.md states the arithmetic.

Example:
    >>> import numpy as np
    >>> from approxmul_cffi import nn
    >>> rng = np.random.default_rng(0)
    >>> model = nn.Model((2, 4, 4), [
    ...     ("conv", nn.Conv2d(2, 3, 3, padding=1, weight=rng.normal(size=(3, 2, 3, 3)))),
    ...     ("relu", nn.ReLU()),
    ...     ("pool", nn.GlobalAvgPool()),
    ...     ("fc", nn.Linear(3, 2, weight=rng.normal(size=(2, 3)))),
    ... ])
    >>> x = rng.uniform(size=(5, 2, 4, 4))
    >>> qmodel = nn.quantize(model, x)
    >>> qmodel.layer_names
    ['conv', 'fc']
    >>> bool(np.abs(qmodel.run(x) - model.forward(x)).max() < 0.1)
    True
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
from collections.abc import Mapping

import numpy as np

from . import quant
from .errors import ApproxmulError

__all__ = [
    "Add", "AvgPool2d", "BatchNorm2d", "Conv2d", "Flatten", "GlobalAvgPool",
    "Layer", "Linear", "MaxPool2d", "Model", "ModelError", "QuantizedModel",
    "ReLU", "ReLU6", "Softmax", "quantize",
]

FORMAT = "approxmul-model"
FORMAT_VERSION = 1
INPUT = "input"
# Bytes of im2col columns built at once by the float conv (and _conv2d_codes).
_IM2COL_BUDGET = 1 << 24


class ModelError(ApproxmulError, ValueError):
    """A model, its files, its data or a multiplier assignment is invalid."""


def _core():
    # Imported late: nn is also useful for float work before the library loads.
    import approxmul_cffi
    return approxmul_cffi


def _pair(value, what):
    if isinstance(value, (int, np.integer)):
        return (int(value), int(value))
    try:
        pair = tuple(int(v) for v in value)
    except TypeError:
        pair = ()
    if len(pair) != 2:
        raise ModelError(f"{what} must be an int or a pair of ints, got {value!r}")
    return pair


# --------------------------------------------------------------------------
# Sliding windows shared by convolution and pooling, float and integer.

def _out_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _pad(x, padding, value):
    ph, pw = padding
    if ph == 0 and pw == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _windows(x, kernel, stride, padding, dilation, pad_value):
    """Read-only view (N, C, OH, OW, KH, KW) of the padded input's windows."""
    x = _pad(x, padding, pad_value)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x, (n, c, oh, ow, kh, kw),
        (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw), writeable=False,
    )


def _conv_by_columns(x, w, geom, pad_value, matmul, out_dtype):
    """Grouped convolution as im2col GEMMs, the batch in bounded chunks.

    ``matmul(cols (P, K), w_g.T (K, O_g))`` is float matmul or the
    approximate one: the multiplier sees (activation, weight) code pairs.
    """
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    g = geom["groups"]
    og = o // g
    oh = _out_size(h, kh, geom["stride"][0], geom["padding"][0], geom["dilation"][0])
    ow = _out_size(wd, kw, geom["stride"][1], geom["padding"][1], geom["dilation"][1])
    out = np.empty((n, o, oh, ow), dtype=out_dtype)
    per_image = oh * ow * cg * kh * kw * x.itemsize
    chunk = max(1, _IM2COL_BUDGET // max(per_image, 1))
    for i in range(0, n, chunk):
        win = _windows(x[i:i + chunk], (kh, kw), geom["stride"], geom["padding"],
                       geom["dilation"], pad_value)
        b = win.shape[0]
        for gi in range(g):
            cols = win[:, gi * cg:(gi + 1) * cg].transpose(0, 2, 3, 1, 4, 5)
            cols = cols.reshape(b * oh * ow, cg * kh * kw)
            wg = w[gi * og:(gi + 1) * og].reshape(og, cg * kh * kw)
            acc = matmul(cols, wg.T)
            out[i:i + b, gi * og:(gi + 1) * og] = acc.reshape(b, oh, ow, og).transpose(0, 3, 1, 2)
    return out


def _conv2d_codes(x, w, multiplier, *, stride, padding, dilation, groups,
                  x_zero_point, w_zero_point):
    """Integer conv2d accumulators via im2col + approximate matmul.

    Same contract as ``approxmul_cffi.conv2d`` (padded taps hold the code
    ``x_zero_point`` and go through the multiplier like any code), built
    from other parts: the tests hold the two against each other.
    """
    am = _core()
    geom = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)

    def mm(a, b):
        return am.matmul(a, b, multiplier, a_zero_point=x_zero_point, b_zero_point=w_zero_point)

    return _conv_by_columns(x, w, geom, x_zero_point, mm, np.int64)


def _pool(x, kind, kernel, stride, padding, pad_value):
    win = _windows(x, kernel, stride, padding, (1, 1), pad_value)
    integer = x.dtype.kind in "iu"
    if kind == "max" or integer:
        # One elementwise pass per tap over strided views: a reduction over
        # the two small window axes of a strided view runs ~10x slower. Max
        # and integer sums do not depend on the order; float sums keep
        # NumPy's reduction (its pairwise rounding).
        out = np.array(win[..., 0, 0], dtype=win.dtype if kind == "max" else np.int64)
        step = np.maximum if kind == "max" else np.add
        for i in range(win.shape[4]):
            for j in range(win.shape[5]):
                if i or j:
                    step(out, win[..., i, j], out=out)
        return out
    return win.sum(axis=(4, 5))


# --------------------------------------------------------------------------
# Float layers. Each knows its config (for JSON), parameters (for .npz),
# output shape (to check that a graph chains) and float forward pass.

_OPS = {}


def _register(cls):
    _OPS[cls.__name__] = cls
    return cls


class Layer:
    """Base class: a layer without parameters taking one input."""

    arity = 1
    param_names = ()

    def config(self):
        return {}

    def param_shapes(self):
        return {}

    def params(self):
        return {name: getattr(self, name) for name in self.param_shapes()}

    def set_param(self, name, value):
        shapes = self.param_shapes()
        if name not in shapes:
            raise ModelError(f"{type(self).__name__} has no parameter {name!r}")
        value = np.asarray(value)
        if value.dtype.kind not in "fiu":
            raise ModelError(f"parameter {name!r} must be numeric, got dtype {value.dtype}")
        if not np.all(np.isfinite(value)):
            raise ModelError(f"parameter {name!r} contains NaN or infinity")
        if value.shape != shapes[name]:
            raise ModelError(
                f"parameter {name!r} has shape {value.shape}, {type(self).__name__} "
                f"{self.config()} needs {shapes[name]}"
            )
        setattr(self, name, value.astype(np.float32))

    def _init_params(self, given):
        for name, shape in self.param_shapes().items():
            value = given.get(name)
            self.set_param(name, np.zeros(shape) if value is None else value)

    def output_shape(self, *shapes):
        return shapes[0]

    def forward(self, *xs):  # every concrete layer defines its own
        raise NotImplementedError(f"{type(self).__name__} defines no forward()")

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{type(self).__name__}({args})"


def _need_ndim(layer, shape, ndim, what):
    if len(shape) != ndim:
        raise ModelError(f"{type(layer).__name__} needs {what}, got per-sample shape {shape}")


@_register
class Conv2d(Layer):
    """2-D convolution, NCHW input, OIHW weight ``(out, in / groups, kh, kw)``.

    ``groups == in_channels == out_channels`` is a depthwise convolution.
    Missing weights start at zero.

    >>> Conv2d(4, 8, 3, padding=1, groups=4).weight.shape
    (8, 1, 3, 3)
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, *, weight=None, bias_value=None):
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.padding = _pair(padding, "padding")
        self.dilation = _pair(dilation, "dilation")
        self.groups = int(groups)
        self.has_bias = bool(bias)
        if min(self.in_channels, self.out_channels, self.groups, *self.kernel_size,
               *self.stride, *self.dilation) < 1 or min(self.padding) < 0:
            raise ModelError(f"Conv2d: invalid sizes in {self.config()}")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ModelError(
                f"Conv2d: groups={self.groups} must divide in_channels={self.in_channels} "
                f"and out_channels={self.out_channels}"
            )
        self._init_params({"weight": weight, "bias": bias_value})

    def config(self):
        return dict(in_channels=self.in_channels, out_channels=self.out_channels,
                    kernel_size=list(self.kernel_size), stride=list(self.stride),
                    padding=list(self.padding), dilation=list(self.dilation),
                    groups=self.groups, bias=self.has_bias)

    def param_shapes(self):
        shapes = {"weight": (self.out_channels, self.in_channels // self.groups, *self.kernel_size)}
        if self.has_bias:
            shapes["bias"] = (self.out_channels,)
        return shapes

    @property
    def geometry(self):
        return dict(stride=self.stride, padding=self.padding, dilation=self.dilation,
                    groups=self.groups)

    def output_shape(self, shape):
        _need_ndim(self, shape, 3, "(C, H, W) input")
        if shape[0] != self.in_channels:
            raise ModelError(f"Conv2d expects {self.in_channels} input channels, got {shape[0]}")
        oh, ow = (_out_size(shape[i + 1], self.kernel_size[i], self.stride[i],
                            self.padding[i], self.dilation[i]) for i in range(2))
        if oh < 1 or ow < 1:
            raise ModelError(f"Conv2d {self.config()} leaves no output for input {shape}")
        return (self.out_channels, oh, ow)

    def forward(self, x):
        y = _conv_by_columns(x, self.weight.astype(x.dtype), self.geometry, 0.0, np.matmul, x.dtype)
        if self.has_bias:
            y += self.bias.astype(x.dtype).reshape(1, -1, 1, 1)
        return y


@_register
class Linear(Layer):
    """Fully connected layer ``y = x @ weight.T + bias``, weight ``(out, in)``."""

    def __init__(self, in_features, out_features, bias=True, *, weight=None, bias_value=None):
        self.in_features, self.out_features = int(in_features), int(out_features)
        if min(self.in_features, self.out_features) < 1:
            raise ModelError(f"Linear: invalid sizes {self.config()}")
        self.has_bias = bool(bias)
        self._init_params({"weight": weight, "bias": bias_value})

    def config(self):
        return dict(in_features=self.in_features, out_features=self.out_features,
                    bias=self.has_bias)

    def param_shapes(self):
        shapes = {"weight": (self.out_features, self.in_features)}
        if self.has_bias:
            shapes["bias"] = (self.out_features,)
        return shapes

    def output_shape(self, shape):
        _need_ndim(self, shape, 1, "a flat (features,) input (add a Flatten)")
        if shape[0] != self.in_features:
            raise ModelError(f"Linear expects {self.in_features} input features, got {shape[0]}")
        return (self.out_features,)

    def forward(self, x):
        y = x @ self.weight.astype(x.dtype).T
        return y + self.bias.astype(x.dtype) if self.has_bias else y


@_register
class BatchNorm2d(Layer):
    """Inference-mode batch norm; folded into the preceding Conv2d when quantized."""

    def __init__(self, num_features, eps=1e-5, *, weight=None, bias=None,
                 running_mean=None, running_var=None):
        self.num_features, self.eps = int(num_features), float(eps)
        if running_var is None:
            running_var = np.ones(self.num_features)
        if weight is None:
            weight = np.ones(self.num_features)
        self._init_params(dict(weight=weight, bias=bias, running_mean=running_mean,
                               running_var=running_var))

    def config(self):
        return dict(num_features=self.num_features, eps=self.eps)

    def param_shapes(self):
        return {k: (self.num_features,) for k in ("weight", "bias", "running_mean", "running_var")}

    def output_shape(self, shape):
        _need_ndim(self, shape, 3, "(C, H, W) input")
        if shape[0] != self.num_features:
            raise ModelError(f"BatchNorm2d expects {self.num_features} channels, got {shape[0]}")
        return shape

    def forward(self, x):
        scale = self.weight / np.sqrt(self.running_var + self.eps)
        shift = self.bias - self.running_mean * scale
        return x * scale.astype(x.dtype).reshape(1, -1, 1, 1) + shift.astype(x.dtype).reshape(1, -1, 1, 1)


@_register
class ReLU(Layer):
    """max(x, 0); fused into the preceding Conv2d/Linear's clamp when quantized."""

    activation = "relu"

    def forward(self, x):
        return np.maximum(x, 0)


@_register
class ReLU6(ReLU):
    """min(max(x, 0), 6)."""

    activation = "relu6"

    def forward(self, x):
        return np.clip(x, 0, 6)


class _Pool(Layer):
    kind = None

    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(self.kernel_size if stride is None else stride, "stride")
        self.padding = _pair(padding, "padding")
        if min(*self.kernel_size, *self.stride) < 1 or min(self.padding) < 0 or any(
                p > k // 2 for p, k in zip(self.padding, self.kernel_size)):
            raise ModelError(f"{type(self).__name__}: invalid sizes {self.config()}"
                             " (padding must be at most half the kernel)")

    def config(self):
        return dict(kernel_size=list(self.kernel_size), stride=list(self.stride),
                    padding=list(self.padding))

    def output_shape(self, shape):
        _need_ndim(self, shape, 3, "(C, H, W) input")
        oh, ow = (_out_size(shape[i + 1], self.kernel_size[i], self.stride[i], self.padding[i], 1)
                  for i in range(2))
        if oh < 1 or ow < 1:
            raise ModelError(f"{type(self).__name__} {self.config()} leaves no output for {shape}")
        return (shape[0], oh, ow)


@_register
class MaxPool2d(_Pool):
    """Max pooling (padding never wins the max)."""

    kind = "max"

    def forward(self, x):
        return _pool(x, "max", self.kernel_size, self.stride, self.padding, -np.inf)


@_register
class AvgPool2d(_Pool):
    """Average pooling; padded taps count as zeros (PyTorch's count_include_pad)."""

    kind = "avg"

    def forward(self, x):
        s = _pool(x, "avg", self.kernel_size, self.stride, self.padding, 0.0)
        return s / (self.kernel_size[0] * self.kernel_size[1])


@_register
class GlobalAvgPool(Layer):
    """Mean over H and W: (C, H, W) -> (C,)."""

    def output_shape(self, shape):
        _need_ndim(self, shape, 3, "(C, H, W) input")
        return (shape[0],)

    def forward(self, x):
        return x.mean(axis=(2, 3))


@_register
class Flatten(Layer):
    """(C, H, W) -> (C*H*W,) in C order, like torch.flatten(x, 1)."""

    def output_shape(self, shape):
        return (int(np.prod(shape)),)

    def forward(self, x):
        return x.reshape(x.shape[0], -1)


@_register
class Softmax(Layer):
    """Softmax over features; in a quantized model it runs in float, last."""

    def output_shape(self, shape):
        _need_ndim(self, shape, 1, "a flat (features,) input")
        return shape

    def forward(self, x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


@_register
class Add(Layer):
    """Elementwise sum of two inputs of equal shape (residual connection)."""

    arity = 2

    def output_shape(self, a, b):
        if a != b:
            raise ModelError(f"Add needs inputs of equal shape, got {a} and {b}")
        return a

    def forward(self, a, b):
        return a + b


# --------------------------------------------------------------------------
# Model graph


@dataclasses.dataclass
class Node:
    name: str
    layer: Layer
    inputs: list


class Model:
    """A graph of named layers with one float input and one output.

    ``nodes`` are ``(name, layer)`` (input: the previous node, or the model
    input for the first) or ``(name, layer, [input names])``, in an order
    where every input is defined before use. ``input_shape`` is one sample's
    shape, e.g. ``(1, 8, 8)``.

    >>> m = Model((3,), [("fc", Linear(3, 2)), ("sm", Softmax())])
    >>> m.forward(np.zeros((4, 3))).shape, m.output
    ((4, 2), 'sm')
    """

    def __init__(self, input_shape, nodes, *, output=None, metadata=None):
        self.input_shape = tuple(int(s) for s in input_shape)
        self.metadata = dict(metadata or {})
        self.nodes = []
        previous = INPUT
        for entry in nodes:
            if isinstance(entry, Node):
                entry = (entry.name, entry.layer, entry.inputs)
            if len(entry) == 2:
                entry = (*entry, [previous])
            name, layer, inputs = entry
            if isinstance(inputs, str):
                inputs = [inputs]
            self.nodes.append(Node(str(name), layer, list(inputs)))
            previous = name
        if not self.nodes:
            raise ModelError("a model needs at least one layer")
        self.output = self.nodes[-1].name if output is None else output
        self.shapes = self._check_graph()

    def _check_graph(self):
        shapes = {INPUT: self.input_shape}
        for node in self.nodes:
            if not node.name or node.name in shapes:
                raise ModelError(f"layer name {node.name!r} is empty, reserved or used twice")
            if not isinstance(node.layer, Layer):
                raise ModelError(f"layer {node.name!r} is not an nn.Layer: {node.layer!r}")
            if len(node.inputs) != node.layer.arity:
                raise ModelError(f"layer {node.name!r} takes {node.layer.arity} input(s), "
                                 f"got {node.inputs}")
            for src in node.inputs:
                if src not in shapes:
                    raise ModelError(f"layer {node.name!r} reads {src!r}, which is not "
                                     "defined before it")
            try:
                shapes[node.name] = tuple(node.layer.output_shape(*(shapes[s] for s in node.inputs)))
            except ModelError as e:
                raise ModelError(f"layer {node.name!r}: {e}") from None
        if self.output not in shapes:
            raise ModelError(f"output {self.output!r} is not a layer of the model")
        return shapes

    @property
    def layers(self):
        return {node.name: node.layer for node in self.nodes}

    def check_input(self, x):
        """``x`` as a floating-point array of shape (N, *input_shape), or ModelError."""
        if not isinstance(x, np.ndarray):
            x = np.asarray(x)
        if x.dtype.kind != "f":
            raise ModelError(f"input data must be a floating-point array, got dtype {x.dtype}")
        if x.shape[1:] != self.input_shape or x.ndim != len(self.input_shape) + 1:
            raise ModelError(f"input data has shape {x.shape}, the model needs "
                             f"(N, {', '.join(map(str, self.input_shape))})")
        return x

    def forward(self, x, *, return_all=False):
        """Float inference; ``return_all`` gives every node's output by name."""
        values = {INPUT: self.check_input(x)}
        for node in self.nodes:
            values[node.name] = node.layer.forward(*(values[s] for s in node.inputs))
        return values if return_all else values[self.output]

    def predict(self, x):
        return self.forward(x).argmax(axis=-1)

    # ---- files: structure in JSON, weights in .npz next to it ----

    def to_json(self, weights_file):
        nodes = [dict(name=n.name, op=type(n.layer).__name__, inputs=n.inputs,
                      config=n.layer.config()) for n in self.nodes]
        return dict(format=FORMAT, version=FORMAT_VERSION,
                    input=dict(name=INPUT, shape=list(self.input_shape)),
                    output=self.output, weights=weights_file, nodes=nodes,
                    metadata=self.metadata)

    def save(self, path):
        """Write ``<stem>.json`` and ``<stem>.npz``; returns the JSON path.

        >>> import tempfile, os
        >>> m = Model((3,), [("fc", Linear(3, 2, weight=np.ones((2, 3))))])
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = m.save(os.path.join(d, "tiny"))
        ...     bool((Model.load(p).forward(np.ones((1, 3))) == 3).all())
        True
        """
        stem = os.fspath(path)
        if stem.endswith(".json"):
            stem = stem[:-5]
        weights = {f"{n.name}.{k}": v for n in self.nodes for k, v in n.layer.params().items()}
        np.savez(stem + ".npz", **weights)
        with open(stem + ".json", "w") as f:
            json.dump(self.to_json(os.path.basename(stem) + ".npz"), f, indent=1)
            f.write("\n")
        return stem + ".json"

    @classmethod
    def load(cls, path):
        """Read a model saved by :meth:`save` (path of the JSON, or its stem).

        Declared sizes are checked against the weights file and the layers
        before anything is allocated (:mod:`approxmul_cffi.model_files`).
        """
        from .model_files import read_model

        shape, nodes, output, metadata, path = read_model(path, _OPS, FORMAT, FORMAT_VERSION)
        try:
            return cls(shape, nodes, output=output, metadata=metadata)
        except (KeyError, TypeError) as e:
            raise ModelError(f"model file {path} is malformed: missing or bad entry {e}") from None
        except ModelError as e:
            raise ModelError(f"model file {path}: {e}") from None


# --------------------------------------------------------------------------
# Quantized graph


@dataclasses.dataclass
class QTensor:
    """Integer codes with the QParams of their domain (int8 or uint8)."""

    codes: np.ndarray
    qparams: quant.QParams

    def to_domain(self, signed):
        if signed == self.qparams.signed:
            return self
        return QTensor(quant.convert_codes(self.codes, signed), self.qparams.to_domain(signed))

    def dequantize(self):
        return self.qparams.dequantize(self.codes)


def _rounded_mean(centered_sum, count):
    """round_half_away(sum / count) for integer sums, exactly."""
    s = np.asarray(centered_sum, dtype=np.int64)
    return np.sign(s) * ((2 * np.abs(s) + count) // (2 * count))


class _QNode:
    multiplier = False

    def __init__(self, name, inputs, out_qp):
        self.name, self.inputs, self.out_qp = name, inputs, out_qp


class _QWeighted(_QNode):
    """Conv2d or Linear (+ folded BN, + fused ReLU/ReLU6)."""

    multiplier = True

    def __init__(self, name, inputs, layer, weight, bias, in_qp, out_qp, activation, config):
        super().__init__(name, inputs, out_qp)
        self.layer, self.weight, self.bias = layer, weight, bias
        self.in_qp, self.activation, self.config = in_qp, activation, config
        self._cache = {}

    def weights(self, signed):
        """Weight codes, int32 bias and requantization factors for a domain."""
        if signed not in self._cache:
            per_channel, symmetric = self.config.weight_scheme(signed)
            codes, wqp = quant.quantize_weight(self.weight, signed=signed,
                                               per_channel=per_channel, symmetric=symmetric)
            s_x = float(self.in_qp.scale)
            bias = quant.quantize_bias(self.bias, s_x, wqp.scale)
            mantissa, shift = quant.quantize_multiplier(s_x * wqp.scale / float(self.out_qp.scale))
            w_zp = int(np.ravel(wqp.zero_point)[0])  # one per tensor, see QuantConfig
            self._cache[signed] = dict(codes=codes, qparams=wqp, zero_point=w_zp, bias=bias,
                                       mantissa=mantissa, shift=shift)
        return self._cache[signed]

    def accumulate(self, x, w, multiplier, x_zp, w_zp):
        am = _core()
        if isinstance(self.layer, Linear):
            return am.matmul(x, w.T, multiplier, a_zero_point=x_zp, b_zero_point=w_zp)
        geom = self.layer.geometry
        return am.conv2d(x, w, multiplier, stride=geom["stride"], padding=geom["padding"],
                    dilation=geom["dilation"], groups=geom["groups"],
                    x_zero_point=x_zp, w_zero_point=w_zp)

    def forward(self, xs, multipliers):
        m = multipliers[self.name]
        signed = bool(m.signed)
        x = xs[0].to_domain(signed)
        wq = self.weights(signed)
        acc = self.accumulate(x.codes, wq["codes"], m, int(x.qparams.zero_point), wq["zero_point"])
        out_qp = self.out_qp.to_domain(signed)
        lo, hi = quant.activation_bounds(out_qp, self.activation)
        codes = quant.requantize(acc, wq["bias"], wq["mantissa"], wq["shift"],
                                 int(out_qp.zero_point), lo, hi, axis=1, signed=signed,
                                 rounding=self.config.rounding)
        return QTensor(codes, out_qp)


class _QCodes(_QNode):
    """Layers that act on codes without changing the scale."""

    def __init__(self, name, inputs, layer):
        super().__init__(name, inputs, None)
        self.layer = layer

    def forward(self, xs, multipliers):
        x = xs[0]
        qp, codes, layer = x.qparams, x.codes, self.layer
        zp = int(qp.zero_point)
        if isinstance(layer, ReLU):
            lo, hi = quant.activation_bounds(qp, layer.activation)
            out = np.clip(codes, lo, hi)
        elif isinstance(layer, MaxPool2d):
            out = _pool(codes, "max", layer.kernel_size, layer.stride, layer.padding, qp.qmin)
        elif isinstance(layer, (AvgPool2d, GlobalAvgPool)):
            # Mean of (q - zp) so the result is the same in both code domains.
            if isinstance(layer, GlobalAvgPool):
                total, count = codes.sum(axis=(2, 3), dtype=np.int64), codes.shape[2] * codes.shape[3]
            else:
                total = _pool(codes, "avg", layer.kernel_size, layer.stride, layer.padding, zp)
                count = layer.kernel_size[0] * layer.kernel_size[1]
            out = _rounded_mean(total - count * zp, count) + zp
        elif isinstance(layer, Flatten):
            out = codes.reshape(codes.shape[0], -1)
        else:  # pragma: no cover - quantize() only builds the cases above
            raise ModelError(f"no integer implementation of {type(layer).__name__}")
        return QTensor(np.asarray(out).astype(codes.dtype), qp)


class _QAdd(_QNode):
    """TFLite's integer add: both inputs rescaled to 2*max(s) with 20 bits headroom."""

    LEFT_SHIFT = 20

    def __init__(self, name, inputs, in_qps, out_qp, config):
        super().__init__(name, inputs, out_qp)
        s1, s2, so = (float(q.scale) for q in (*in_qps, out_qp))
        twice_max = 2 * max(s1, s2)
        self.factors = [quant.quantize_multiplier(s / twice_max) for s in (s1, s2)]
        self.out_factor = quant.quantize_multiplier(twice_max / ((1 << self.LEFT_SHIFT) * so))
        self.rounding = config.rounding

    def forward(self, xs, multipliers):
        signed = xs[0].qparams.signed
        total = 0
        for x, (m, s) in zip(xs, self.factors):
            centered = x.codes.astype(np.int64) - int(x.qparams.zero_point)
            total = total + quant.multiply_by_quantized_multiplier(
                centered << self.LEFT_SHIFT, m, s, self.rounding)
        out_qp = self.out_qp.to_domain(signed)
        y = quant.multiply_by_quantized_multiplier(total, *self.out_factor, self.rounding)
        codes = np.clip(y + int(out_qp.zero_point), out_qp.qmin, out_qp.qmax)
        return QTensor(codes.astype(out_qp.dtype), out_qp)


class _QSoftmax(_QNode):
    def forward(self, xs, multipliers):
        return Softmax().forward(xs[0].dequantize())


class _RangeObserver:
    def __init__(self, method, percentile):
        self.method, self.percentile = method, percentile
        self.lo, self.hi, self.samples = np.inf, -np.inf, []

    def update(self, x):
        if self.method == "percentile":
            self.samples.append(np.ravel(x))
        else:
            lo, hi = quant.observe_range(x)
            self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)

    def range(self):
        if self.method == "percentile":
            return quant.observe_range(np.concatenate(self.samples), method="percentile",
                                       percentile=self.percentile)
        return self.lo, self.hi


def quantize(model, calibration_data, config=None, *, batch_size=256):
    """Calibrate ``model`` on sample inputs and build its quantized twin.

    Activation ranges come from running the float model on
    ``calibration_data`` (min/max or percentile, per ``config``). Batch norms
    are folded into their Conv2d, and a ReLU/ReLU6 that is the only reader of
    a Conv2d/Linear becomes its output clamp. Weights are quantized lazily
    per code domain, since that depends on each layer's multiplier.
    """
    config = quant.QuantConfig() if config is None else config
    x = model.check_input(calibration_data)
    if len(x) == 0:
        raise ModelError("calibration data is empty")
    observers = {}
    for i in range(0, len(x), batch_size):
        with np.errstate(all="ignore"):  # non-finite values are reported below, by layer
            outputs = model.forward(x[i:i + batch_size], return_all=True)
        for name, value in outputs.items():
            if not np.all(np.isfinite(value)):  # say whose fault: the data's or a layer's
                raise ModelError("calibration data contains NaN or infinity" if name == INPUT
                                 else f"layer {name!r} computes NaN or infinity on finite "
                                 "calibration data: its parameters are out of range (a negative "
                                 "BatchNorm variance, weights near the float32 limit?)")
            observers.setdefault(name, _RangeObserver(config.calibration, config.percentile)).update(value)
    qparams = {}
    for name, obs in observers.items():
        lo, hi = obs.range()
        qparams[name] = quant.choose_qparams(lo, hi, signed=False,
                                             symmetric=config.activation_symmetric)
    return QuantizedModel(model, qparams, config)


class QuantizedModel:
    """Integer inference of a calibrated :class:`Model`; see :func:`quantize`.

    Only the code-by-code products of Conv2d and Linear layers go through the
    multipliers; :meth:`run` takes one multiplier for every layer and
    optional per-layer overrides by name.
    """

    def __init__(self, model, qparams, config):
        self.model, self.qparams, self.config = model, qparams, config
        readers = {}
        for node in model.nodes:
            for src in node.inputs:
                readers.setdefault(src, []).append(node)
        self.input_qparams = qparams[INPUT]
        alias = {INPUT: INPUT}  # float node name -> quantized node producing it
        # Scale of each quantized node's output: pooling etc. keep their input's.
        scales = {INPUT: qparams[INPUT]}
        self.nodes = []
        fused = set()

        def sole_reader(name, kind):
            r = readers.get(name, [])
            if len(r) == 1 and isinstance(r[0].layer, kind) and name != model.output:
                return r[0]
            return None

        for node in model.nodes:
            if node.name in fused:
                continue
            layer, inputs = node.layer, [alias[s] for s in node.inputs]
            if isinstance(layer, (Conv2d, Linear)):
                weight = layer.weight.astype(np.float64)
                bias = layer.bias if layer.has_bias else np.zeros(weight.shape[0])
                tail = node
                bn = sole_reader(node.name, BatchNorm2d) if isinstance(layer, Conv2d) else None
                if bn is not None:
                    b = bn.layer
                    weight, bias = quant.fold_batchnorm(weight, bias, b.weight, b.bias,
                                                        b.running_mean, b.running_var, b.eps)
                    tail = bn
                act = sole_reader(tail.name, ReLU)
                if act is not None:
                    tail = act
                for t in (bn, act):
                    if t is not None:
                        fused.add(t.name)
                        alias[t.name] = node.name
                q = _QWeighted(node.name, inputs, layer, weight, bias, scales[inputs[0]],
                               qparams[tail.name], act.layer.activation if act else None, config)
            elif isinstance(layer, BatchNorm2d):
                raise ModelError(f"BatchNorm2d {node.name!r} must be the only reader of a "
                                 "Conv2d to be folded into it")
            elif isinstance(layer, Add):
                q = _QAdd(node.name, inputs, [scales[s] for s in inputs],
                          qparams[node.name], config)
            elif isinstance(layer, Softmax):
                if node.name != model.output:
                    raise ModelError(f"Softmax {node.name!r} must be the model output")
                q = _QSoftmax(node.name, inputs, None)
            else:
                q = _QCodes(node.name, inputs, layer)
                q.out_qp = scales[inputs[0]]
            alias[node.name] = q.name
            scales[q.name] = q.out_qp
            self.nodes.append(q)
        self.output = alias[model.output]

    @property
    def layer_names(self):
        """Names of the layers that take a multiplier, in order."""
        return [n.name for n in self.nodes if n.multiplier]

    def assign(self, multiplier=None, layers=None):
        """{layer name: Multiplier}: ``multiplier`` everywhere, ``layers`` overrides.

        ``multiplier`` None means the exact unsigned 8-bit multiplier.
        """
        if multiplier is None:
            multiplier = _core().Multiplier.exact(bits=8, signed=False)
        layers = dict(layers or {})
        unknown = sorted(set(layers) - set(self.layer_names))
        if unknown:
            raise ModelError(f"unknown layer name(s) {', '.join(map(repr, unknown))}; "
                             f"layers with multipliers: {', '.join(self.layer_names)}")
        assignment = {name: layers.get(name, multiplier) for name in self.layer_names}
        for name, m in assignment.items():
            if getattr(m, "bits", None) != 8:
                raise ModelError(f"layer {name!r}: the quantized layers use 8-bit codes, "
                                 f"got a multiplier of {getattr(m, 'bits', '?')} bits")
        return assignment

    def prepare(self, assignment):
        """Quantize the weights an assignment needs now (else done on first use)."""
        for node in self.nodes:
            if node.multiplier:
                node.weights(bool(assignment[node.name].signed))

    def run_codes(self, x, multiplier=None, *, layers=None, return_all=False):
        """Output QTensor (or float array after a Softmax) for one batch.

        ``multiplier`` may also be an assignment from :meth:`assign`.
        ``return_all`` gives every quantized node's output by name (fused
        BN/ReLU nodes are part of their Conv2d/Linear).
        """
        assignment = multiplier if isinstance(multiplier, Mapping) else self.assign(multiplier, layers)
        x = self.model.check_input(x)
        values = {INPUT: QTensor(self.input_qparams.quantize(x), self.input_qparams)}
        for node in self.nodes:
            values[node.name] = node.forward([values[s] for s in node.inputs], assignment)
        return values if return_all else values[self.output]

    def run(self, x, multiplier=None, *, layers=None, batch_size=256):
        """Integer inference; returns the dequantized output (float64).

        >>> m = Model((2,), [("fc", Linear(2, 1, weight=[[1.0, -1.0]]))])
        >>> q = quantize(m, np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]))
        >>> q.run(np.array([[1.0, 0.0], [0.0, 1.0]])).round(2).tolist()
        [[1.0], [-1.0]]
        """
        assignment = self.assign(multiplier, layers)
        x = self.model.check_input(x)
        outs = []
        for i in range(0, len(x), batch_size):
            y = self.run_codes(x[i:i + batch_size], assignment)
            outs.append(y.dequantize() if isinstance(y, QTensor) else y)
        if not outs:
            return np.zeros((0, *self.model.shapes[self.model.output]))
        return np.concatenate(outs)

    def predict(self, x, multiplier=None, *, layers=None, batch_size=256):
        return self.run(x, multiplier, layers=layers, batch_size=batch_size).argmax(axis=-1)
