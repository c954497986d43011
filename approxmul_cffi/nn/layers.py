"""Layers with weights: the base class, Conv2d, Linear, BatchNorm2d.

Each layer class owns everything about its type: its config (for JSON),
parameters (for .npz), output shape (computed by the C library for windows),
float forward, and integer forward (:meth:`Layer.lower` builds the node
that runs it on codes; Conv2d and Linear give their products through a
multiplier in ``accumulate``). A new layer type is added in one place: a
class here or in :mod:`.code_layers`, registered with :func:`register`.

>>> conv = Conv2d(2, 4, 3, padding=1, groups=2)
>>> conv.weight.shape, conv.output_shape((2, 8, 8))
((4, 1, 3, 3), (4, 8, 8))
"""

from __future__ import annotations

import numpy as np

from .. import layer_calls, ops, quant
from .._buffers import as_int, as_pair
from ..errors import ApproxmulError, ModelError
from .integer import CodeOp, QuantizedLayer, QuantizedMatMul
from .windows import conv_by_columns

__all__ = ["BatchNorm2d", "Conv2d", "LAYER_TYPES", "Layer", "Linear", "MatMul", "register"]

#: op name in model files -> layer class
LAYER_TYPES = {}


def register(cls):
    """Class decorator: make a layer type loadable from model files by its class name."""
    LAYER_TYPES[cls.__name__] = cls
    return cls


def pair(value, what):
    """An int or a pair of ints as a pair of ints (ModelError otherwise)."""
    try:
        return as_pair(value, what)
    except ApproxmulError as error:
        raise ModelError(str(error)) from None


def count(value, what):
    """A size given as an integer (a model file's 2.7 or "3" is refused, not truncated)."""
    try:
        return as_int(value, what)
    except ApproxmulError as error:
        raise ModelError(str(error)) from None


def window_output(layer, x_shape, w_shape, stride, padding, dilation, groups):
    """(N, O, OH, OW) of a sliding-window layer, as the C library computes and checks it."""
    try:
        return ops.conv2d_output_shape(x_shape, w_shape, stride=stride, padding=padding,
                                       dilation=dilation, groups=groups)
    except ApproxmulError as error:
        raise ModelError(f"{type(layer).__name__} {layer.config()}: {error}") from None


def need_ndim(layer, shape, ndim, what):
    if len(shape) != ndim:
        raise ModelError(f"{type(layer).__name__} needs {what}, got per-sample shape {shape}")


class Layer:
    """Base class: a layer without parameters taking one input.

    Class attributes the quantized graph reads: ``arity`` (inputs),
    ``takes_multiplier`` (its products go through a multiplier),
    ``activation`` (None, or the clamp it becomes when fused into the
    Conv2d/Linear before it), ``folds_into`` (layer types it folds into),
    ``output_only`` (runs in float, so only as the model output).
    """

    arity = 1
    takes_multiplier = False
    activation = None
    folds_into = ()
    output_only = False

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

    def forward_codes(self, *xs):
        """Integer forward on QTensors, for layers that need no multiplier."""
        raise ModelError(f"{type(self).__name__} has no integer implementation")

    def lower(self, in_qparams, out_qparams, config):
        """The integer node of this layer, given its inputs' and output's QParams.

        The default runs :meth:`forward_codes` and keeps the input's grid.
        """
        return CodeOp(self, in_qparams[0])

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{type(self).__name__}({args})"


class _Weighted(Layer):
    """Conv2d and Linear: weight + optional bias, products through a multiplier.

    ``bias`` is True/False (zeros or none) or the bias values themselves;
    ``bias_value`` is the older keyword for the values.
    """

    takes_multiplier = True
    channel_axis = 1  # of the output, for per-channel requantization

    def _init_weighted(self, bias, weight, bias_value):
        if bias_value is None and not isinstance(bias, (bool, np.bool_, type(None))):
            bias, bias_value = True, bias
        self.has_bias = bool(bias)
        self._init_params({"weight": weight, "bias": bias_value})

    def param_shapes(self):
        shapes = {"weight": self.weight_shape}
        if self.has_bias:
            shapes["bias"] = self.weight_shape[:1]
        return shapes

    def lower(self, in_qparams, out_qparams, config, *, weight=None, bias=None,
              activation=None, given=None):
        """A :class:`QuantizedLayer`; ``weight``/``bias`` replace this layer's (folded BN).

        ``given``: (weight codes, QParams, int32 bias) of a pre-quantized model.
        """
        if weight is None:
            weight = self.weight
            bias = self.bias if self.has_bias else None
        return QuantizedLayer(self, weight, bias, in_qparams[0], out_qparams, activation, config,
                              given)


