"""Approximate multipliers inside Keras models (TensorFlow backend): inference and retraining.

:func:`approximate` clones a functional or Sequential Keras model (its
Sequential/functional sub-models included) with its selected ``Conv2D``,
``DepthwiseConv2D``, ``Conv1D`` and ``Dense`` layers replaced by
:class:`ApproxLayer` (weights, ``trainable``, regularizers and constraints
kept). Each runs the evaluator's integer layer (``nn.QuantizedLayer``)
through ``tf.numpy_function``, with "ste", "table" or "table2d" gradients
through ``tf.custom_gradient``; no compiled op. docs/keras.md is the guide.
TensorFlow is imported with this module only; importing it also registers
:class:`ApproxLayer`, which ``keras.models.load_model`` needs for saved
approximate models.

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
import warnings

import keras
import numpy as np
try:  # Keras 3 has no public name for a functional model's class
    from keras.src.models.functional import Functional as _Functional
except ImportError:  # a Keras that moved it: sub-models other than Sequential stay unentered
    _Functional = keras.Sequential

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
    """The approximable layers of a built Keras ``model`` (Conv2D, DepthwiseConv2D, Conv1D, Dense),
    those of its Sequential/functional sub-models included.

    A layer called at several places (a shared layer) is listed once, with
    the multiply-accumulates of all its calls; unknown (None) per-sample
    dimensions leave ``macs`` None.

    >>> import keras
    >>> net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="d")])
    >>> [(i.name, i.weight_shape, i.macs) for i in layers(net)]
    [('d', (4, 2), 8)]
    """
    out = []
    for layer, calls in _approximable(model):
        kernel = tuple(layer.kernel.shape)
        ins, outs = calls[0]
        per_output = int(np.prod(kernel[:-1])) if _kind(layer) != "depthwise" \
            else int(np.prod(kernel[:2]))
        known = all(v is not None for _, o in calls for v in o)
        macs = sum(int(np.prod(o)) for _, o in calls) * per_output if known else None
        out.append(LayerInfo(layer.name, type(layer).__name__, kernel, ins, outs, macs))
    return out


def _graph_model(layer):
    """A Sequential or functional model: approximate() enters it (clone_model rebuilds it)."""
    return isinstance(layer, (keras.Sequential, _Functional))


def _nodes(parent, layer):
    """The nodes (calls) of ``layer`` in ``parent``'s graph (a Sequential's is its _functional),
    from the inputs on."""
    depths = getattr(getattr(parent, "_functional", None) or parent, "_nodes_by_depth", {})
    return [node for depth in sorted(depths, reverse=True) for node in depths[depth]
            if node.operation is layer]


def _calls(parent, layer):
    """[(per-sample input shape, output shape)] of ``layer``'s calls in ``parent``'s graph."""
    shapes = [(tuple(node.input_tensors[0].shape[1:]), tuple(node.output_tensors[0].shape[1:]))
              for node in _nodes(parent, layer)]
    return shapes or [(tuple(layer.input.shape[1:]), tuple(layer.output.shape[1:]))]


def _approximable(model):
    """[(layer, its calls' (input, output) per-sample shapes per forward of ``model``)], in
    ``model.layers`` order, entering Sequential/functional sub-models."""
    if not isinstance(model, keras.Model):
        raise ApproximationError(f"model must be a keras.Model, got {type(model).__name__}")
    if not model.built or not getattr(model, "inputs", None):
        raise ApproximationError("the model has no known input: build it with keras.Input(...) "
                                 "(or call it once on data) before approximating")
    found, seen = [], set()

    def visit(parent, times):
        for layer in parent.layers:
            if id(layer) in seen:
                continue
            seen.add(id(layer))
            if _kind(layer):
                found.append((layer, _calls(parent, layer) * times))
            elif _graph_model(layer):
                visit(layer, times * max(1, len(_nodes(parent, layer))))
            else:
                inner = [sub.name for sub in layer._flatten_layers(include_self=False)
                         if _kind(sub)]
                if inner:
                    warnings.warn(
                        f"layer {layer.name!r} ({type(layer).__name__}) holds {_KIND_NAMES} layers "
                        f"({', '.join(inner)}) that stay float: approximate() replaces the layers "
                        "of the model and of its Sequential/functional sub-models, not those "
                        "inside other layers or subclassed models", stacklevel=3)

    visit(model, 1)
    names = [layer.name for layer, _ in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ApproximationError(
            f"several approximable layers are named {', '.join(map(repr, twice))} (in different "
            "sub-models); layers are selected and replaced by name: give them distinct names")
    return found


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


def _array(v):
    v = np.asarray(v, dtype=np.float32)
    if not np.all(np.isfinite(v)):
        raise ApproximationError("calibration batch contains NaN or infinity; nothing is "
                                 "saturated silently, clean the data first")
    return v


def _inputs(batch, count):
    """The model inputs of one calibration batch: an array for a one-input model, a list of
    ``count`` arrays (or a dict by input name) for several inputs; in an (inputs, labels, ...)
    tuple the inputs come first."""
    if isinstance(batch, dict):
        return {k: _array(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        if not batch:
            raise ApproximationError("a calibration batch is empty")
        if isinstance(batch[0], (tuple, list, dict)):  # (inputs, labels, ...)
            return _inputs(batch[0], count)
        if count == 1:  # (inputs, labels, ...) or [inputs]
            return _array(batch[0])
        if len(batch) != count:
            raise ApproximationError(
                f"the model takes {count} inputs: a calibration batch is a list of {count} arrays "
                f"(or a dict by input name, or ([{count} arrays], labels)), got {len(batch)} "
                "arrays")
        return [_array(v) for v in batch]
    if count != 1:
        raise ApproximationError(f"the model takes {count} inputs: a calibration batch is a list "
                                 f"of {count} arrays (or a dict by input name), got one array")
    return _array(batch)


def _batches(calibration, model):
    """The calibration batches as the model's inputs (see :func:`_inputs`)."""
    if isinstance(calibration, (np.ndarray, dict)) or hasattr(calibration, "numpy"):
        calibration = [calibration]
    try:
        items = list(calibration)
    except TypeError:
        raise ApproximationError("calibration must be an iterable of input batches "
                                 "(arrays, tensors or (inputs, labels) pairs)") from None
    count = len(model.inputs)
    out = [_inputs(b, count) for b in items]
    if not out:
        raise ApproximationError("calibration data is empty")
    return out


def _approx_layers(model):
    """The ApproxLayers of ``model`` and of its sub-models, each once."""
    out = []
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, ApproxLayer) and all(layer is not o for o in out):
            out.append(layer)
    return out


def _calibrate(model, approx, batches):
    """New activation grids for the ApproxLayers ``approx`` of ``model``: each runs as its
    float layer (its current weights) on the batches, eagerly, and records its input and
    output ranges at every call (outputs after a fused ReLU/ReLU6, else before the
    activation, which runs in float after the integer layer). Returns the layers in the
    order the model's forward first reaches them."""
    obs, order = {}, []

    def observer(layer, config):
        def record(x, y):
            if all(layer is not o for o in order):
                order.append(layer)
            for key, v in (("in", x), ("out", y)):
                obs.setdefault((id(layer), key), nn.RangeObserver(config.calibration,
                                                                  config.percentile)).update(v)
        return record

    configs = {id(layer): quant.QuantConfig(**layer.scheme) for layer in approx}
    for layer in approx:
        layer.observer = observer(layer, configs[id(layer)])
    try:
        for b in batches:
            model(b, training=False)
    finally:
        for layer in approx:
            layer.observer = None
    missing = [layer.name for layer in approx if (id(layer), "in") not in obs]
    if missing:
        raise ApproximationError(f"layers {', '.join(missing)} are not called by the model's "
                                 "forward: nothing to calibrate them on")
    for layer in approx:
        config = configs[id(layer)]
        layer.set_grids(*(quant.choose_qparams(*obs[(id(layer), key)].range(), signed=False,
                                               symmetric=config.activation_symmetric,
                                               bits=config.bits) for key in ("in", "out")))
    return order


def _correct_bias(model, order, batches):
    """Bias correction of the approximate layers ``order``, one after the other: minus
    each one's mean multiplier error per output channel on ``batches`` (over all its
    calls), measured through the approximate model with the layers before it already
    corrected (as ``nn.QuantizedModel.correct_bias`` does on the evaluator's graph)."""
    for layer in order:
        sums = []
        layer.probe = lambda x, layer=layer: sums.append(layer.error_sums(x))
        try:
            for b in batches:
                model(b, training=False)
        finally:
            layer.probe = None
        layer.set_correction(sum(s for s, _ in sums) / sum(n for _, n in sums))


def _carried(layer, kind):
    """What the approximate layer takes over from the replaced one besides its geometry:
    ``trainable``, regularizers and constraints (or a clear refusal)."""
    if getattr(layer, "lora_enabled", False):
        raise ApproximationError(
            f"layer {layer.name!r}: LoRA is enabled (lora_rank={layer.lora_rank}); the approximate "
            "layer has one kernel: build the layer without LoRA, set its kernel to the merged "
            "one (layer.kernel of this layer), and approximate that")
    w = "depthwise" if kind == "depthwise" else "kernel"
    return dict(trainable=layer.trainable, activity_regularizer=layer.activity_regularizer,
                kernel_regularizer=getattr(layer, w + "_regularizer"),
                kernel_constraint=getattr(layer, w + "_constraint"),
                bias_regularizer=layer.bias_regularizer, bias_constraint=layer.bias_constraint)


def approximate(model, multipliers, *, calibration, scheme=None, gradient="ste",
                bias_correction=False):
    """A clone of the Keras ``model`` (weights kept) with approximate layers.

    multipliers: one multiplier for every approximable layer, or a mapping
        from layer names or glob patterns to multipliers (as the torch adapter);
        layers of Sequential/functional sub-models are included, by their names.
    calibration: input batches (arrays, tensors, or (inputs, labels) pairs; for
        a model with several inputs, lists of arrays or dicts by input name);
        each layer's input/output ranges are observed, over all its calls, on
        the float layers.
    scheme: a QuantConfig, a dict of its fields, or "minmax"/"percentile"; the
        codes' width is its ``bits``, else the multipliers' common width.
    gradient: "ste", "table" (1-D slopes), "table2d" (full gradient tables)
        or "none" (inference only).
    bias_correction: add to each layer's accumulators minus their mean
        multiplier error per output channel on the calibration data, as
        ``approxmul evaluate --bias-correction`` does; kept in the layers'
        config (saved models keep it) and measured again by :func:`recalibrate`.

    Each approximate layer keeps the replaced layer's ``trainable`` flag,
    regularizers and constraints, and is fixed to its per-sample input shape.
    """
    check_gradient(gradient)
    candidates = {layer.name: (layer, calls) for layer, calls in _approximable(model)}
    assignment = assign(list(candidates), multipliers, _KIND_NAMES)
    config = with_width(config_of(scheme), assignment, gradient)
    settings = {}
    for name in assignment:
        layer, calls = candidates[name]
        policy = getattr(layer.dtype_policy, "name", "float32")
        if policy != "float32":
            raise ApproximationError(
                f"layer {name!r}: dtype policy {policy!r}; the approximate layers compute on "
                "integer codes from float32 inputs: build the model under the 'float32' policy "
                "(keras.config.set_dtype_policy('float32')) before approximating")
        shapes = list(dict.fromkeys(shape for shape, _ in calls))
        if any(v is None for shape in shapes for v in shape):
            raise ApproximationError(
                f"layer {name!r}: its per-sample input shape {shapes[0]} has an unknown (None) "
                "dimension; an approximate layer is fixed to one per-sample shape (its integer "
                "layer and geometry are built for it): give keras.Input a fixed shape and "
                "calibrate on inputs of that shape")
        if len(shapes) > 1:
            raise ApproximationError(
                f"layer {name!r} is called on per-sample inputs of shapes "
                f"{', '.join(map(str, shapes))}; an approximate layer is fixed to one per-sample "
                "shape: give each call its own layer, or leave this one out of the multipliers")
        kind = _kind(layer)
        settings[name] = dict(kind=kind, sample_shape=shapes[0], use_bias=layer.use_bias,
                              activation=_activation(name, layer),
                              **_geometry(name, layer, kind, shapes[0]), **_carried(layer, kind))
    batches = _batches(calibration, model)
    # placeholder grids, replaced by the calibration below
    grid = quant.choose_qparams(0.0, 1.0, signed=False, symmetric=config.activation_symmetric,
                                bits=config.bits).to_dict()
    selected = {id(candidates[name][0]): name for name in assignment}
    made, pairs = {}, []

    def clone(layer):
        # each layer once (shared layers stay shared); sub-models are entered
        if id(layer) in made:
            return made[id(layer)]
        if _graph_model(layer):
            new = keras.models.clone_model(layer, clone_function=clone)
        elif id(layer) in selected:
            name = selected[id(layer)]
            new = ApproxLayer(name=name, multiplier=assignment[name], in_qparams=grid,
                              out_qparams=grid, gradient=gradient,
                              scheme=dataclasses.asdict(config), **settings[name])
        else:
            new = layer.__class__.from_config(layer.get_config())
        made[id(layer)] = new
        pairs.append((layer, new))
        return new

    out = keras.models.clone_model(model, clone_function=clone)
    # pair the layers by identity (clone_model renames unnamed inputs), not by name
    for old, new in pairs + [(model, out)]:
        if not _graph_model(old):
            new.set_weights(old.get_weights())
        if not old.trainable:
            new.trainable = False
    approx = [made[i] for i in selected]
    order = _calibrate(out, approx, batches)
    out.approxmul_layers = {name: getattr(m, "spec", None) for name, m in assignment.items()}
    if bias_correction:
        _correct_bias(out, order, batches)
    return out


def recalibrate(model, calibration, scheme=None):
    """Calibrate an approximated model again, in place, after its weights changed in ``fit``.

    The approximate layers run as float layers with their current weights
    on the batches (eagerly, at every call) and take new activation grids,
    as :func:`approximate` calibrates them; the torch adapter's recalibrate does
    the same after each retraining epoch. A model approximated with
    ``bias_correction`` gets its corrections measured again on the batches.

    >>> import keras, numpy as np
    >>> net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    >>> approx = approximate(net, "exact", calibration=[np.ones((4, 2), "float32")])
    >>> recalibrate(approx, [np.full((4, 2), 10, "float32")]) is approx
    True
    """
    approx = _approx_layers(model)
    if not approx:
        raise ApproximationError("recalibrate() takes a model returned by approximate()")
    batches = _batches(calibration, model)
    order = _calibrate(model, approx, batches)
    if any(layer.correction is not None for layer in approx):
        _correct_bias(model, order, batches)
    return model
