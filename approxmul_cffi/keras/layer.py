"""The approximate Keras layer: the evaluator's integer layer called from the TensorFlow graph.

:class:`ApproxLayer` replaces a ``Conv2D``, ``DepthwiseConv2D``, ``Conv1D``
or ``Dense`` layer. Its forward is ``tf.numpy_function`` around the same
``nn.QuantizedLayer`` the evaluator runs (quantize, integer conv/matmul
through approxmul's kernels, requantize, dequantize); ``tf.custom_gradient``
gives it the adapters' gradients (docs/retraining.md). Its config holds the
multiplier spec, the calibrated grids and the replaced layer's ``trainable``
flag, regularizers and constraints, so ``.keras`` files reload it (once
``approxmul_cffi.keras`` is imported: importing it registers the class).

>>> import numpy as np
>>> from approxmul_cffi import quant
>>> qp = quant.choose_qparams(0.0, 1.0, signed=False)
>>> layer = ApproxLayer(kind="dense", units=2, multiplier="exact", in_qparams=qp.to_dict(),
...                     out_qparams=qp.to_dict(), sample_shape=(3,))
>>> layer(np.zeros((1, 3), np.float32)).shape
TensorShape([1, 2])
"""

from __future__ import annotations

import numpy as np
import keras
import tensorflow as tf

from .. import nn, quant
from ..adapters import ApproximationError, check_gradient, table2d_columns
from ..errors import InvalidArgumentError
from ..gradients import gradient_slopes, gradient_table
from ..multipliers import multiplier as _resolve

# TensorFlow adopts a NumPy array returned by tf.numpy_function without a copy
# only when its data is aligned to this (Eigen's maximum alignment); NumPy's
# allocations are 16-byte aligned, which cost a 4 MB copy per ResNet layer
# output and 0.1-0.4 ms per call for the input codes.
_TF_ALIGNMENT = 64