@register
class Conv2d(_Weighted):
    """2-D convolution, NCHW input, OIHW weight ``(out, in / groups, kh, kw)``.

    ``groups == in_channels == out_channels`` is a depthwise convolution.
    Missing weights start at zero.

    >>> Conv2d(4, 8, 3, padding=1, groups=4).weight.shape
    (8, 1, 3, 3)
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, *, weight=None, bias_value=None):
        self.in_channels = count(in_channels, "in_channels")
        self.out_channels = count(out_channels, "out_channels")
        self.kernel_size = pair(kernel_size, "kernel_size")
        self.stride = pair(stride, "stride")
        self.padding = pair(padding, "padding")
        self.dilation = pair(dilation, "dilation")
        self.groups = count(groups, "groups")
        if min(self.in_channels, self.out_channels) < 1:
            raise ModelError(f"Conv2d: invalid sizes in {self.config()}")
        # The C library checks the geometry, on an input just large enough for the dilated
        # kernel (a huge one overflows the C size checks for wide layers, e.g. 64->64 3x3)
        try:
            big = (1, self.in_channels, *((k - 1) * d + 1 for k, d in zip(self.kernel_size,
                                                                            self.dilation)))
        except TypeError:
            big = (1, self.in_channels, 1, 1)  # sizes of a wrong type: the check names them
        window_output(self, big, self.weight_shape, **self.geometry)
        self._init_weighted(bias, weight, bias_value)

    @property
    def weight_shape(self):
        return (self.out_channels, self.in_channels // max(self.groups, 1), *self.kernel_size)

    def config(self):
        return dict(in_channels=self.in_channels, out_channels=self.out_channels,
                    kernel_size=list(self.kernel_size), stride=list(self.stride),
                    padding=list(self.padding), dilation=list(self.dilation),
                    groups=self.groups, bias=getattr(self, "has_bias", True))

    @property
    def geometry(self):
        return dict(stride=self.stride, padding=self.padding, dilation=self.dilation,
                    groups=self.groups)

    def output_shape(self, shape):
        need_ndim(self, shape, 3, "(C, H, W) input")
        if shape[0] != self.in_channels:
            raise ModelError(f"Conv2d expects {self.in_channels} input channels, got {shape[0]}")
        return window_output(self, (1, *shape), self.weight_shape, **self.geometry)[1:]

    def forward(self, x):
        out_hw = self.output_shape(x.shape[1:])[1:]
        y = conv_by_columns(x, self.weight.astype(x.dtype), self.geometry, out_hw, 0.0,
                            np.matmul, x.dtype)
        if self.has_bias:
            y += self.bias.astype(x.dtype).reshape(1, -1, 1, 1)
        return y

    def accumulate(self, codes, weight_codes, multiplier, x_zero_point, w_zero_point):
        """Integer accumulators of this convolution on codes (:func:`approxmul_cffi.conv2d`)."""
        return ops.conv2d(codes, weight_codes, multiplier, **self.geometry,
                          x_zero_point=x_zero_point, w_zero_point=w_zero_point)

    def requantizer(self, weight_codes, multiplier, x_zero_point, w_zero_point, *stage,
                    **options):
        """codes -> :meth:`accumulate`, then ``quant.requantize(acc, *stage, **options)``,
        in one pass that never holds the accumulators, its arguments converted once
        (:class:`approxmul_cffi.layer_calls.Conv2dRequantizer`)."""
        return layer_calls.Conv2dRequantizer(weight_codes, multiplier, *stage, **self.geometry,
                                             x_zero_point=x_zero_point,
                                             w_zero_point=w_zero_point, **options)


@register
class Linear(_Weighted):
    """Fully connected layer ``y = x @ weight.T + bias``, weight ``(out, in)``.

    The input is ``(features,)`` per sample, or ``(..., features)``: the
    layer acts on the last axis (its output channels are the last axis).

    >>> Linear(3, 2, bias=[1.0, 2.0]).forward(np.ones((1, 3))).tolist()
    [[1.0, 2.0]]
    """

    channel_axis = -1

    def __init__(self, in_features, out_features, bias=True, *, weight=None, bias_value=None):
        self.in_features = count(in_features, "in_features")
        self.out_features = count(out_features, "out_features")
        if min(self.in_features, self.out_features) < 1:
            raise ModelError(f"Linear: invalid sizes {self.config()}")
        self._init_weighted(bias, weight, bias_value)

    @property
    def weight_shape(self):
        return (self.out_features, self.in_features)

    def config(self):
        return dict(in_features=self.in_features, out_features=self.out_features,
                    bias=getattr(self, "has_bias", True))

    def output_shape(self, shape):
        if len(shape) < 1:
            raise ModelError("Linear needs a (features,) or (..., features) input")
        if shape[-1] != self.in_features:
            hint = "" if len(shape) == 1 else f" of {shape} (add a Flatten before it?)"
            raise ModelError(f"Linear expects {self.in_features} input features, got "
                             f"{shape[-1]}{hint}")
        return (*shape[:-1], self.out_features)

    def forward(self, x):
        y = x @ self.weight.astype(x.dtype).T
        return y + self.bias.astype(x.dtype) if self.has_bias else y

    def requantizer(self, weight_codes, multiplier, x_zero_point, w_zero_point, *stage,
                    **options):
        """codes -> :meth:`accumulate`, then ``quant.requantize(acc, *stage, **options)``
        along the features, its arguments converted once
        (:class:`approxmul_cffi.layer_calls.LinearRequantizer`)."""
        return layer_calls.LinearRequantizer(weight_codes, multiplier, *stage,
                                             x_zero_point=x_zero_point,
                                             w_zero_point=w_zero_point, **options)

    def accumulate(self, codes, weight_codes, multiplier, x_zero_point, w_zero_point):
        """Integer accumulators ``codes @ weight_codes.T`` (:func:`approxmul_cffi.linear`).

        Inputs of more than two dimensions: the last one holds the features.
        """
        lead = codes.shape[:-1]
        acc = ops.linear(codes.reshape(-1, codes.shape[-1]), weight_codes, multiplier,
                         x_zero_point=x_zero_point, w_zero_point=w_zero_point)
        return acc.reshape(*lead, acc.shape[-1])


@register
class MatMul(Layer):
    """Product of two activations ``a @ b`` (NumPy matmul rules, e.g. attention scores).

    Both operands are codes when quantized: every product passes the
    multiplier (:func:`approxmul_cffi.bmm`), requantized per tensor.

    >>> MatMul().output_shape((4, 3, 5), (4, 5, 2))
    (4, 3, 2)
    """

    arity = 2
    takes_multiplier = True

    def output_shape(self, a, b):
        if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
            raise ModelError(f"MatMul needs (..., M, K) and (..., K, P) inputs, got {a} and {b}")
        try:
            lead = np.broadcast_shapes(a[:-2], b[:-2])
        except ValueError:
            raise ModelError(f"MatMul: leading dimensions of {a} and {b} do not broadcast") \
                from None
        return (*lead, a[-2], b[-1])

    def forward(self, a, b):
        return np.matmul(a, b)

    def lower(self, in_qparams, out_qparams, config):
        return QuantizedMatMul(in_qparams, out_qparams, config)


@register
class BatchNorm2d(Layer):
    """Inference-mode batch norm; folded into the preceding Conv2d when quantized."""

    folds_into = (Conv2d,)

    def __init__(self, num_features, eps=1e-5, *, weight=None, bias=None,
                 running_mean=None, running_var=None):
        self.num_features, self.eps = count(num_features, "num_features"), float(eps)
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
        need_ndim(self, shape, 3, "(C, H, W) input")
        if shape[0] != self.num_features:
            raise ModelError(f"BatchNorm2d expects {self.num_features} channels, got {shape[0]}")
        return shape

    def forward(self, x):
        scale = self.weight / np.sqrt(self.running_var + self.eps)
        shift = self.bias - self.running_mean * scale
        return x * scale.astype(x.dtype).reshape(1, -1, 1, 1) + shift.astype(x.dtype).reshape(1, -1, 1, 1)

    def fold(self, weight, bias):
        """(weight, bias) of the preceding layer with this batch norm folded in."""
        return quant.fold_batchnorm(weight, bias, self.weight, self.bias, self.running_mean,
                                    self.running_var, self.eps)

    def lower(self, in_qparams, out_qparams, config):
        raise ModelError("must be the only reader of a Conv2d to be folded into it")
