"""Approximate multipliers inside Keras models (TensorFlow backend): inference and retraining.

:func:`approximate` clones a functional or Sequential Keras model with its
selected ``Conv2D``, ``DepthwiseConv2D``, ``Conv1D`` and ``Dense`` layers
replaced by :class:`ApproxLayer` (weights kept). Each runs the evaluator's
integer layer (``nn.QuantizedLayer``) through ``tf.numpy_function``, with
"ste", "table" or "table2d" gradients through ``tf.custom_gradient``; no compiled op.
docs/keras.md is the guide. TensorFlow is imported with this module only.

Example:
    >>> import numpy as np, keras
    >>> from approxmul_cffi.keras import approximate, layers
    >>> net = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, name="conv"),
    ...                         keras.layers.Flatten(), keras.layers.Dense(3, name="fc")])
    >>> [(i.name, i.macs) for i in layers(net)]
    [('conv', 1296), ('fc', 432)]
    >>> x = np.random.default_rng(0).random((16, 8, 8, 1)).astype("float32")
    >>> approx = approximate(net, {"conv": "drum:k=4", "fc": "exact"}, calibration=[x])
    >>> type(approx.get_layer("conv")).__name__, approx.predict(x, verbose=0).shape
    ('ApproxLayer', (16, 3))
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np

from .. import nn, quant
from ..adapters import (GRADIENTS, ApproximationError, LayerInfo, assign, check_gradient, config_of,
                        with_width)
from .layer import ApproxLayer

__all__ = ["ApproxLayer", "ApproximationError", "GRADIENTS", "LayerInfo", "approximate", "layers",
           "recalibrate"]

_KIND_NAMES = "Conv2D, DepthwiseConv2D, Conv1D or Dense"


def _kind(layer):
    L = keras.layers
    for cls, kind in ((L.DepthwiseConv2D, "depthwise"), (L.Conv2D, "conv2d"), (L.Conv1D, "conv1d"),
                      (L.Dense, "dense")):
        if isinstance(layer, cls):
            return kind
    return None


def layers(model):
    """The approximable layers of a built Keras ``model`` (Conv2D, DepthwiseConv2D, Conv1D, Dense).

    >>> import keras
    >>> net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="d")])
    >>> [(i.name, i.weight_shape, i.macs) for i in layers(net)]
    [('d', (4, 2), 8)]
    """
    out = []
    for layer in _approximable(model):
        kernel = tuple(layer.kernel.shape)
        ins, outs = tuple(layer.input.shape[1:]), tuple(layer.output.shape[1:])
        per_output = int(np.prod(kernel[:-1])) if _kind(layer) != "depthwise" \
            else int(np.prod(kernel[:2]))
        out.append(LayerInfo(layer.name, type(layer).__name__, kernel, ins, outs,
                             int(np.prod(outs)) * per_output))
    return out


def _approximable(model):
    if not isinstance(model, keras.Model):
        raise ApproximationError(f"model must be a keras.Model, got {type(model).__name__}")
    if not model.built or not getattr(model, "inputs", None):
        raise ApproximationError("the model has no known input: build it with keras.Input(...) "
                                 "(or call it once on data) before approximating")
    return [layer for layer in model.layers if _kind(layer)]


def _pair(v):
    return (int(v), int(v)) if np.ndim(v) == 0 else tuple(int(i) for i in v)


def _activation(name, layer):
    act = keras.activations.serialize(layer.activation)
    if not isinstance(act, str):
        raise ApproximationError(f"layer {name!r}: activation {act!r} is not a built-in Keras "
                                 "activation; put it in its own Activation layer")
    return None if act == "linear" else act


def _geometry(name, layer, kind, sample_shape):
    """Keyword arguments of ApproxLayer for one Keras layer (or a clear refusal)."""
    if kind == "dense":
        return dict(units=layer.units)
    if layer.data_format != "channels_last":
        raise ApproximationError(f"layer {name!r}: data_format={layer.data_format!r}; the "
                                 "approximate layers take channels_last (NHWC) inputs")
    if kind == "conv1d":
        k, s, d = (1, layer.kernel_size[0]), (1, layer.strides[0]), (1, layer.dilation_rate[0])
        sizes = (1, sample_shape[0])
    else:
        k, s, d = _pair(layer.kernel_size), _pair(layer.strides), _pair(layer.dilation_rate)
        sizes = sample_shape[:2]
    if getattr(layer, "groups", 1) != 1:
        raise ApproximationError(f"layer {name!r}: Conv groups={layer.groups} is not supported "
                                 "(TensorFlow has no grouped convolution on the CPU for the "
                                 "backward); use DepthwiseConv2D or groups=1")
    if layer.padding == "causal":
        raise ApproximationError(f"layer {name!r}: padding='causal' cannot be approximated; add a "
                                 "ZeroPadding1D before the layer and use padding='valid'")
    pads = [0, 0]
    if layer.padding == "same":
        for i in range(2):
            out = -(-sizes[i] // s[i])
            total = max((out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - sizes[i], 0)
            if total % 2:
                raise ApproximationError(
                    f"layer {name!r}: padding='same' pads this input asymmetrically (one more "
                    "row/column at the end); the integer convolution pads symmetrically: use an "
                    "odd kernel with stride 1, or ZeroPadding2D and padding='valid'")
            pads[i] = total // 2
    extra = dict(depth_multiplier=layer.depth_multiplier, units=0) if kind == "depthwise" \
        else dict(units=layer.filters)
    return dict(kernel_size=k, strides=s, padding=tuple(pads), dilation=d, **extra)


def _batches(calibration):
    if isinstance(calibration, np.ndarray) or hasattr(calibration, "numpy"):
        calibration = [calibration]
    try:
        items = list(calibration)
    except TypeError:
        raise ApproximationError("calibration must be an iterable of input batches "
                                 "(arrays, tensors or (inputs, labels) pairs)") from None
    out = []
    for b in items:
        b = b[0] if isinstance(b, (tuple, list)) else b
        b = np.asarray(b, dtype=np.float32)
        if not np.all(np.isfinite(b)):
            raise ApproximationError("calibration batch contains NaN or infinity; nothing is "
                                     "saturated silently, clean the data first")
        out.append(b)
    if not out:
        raise ApproximationError("calibration data is empty")
    return out


def _observe(model, selected, batches, config):
    """{name: (input range, output range)}: outputs after a fused ReLU/ReLU6, else before
    the activation (which then runs in float after the integer layer)."""
    inputs = model.inputs[0] if len(model.inputs) == 1 else model.inputs
    probe = keras.Model(inputs, [layer.input for layer in selected])
    linear = {}
    for layer in selected:
        if _activation(layer.name, layer) not in (None, "relu", "relu6"):
            clone = type(layer).from_config({**layer.get_config(), "activation": "linear"})
            clone.build(layer.input.shape)
            clone.set_weights(layer.get_weights())
            linear[layer.name] = clone
    obs = {}
    for b in batches:
        ins = probe(b, training=False)
        ins = ins if isinstance(ins, (list, tuple)) else [ins]
        for layer, x in zip(selected, ins):
            y = linear.get(layer.name, layer)(x, training=False)
            for key, v in (("in", x), ("out", y)):
                obs.setdefault((layer.name, key), nn.RangeObserver(
                    config.calibration, config.percentile)).update(keras.ops.convert_to_numpy(v))
    return {layer.name: (obs[(layer.name, "in")].range(), obs[(layer.name, "out")].range())
            for layer in selected}


def _correct_bias(model, batches):
    """Bias correction of every approximate layer, in model order: minus its mean
    multiplier error per output channel on ``batches``, measured through the
    approximate model with the layers before it already corrected (as
    ``nn.QuantizedModel.correct_bias`` does on the evaluator's graph)."""
    inputs = model.inputs[0] if len(model.inputs) == 1 else model.inputs
    for layer in model.layers:
        if not isinstance(layer, ApproxLayer):
            continue
        probe = keras.Model(inputs, layer.input)
        total, count = 0, 0
        for b in batches:
            sums, n = layer.error_sums(keras.ops.convert_to_numpy(probe(b, training=False)))
            total, count = total + sums, count + n
        layer.set_correction(total / count)


def approximate(model, multipliers, *, calibration, scheme=None, gradient="ste",
                bias_correction=False):
    """A clone of the Keras ``model`` (weights kept) with approximate layers.

    multipliers: one multiplier for every approximable layer, or a mapping
        from layer names or glob patterns to multipliers (as the torch adapter).
    calibration: input batches (arrays, tensors, or (inputs, labels) pairs);
        each layer's input/output ranges are observed on the float model.
    scheme: a QuantConfig, a dict of its fields, or "minmax"/"percentile"; the
        codes' width is its ``bits``, else the multipliers' common width.
    gradient: "ste", "table" (1-D slopes), "table2d" (full gradient tables)
        or "none" (inference only).
    bias_correction: add to each layer's accumulators minus their mean
        multiplier error per output channel on the calibration data, as
        ``approxmul evaluate --bias-correction`` does; kept in the layers'
        config (saved models keep it) and measured again by :func:`recalibrate`.
    """
    check_gradient(gradient)
    candidates = {layer.name: layer for layer in _approximable(model)}
    assignment = assign(list(candidates), multipliers, _KIND_NAMES)
    config = with_width(config_of(scheme), assignment, gradient)
    selected, settings = [candidates[n] for n in assignment], {}
    for layer in selected:
        name = layer.name
        policy = getattr(layer.dtype_policy, "name", "float32")
        if policy != "float32":
            raise ApproximationError(
                f"layer {name!r}: dtype policy {policy!r}; the approximate layers compute on "
                "integer codes from float32 inputs: build the model under the 'float32' policy "
                "(keras.config.set_dtype_policy('float32')) before approximating")
        sample = tuple(int(v) for v in layer.input.shape[1:])
        kind = _kind(layer)
        settings[name] = dict(kind=kind, sample_shape=sample, use_bias=layer.use_bias,
                              activation=_activation(name, layer),
                              **_geometry(name, layer, kind, sample))
    batches = _batches(calibration)
    ranges = _observe(model, selected, batches, config)

    def clone(layer):
        if layer.name not in assignment:
            return layer.__class__.from_config(layer.get_config())
        (in_lo, in_hi), (out_lo, out_hi) = ranges[layer.name]
        qps = [quant.choose_qparams(lo, hi, signed=False, symmetric=config.activation_symmetric,
                                    bits=config.bits) for lo, hi in ((in_lo, in_hi), (out_lo, out_hi))]
        return ApproxLayer(name=layer.name, multiplier=assignment[layer.name],
                           in_qparams=qps[0].to_dict(), out_qparams=qps[1].to_dict(),
                           gradient=gradient, scheme=dataclasses.asdict(config),
                           **settings[layer.name])

    out = keras.models.clone_model(model, clone_function=clone)
    for layer in out.layers:
        layer.set_weights(model.get_layer(layer.name).get_weights())
    out.approxmul_layers = {name: getattr(m, "spec", None) for name, m in assignment.items()}
    if bias_correction:
        _correct_bias(out, batches)
    return out


def recalibrate(model, calibration, scheme=None):
    """Calibrate an approximated model again, in place, after its weights changed in ``fit``.

    The approximate layers run as float layers with their current weights
    on the batches (eagerly) and take new activation grids, as
    :func:`approximate` chose them; the torch adapter's recalibrate does
    the same after each retraining epoch. A model approximated with
    ``bias_correction`` gets its corrections measured again on the batches.

    >>> import keras, numpy as np
    >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    >>> approx = approximate(net, "exact", calibration=[np.ones((4, 2), "float32")])
    >>> recalibrate(approx, [np.full((4, 2), 10, "float32")]) is approx
    True
    """
    approx = [layer for layer in model.layers if isinstance(layer, ApproxLayer)]
    if not approx:
        raise ApproximationError("recalibrate() takes a model returned by approximate()")
    obs, batches = {}, _batches(calibration)

    def observer(name, config):
        def record(x, y):
            for key, v in (("in", x), ("out", y)):
                obs.setdefault((name, key), nn.RangeObserver(config.calibration,
                                                             config.percentile)).update(v)
        return record

    configs = {layer.name: quant.QuantConfig(**layer.scheme) for layer in approx}
    for layer in approx:
        layer.observer = observer(layer.name, configs[layer.name])
    try:
        for b in batches:
            model(b, training=False)
    finally:
        for layer in approx:
            layer.observer = None
    for layer in approx:
        config = configs[layer.name]
        layer.set_grids(*(quant.choose_qparams(*obs[(layer.name, key)].range(), signed=False,
                                               symmetric=config.activation_symmetric,
                                               bits=config.bits) for key in ("in", "out")))
    if any(layer.correction is not None for layer in approx):
        _correct_bias(model, batches)
    return model