def _adoptable(shape, dtype):
    """An uninitialised C-contiguous array whose data is _TF_ALIGNMENT-aligned."""
    size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    raw = np.empty(size + _TF_ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % _TF_ALIGNMENT
    return raw[start:start + size].view(dtype).reshape(shape)

KINDS = ("conv2d", "depthwise", "conv1d", "dense")
_FUSED = ("relu", "relu6")


def qparams_of(d):
    return quant.QParams(np.asarray(d["scale"]), np.asarray(d["zero_point"]), bool(d["signed"]),
                         d.get("axis"), bool(d.get("narrow", False)), int(d.get("bits", 8)))


def spec_of(m):
    spec = getattr(m, "spec", None)
    if not spec:
        raise ApproximationError(
            f"multiplier {getattr(m, 'name', m)!r} has no spec string (built from an in-memory "
            "table), so the layer cannot be saved: save the table to a file and use "
            "'table:path=...', or keep the model in memory")
    return spec


@keras.saving.register_keras_serializable(package="approxmul")
class ApproxLayer(keras.layers.Layer):
    """One approximate layer; weights ``kernel``/``bias`` keep the replaced layer's layout."""

    supports_jit = False  # numpy_function cannot be compiled by XLA

    def __init__(self, *, kind, units, multiplier, in_qparams, out_qparams, sample_shape,
                 kernel_size=(1, 1), strides=(1, 1), padding=(0, 0), dilation=(1, 1),
                 depth_multiplier=1, use_bias=True, activation=None, gradient="ste",
                 scheme=None, correction=None, kernel_regularizer=None, bias_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        # trainable and activity_regularizer are keras.layers.Layer's own (and its config's)
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        if kind not in KINDS:
            raise ApproximationError(f"kind must be one of {KINDS}, got {kind!r}")
        check_gradient(gradient)
        self.kind, self.units, self.gradient = kind, int(units), gradient
        self.multiplier = _resolve(multiplier)
        self.in_qparams_dict, self.out_qparams_dict = dict(in_qparams), dict(out_qparams)
        self.sample_shape = tuple(int(v) for v in sample_shape)
        self.kernel_size, self.strides = tuple(kernel_size), tuple(strides)
        self.pads, self.dilation = tuple(padding), tuple(dilation)
        self.depth_multiplier, self.use_bias = int(depth_multiplier), bool(use_bias)
        self.activation = activation
        self.scheme = dict(scheme or {})
        # bias correction (accumulator units, per output channel) or None
        self.correction = None if correction is None else [int(v) for v in correction]
        self._node, self._params, self._cache = None, None, {}
        self.observer = None  # set by calibration: run the float layer and record ranges
        self.probe = None     # set by bias correction: called with each (eager) input batch

    # ---- config and weights
    def get_config(self):
        return {**super().get_config(), "kind": self.kind, "units": self.units,
                "multiplier": spec_of(self.multiplier), "in_qparams": self.in_qparams_dict,
                "out_qparams": self.out_qparams_dict, "sample_shape": list(self.sample_shape),
                "kernel_size": list(self.kernel_size), "strides": list(self.strides),
                "padding": list(self.pads), "dilation": list(self.dilation),
                "depth_multiplier": self.depth_multiplier, "use_bias": self.use_bias,
                "activation": self.activation, "gradient": self.gradient, "scheme": self.scheme,
                "correction": self.correction,
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer),
                "kernel_constraint": keras.constraints.serialize(self.kernel_constraint),
                "bias_constraint": keras.constraints.serialize(self.bias_constraint)}

    def kernel_shape(self):
        channels = self.sample_shape[-1]
        kh, kw = self.kernel_size
        if self.kind == "dense":
            return (channels, self.units)
        if self.kind == "conv1d":
            return (kw, channels, self.units)
        if self.kind == "depthwise":
            return (kh, kw, channels, self.depth_multiplier)
        return (kh, kw, channels, self.units)

    def build(self, input_shape=None):
        self.kernel = self.add_weight(name="kernel", shape=self.kernel_shape(), initializer="zeros",
                                      regularizer=self.kernel_regularizer,
                                      constraint=self.kernel_constraint)
        out = self.out_channels()
        self.bias = self.add_weight(name="bias", shape=(out,), initializer="zeros",
                                    regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None
        self._make_node()

    def _make_node(self):
        channels, out = self.sample_shape[-1], self.out_channels()
        if self.kind == "dense":
            layer = nn.Linear(channels, out)
        else:
            groups = channels if self.kind == "depthwise" else 1
            layer = nn.Conv2d(channels, out, self.kernel_size, self.strides, self.pads,
                              self.dilation, groups)
        self._node = nn.QuantizedLayer(
            layer, np.zeros(layer.weight_shape), np.zeros(out), qparams_of(self.in_qparams_dict),
            qparams_of(self.out_qparams_dict), self.activation if self.activation in _FUSED else None,
            quant.QuantConfig(**self.scheme))
        if self.correction is not None:
            self._node.set_correction(self.multiplier, self.correction)
        self._params, self._cache = None, {}

    def set_grids(self, in_qparams, out_qparams):
        """New activation grids (recalibration): the integer layer is rebuilt on them."""
        self.in_qparams_dict, self.out_qparams_dict = in_qparams.to_dict(), out_qparams.to_dict()
        self._make_node()

    def set_correction(self, correction):
        """Per-output-channel integers added to the accumulators (bias correction); None: off."""
        self.correction = None if correction is None else \
            np.rint(np.asarray(correction, np.float64)).astype(np.int64).tolist()
        self._node.set_correction(self.multiplier, self.correction)

    def error_sums(self, x):
        """(per output channel sum of exact minus approximate accumulators, positions) on a
        float input batch: what bias correction averages (nn.QuantizedLayer.error_sums)."""
        x = np.asarray(x, np.float32)
        node = self.q_node
        codes = quant.convert_codes(node.in_qparams.quantize(x), bool(self.multiplier.signed),
                                    bits=self.multiplier.bits)
        return node.error_sums(self._layout(codes), self.multiplier)

    def _layout(self, codes):
        """Channels-last input codes as the integer layer takes them (views, no copy)."""
        if self.kind == "dense":
            return codes.reshape(-1, codes.shape[-1])
        c4 = codes[:, None] if self.kind == "conv1d" else codes   # N H W C
        return c4.transpose(0, 3, 1, 2)

    @property
    def code_mask(self):
        """2^n - 1 for n-bit codes: a code's bit pattern, its row in the multiplier's tables."""
        return (1 << self.multiplier.bits) - 1

    def out_channels(self):
        if self.kind == "depthwise":
            return self.sample_shape[-1] * self.depth_multiplier
        return self.units

    @property
    def q_node(self):
        """The evaluator's integer layer (nn.QuantizedLayer) with the current weights."""
        self._sync(keras.ops.convert_to_numpy(self.kernel), self._bias_np())
        return self._node

    def _bias_np(self):
        return keras.ops.convert_to_numpy(self.bias) if self.use_bias else None

    # ---- layouts: Keras kernels <-> the kernels' OIHW / (out, in)
    def to_oihw(self, kernel):
        k = np.asarray(kernel, np.float64)
        if self.kind == "dense":
            return k.T
        if self.kind == "conv1d":
            return k.transpose(2, 1, 0)[:, :, None, :]
        if self.kind == "depthwise":
            kh, kw, c, m = k.shape
            return k.reshape(kh, kw, c * m).transpose(2, 0, 1)[:, None]
        return k.transpose(3, 2, 0, 1)

    def from_oihw(self, w):
        if self.kind == "dense":
            return w.T
        if self.kind == "conv1d":
            return w[:, :, 0, :].transpose(2, 1, 0)
        if self.kind == "depthwise":
            kh, kw = w.shape[2:]
            return w[:, 0].transpose(1, 2, 0).reshape(kh, kw, -1, self.depth_multiplier)
        return w.transpose(2, 3, 1, 0)

    def _sync(self, kernel, bias):
        # weights change during fit: requantize only when they did
        if self._params is not None and np.array_equal(self._params[0], kernel) and (
                bias is None or np.array_equal(self._params[1], bias)):
            return
        if not (np.isfinite(kernel).all() and (bias is None or np.isfinite(bias).all())):
            raise ApproximationError(f"layer {self.name!r}: parameters contain NaN or infinity")
        self._node.set_parameters(self.to_oihw(kernel),
                                  np.zeros(self.out_channels()) if bias is None else bias)
        self._params, self._cache = (np.array(kernel), None if bias is None else np.array(bias)), {}

    # ---- forward
    def compute_output_shape(self, input_shape):
        if self.kind == "dense":
            return (*input_shape[:-1], self.units)
        n = input_shape[0]
        h, w = (1, input_shape[1]) if self.kind == "conv1d" else input_shape[1:3]
        o = self.out_channels()
        oh, ow = self._node.layer.output_shape((self.sample_shape[-1], h, w))[1:]
        return (n, ow, o) if self.kind == "conv1d" else (n, oh, ow, o)

    def _integer(self, x, kernel, bias):
        """(float32 output, input codes in the multiplier's domain), channels last."""
        self._sync(kernel, bias if self.use_bias else None)
        node, m = self._node, self.multiplier
        # the codes go back to TensorFlow for the backward: aligned, they are adopted.
        # NaN and +-inf are refused by the quantization's own read-only pass.
        try:
            codes = node.in_qparams.quantize(
                x, out=_adoptable(x.shape, node.in_qparams.dtype), finite=True)
        except InvalidArgumentError as error:
            raise ApproximationError(
                f"input of layer {self.name!r} contains NaN or infinity ({error}); nothing is "
                "saturated silently, clean the data first") from None
        codes = quant.convert_codes(codes, bool(m.signed), in_place=True, bits=m.bits)
        if self.kind == "dense":
            # float32 straight from C (the same bits as float64 then astype), into
            # a buffer TensorFlow can adopt
            acc = node.forward_codes(self._layout(codes), m)
            y = node.output_qparams(m.signed).dequantize(
                acc, dtype=np.float32, out=_adoptable(acc.shape, np.float32))
            return y.reshape(*x.shape[:-1], -1), codes
        real = node.forward_codes(self._layout(codes), m, real=np.float32)  # one C pass
        n, o, oh, ow = real.shape
        y = _adoptable((n, oh, ow, o), np.float32)                # NHWC, filled in one pass
        np.copyto(y, real.transpose(0, 2, 3, 1))
        return (y[:, 0] if self.kind == "conv1d" else y), codes

    def _float_call(self, x):
        """The float layer with the current weights, recording its input/output ranges."""
        from ._grad import _forward_float
        y = _forward_float(self, tf.cast(x, tf.float32), tf.convert_to_tensor(self.kernel), 0.0)
        if self.use_bias:
            y = y + tf.convert_to_tensor(self.bias)
        if self.activation in _FUSED:
            y = tf.nn.relu(y) if self.activation == "relu" else tf.nn.relu6(y)
        self.observer(np.asarray(x), y.numpy())
        if self.activation not in (None, "linear") + _FUSED:
            y = keras.activations.get(self.activation)(y)
        return y

    def call(self, x):
        if tuple(x.shape[1:]) != self.sample_shape:
            raise ApproximationError(
                f"layer {self.name!r} was calibrated on per-sample inputs of shape "
                f"{self.sample_shape}, got {tuple(x.shape[1:])}: an approximate layer is fixed "
                "to one per-sample shape")
        if self.observer is not None:
            return self._float_call(x)
        if self.probe is not None:
            self.probe(keras.ops.convert_to_numpy(x))
        x = tf.cast(x, tf.float32)
        kernel = tf.convert_to_tensor(self.kernel)
        bias = tf.convert_to_tensor(self.bias) if self.use_bias else tf.zeros((self.out_channels(),))
        code_dtype = tf.as_dtype(quant.code_dtype(bool(self.multiplier.signed), self.multiplier.bits))
        out_shape = self.compute_output_shape(tuple(x.shape))

        @tf.custom_gradient
        def run(x, kernel, bias):
            y, codes = tf.numpy_function(self._integer, [x, kernel, bias], [tf.float32, code_dtype],
                                         stateful=False)
            y.set_shape(out_shape)
            codes.set_shape(x.shape)

            def grad(dy):
                if self.gradient == "none":
                    raise ApproximationError(
                        f"layer {self.name!r} was built with gradient='none' (inference only); "
                        "approximate(..., gradient='ste') to train")
                from ._grad import backward
                return backward(self, codes, y, dy)
            return y, grad

        y = run(x, kernel, bias)
        if self.activation not in (None, "linear") + _FUSED:
            y = keras.activations.get(self.activation)(y)
        return y

    # ---- the backward's operands (cached per weight version)
    def input_grid(self):
        """(s_x, z_x) of the input codes in the multiplier's domain."""
        qp = self._node.in_qparams.to_domain(bool(self.multiplier.signed))
        return float(qp.scale), int(qp.zero_point)

    def weight_map(self, _codes):
        """dy/dw-free weight operand of the backward, Keras layout (float32):
        the dequantized weights ("ste") or s_w[o] (slope_a[w] - z_w) ("table").
        Reads the weights the forward just quantized (``_codes`` orders it after it)."""
        if self.gradient not in self._cache:
            w = self._node.prepare(bool(self.multiplier.signed))
            if self.gradient == "table":
                slope_a = self.gradient_tables("slopes")[0]
                s_w = np.broadcast_to(w.qparams.scale, (w.codes.shape[0],))
                s_w = s_w.reshape(-1, *([1] * (w.codes.ndim - 1)))
                mapped = s_w * (slope_a[w.codes.astype(np.int64) & self.code_mask] - w.zero_point)
            else:
                mapped = w.qparams.dequantize(w.codes)
            self._cache[self.gradient] = np.ascontiguousarray(self.from_oihw(mapped), np.float32)
        return self._cache[self.gradient]

    def table2d_backward(self, codes, dy):
        """(grad_x, grad_kernel) through the full gradient tables, in NumPy (channels last)."""
        w = self._node.prepare(bool(self.multiplier.signed))
        s_x, z_x = self.input_grid()
        s_w = np.broadcast_to(w.qparams.scale, (w.codes.shape[0],))
        tables = self.gradient_tables("tables")
        wflat = (w.codes.astype(np.int64) & self.code_mask).reshape(w.codes.shape[0], -1)
        x = codes.astype(np.int64) & self.code_mask
        dy = np.asarray(dy, np.float64)
        if self.kind == "dense":
            gx, gw = table2d_columns(x.reshape(-1, x.shape[-1]), wflat, dy.reshape(-1, dy.shape[-1]),
                                     tables, s_x, z_x, s_w, w.zero_point)
            return gx.reshape(codes.shape).astype(np.float32), self.from_oihw(gw).astype(np.float32)
        x4 = x[:, None] if self.kind == "conv1d" else x                 # N H W C
        d4 = dy[:, None] if self.kind == "conv1d" else dy
        (kh, kw), (sh, sw), (dh, dw), (ph, pw) = self.kernel_size, self.strides, self.dilation, self.pads
        n, h, wd, c = x4.shape
        oh, ow = d4.shape[1:3]
        xp = np.pad(x4, ((0, 0), (ph, ph), (pw, pw), (0, 0)), constant_values=z_x & self.code_mask)
        taps = [(i, j) for i in range(kh) for j in range(kw)]
        window = lambda i, j: (slice(None), slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),  # noqa: E731
                               slice(j * dw, j * dw + (ow - 1) * sw + 1, sw))
        cols = np.stack([xp[window(i, j)] for i, j in taps], axis=-1)  # N OH OW C taps
        groups = c if self.kind == "depthwise" else 1
        gcols, gw = table2d_columns(cols.reshape(n * oh * ow, -1), wflat, d4.reshape(n * oh * ow, -1),
                                    tables, s_x, z_x, s_w, w.zero_point, groups)
        gcols = gcols.reshape(n, oh, ow, c, len(taps))
        gxp = np.zeros(xp.shape)
        for t, (i, j) in enumerate(taps):
            gxp[window(i, j)] += gcols[..., t]
        gx = gxp[:, ph:ph + h, pw:pw + wd]
        gx = gx[:, 0] if self.kind == "conv1d" else gx
        return gx.astype(np.float32), self.from_oihw(gw.reshape(w.codes.shape)).astype(np.float32)

    def gradient_tables(self, kind):
        """(dM/da, dM/db) from the C library: 1-D slopes or 2-D tables (float32)."""
        key = "tables-" + kind
        if key not in self._cache:
            f = gradient_slopes if kind == "slopes" else gradient_table
            self._cache[key] = tuple(np.asarray(f(self.multiplier, op), np.float32) for op in "ab")
        return self._cache[key]
