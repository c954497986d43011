"""Calibration and the quantized graph: lowering a float :class:`Model` and wiring its nodes.

:func:`quantize` observes activation ranges on sample inputs;
:class:`QuantizedModel` lowers every node (folding batch norms, fusing
ReLU/ReLU6 into the Conv2d/Linear before them) into the integer nodes of
:mod:`.integer` and :mod:`.code_layers`, then runs them with one multiplier
per layer.

>>> import numpy as np
>>> from approxmul_cffi import nn
>>> m = nn.Model((2,), [("fc", nn.Linear(2, 1, weight=[[1.0, -1.0]]))])
>>> q = nn.quantize(m, np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]))
>>> q.run(np.array([[1.0, 0.0], [0.0, 1.0]])).round(2).tolist()
[[1.0], [-1.0]]
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .. import quant
from ..errors import ModelError
from ..multipliers import Multiplier, multiplier as resolve
from .dynamic import DynamicQuantized
from .graph import INPUT, Node
from .integer import QTensor, QuantizedLayer

__all__ = ["DynamicQuantizedModel", "QuantizedModel", "RangeObserver", "quantize"]


class RangeObserver:
    """Running range of activations: min/max, or every sample for a percentile."""

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

    >>> from approxmul_cffi import nn
    >>> m = nn.Model((1,), [("fc", nn.Linear(1, 1, weight=[[2.0]]))])
    >>> nn.quantize(m, np.array([[0.0], [1.0]])).layer_names
    ['fc']
    """
    given = getattr(model, "quantization", None)
    if config is not None and config.bits != 8 and (given is not None or is_dynamic(model)):
        raise ModelError(f"this model brings its own 8-bit quantization (ONNX); it cannot be "
                         f"quantized to {config.bits} bits")
    if is_dynamic(model):  # ONNX dynamic quantization: grids per batch, nothing to calibrate
        return DynamicQuantizedModel(model, config)
    if given is not None:  # a pre-quantized model (ONNX QDQ/QOperator) keeps its own grids
        return QuantizedModel(model, given.qparams, config or given.config, given.weights)
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
            observers.setdefault(name, RangeObserver(config.calibration, config.percentile)).update(value)
    qparams = {}
    for name, obs in observers.items():
        lo, hi = obs.range()
        qparams[name] = quant.choose_qparams(lo, hi, signed=False, bits=config.bits,
                                             symmetric=config.activation_symmetric)
    return QuantizedModel(model, qparams, config)


class QuantizedModel:
    """Integer inference of a calibrated :class:`Model`; see :func:`quantize`.

    Only the code-by-code products of Conv2d and Linear layers go through the
    multipliers; :meth:`run` takes one multiplier for every layer and
    optional per-layer overrides by name. ``nodes`` lists the quantized
    nodes in order: :class:`Node` entries whose ``layer`` is the integer node
    (:meth:`layer` finds one by name).
    """

    def __init__(self, model, qparams, config, given=None):
        self.model, self.qparams, self.config = model, qparams, config
        # {layer name: (weight codes, weight QParams, int32 bias)} given instead of quantized
        self.given = dict(given or {})
        self.input_qparams = qparams[INPUT]
        self.nodes = []
        self._lower(model)
        self._by_name = {node.name: node.layer for node in self.nodes}

    def _lower(self, model):
        readers = {}
        for node in model.nodes:
            for src in node.inputs:
                readers.setdefault(src, []).append(node)

        def sole_reader(name, accepts):
            r = readers.get(name, [])
            if len(r) == 1 and accepts(r[0].layer) and name != model.output:
                return r[0]
            return None

        alias = {INPUT: INPUT}  # float node name -> quantized node producing it
        grids = {INPUT: self.input_qparams}  # each quantized node's output grid
        fused = set()
        for node in model.nodes:
            if node.name in fused:
                continue
            layer, inputs = node.layer, [alias[s] for s in node.inputs]
            in_qparams = [grids[s] for s in inputs]
            try:
                if layer.output_only and node.name != model.output:
                    raise ModelError("must be the model output")
                if layer.takes_multiplier:
                    tail, fold = node, {}
                    bn = sole_reader(node.name, lambda r: isinstance(layer, r.folds_into))
                    if bn is not None:
                        bias = layer.bias if layer.has_bias else None
                        fold["weight"], fold["bias"] = bn.layer.fold(layer.weight, bias)
                        tail = bn
                    act = sole_reader(tail.name, lambda r: r.activation is not None)
                    if act is not None:
                        tail = act
                        fold["activation"] = act.layer.activation
                    for t in (bn, act):
                        if t is not None:
                            fused.add(t.name)
                            alias[t.name] = node.name
                    if node.name in self.given:
                        if fold.keys() - {"activation"}:
                            raise ModelError("has given weights and cannot fold a batch norm")
                        fold["given"] = self.given[node.name]
                    q = layer.lower(in_qparams, self.qparams[tail.name], self.config, **fold)
                else:
                    q = layer.lower(in_qparams, self.qparams[node.name], self.config)
            except ModelError as error:
                raise ModelError(f"{type(layer).__name__} {node.name!r} {error}") from None
            alias[node.name] = node.name
            grids[node.name] = q.out_qparams
            self.nodes.append(Node(node.name, q, inputs))
        self.output = alias[model.output]

    @property
    def layer_names(self):
        """Names of the layers that take a multiplier, in order."""
        return [node.name for node in self.nodes if node.layer.takes_multiplier]

    def layer(self, name):
        """The integer node of a layer (a :class:`QuantizedLayer` for Conv2d/Linear)."""
        if name not in self._by_name:
            raise ModelError(f"no quantized node {name!r}; nodes: {', '.join(self._by_name)}")
        return self._by_name[name]

    def assign(self, multiplier=None, layers=None):
        """{layer name: Multiplier}: ``multiplier`` everywhere, ``layers`` overrides.

        Either may be anything :func:`approxmul_cffi.multiplier` accepts;
        ``multiplier`` None means the exact unsigned multiplier of the codes'
        width (``config.bits``, 8 by default); every multiplier must have that width.
        """
        bits = self.config.bits
        if multiplier is None:
            multiplier = Multiplier.exact(bits=bits, signed=False)
        layers = dict(layers or {})
        unknown = sorted(set(layers) - set(self.layer_names))
        if unknown:
            raise ModelError(f"unknown layer name(s) {', '.join(map(repr, unknown))}; "
                             f"layers with multipliers: {', '.join(self.layer_names)}")
        multiplier = resolve(multiplier)
        assignment = {name: resolve(layers[name]) if name in layers else multiplier
                      for name in self.layer_names}
        for name, m in assignment.items():
            if m.bits != bits:
                raise ModelError(f"layer {name!r}: the model is quantized to {bits}-bit codes, "
                                 f"got a multiplier of {m.bits} bits (quantize with "
                                 f"QuantConfig(bits={m.bits}), or `evaluate --bits {m.bits}`)")
        return assignment

    def prepare(self, assignment):
        """Quantize the weights an assignment needs now (else done on first use)."""
        for name, m in assignment.items():
            self.layer(name).prepare(m.signed)

    def run_codes(self, x, multiplier=None, *, layers=None, return_all=False):
        """Output QTensor (or float array after a Softmax) for one batch.

        ``multiplier`` may also be an assignment from :meth:`assign`.
        ``return_all`` gives every quantized node's output by name (fused
        BN/ReLU nodes are part of their Conv2d/Linear).
        """
        assignment = multiplier if isinstance(multiplier, Mapping) else self.assign(multiplier, layers)
        values = self._run_prefix(self.model.check_input(x), assignment, len(self.nodes))
        return values if return_all else values[self.output]

    def correct_bias(self, x, multiplier=None, *, layers=None, batch_size=256):
        """Bias correction: cancel each layer's mean multiplier error on inputs ``x``.

        For each Conv2d/Linear layer in order, the correction of output channel
        ``o`` is the rounded mean over ``x`` (and positions) of the exact
        accumulator minus the approximate one, with the layers before it
        already corrected; it is added to the int32 bias whenever the same
        multiplier runs the layer (:meth:`QuantizedLayer.set_correction`).
        Off unless called. Returns {layer name: correction}.

        >>> from approxmul_cffi import nn
        >>> m = nn.Model((2,), [("fc", nn.Linear(2, 1, weight=[[1.0, 1.0]]))])
        >>> x = np.array([[0.0, 0.0], [1.0, 1.0], [0.5, 0.25]])
        >>> q = quantize(m, x)
        >>> q.correct_bias(x, "truncated:bits=8,cut=8")["fc"].tolist()
        [1302]
        """
        assignment = multiplier if isinstance(multiplier, Mapping) else self.assign(multiplier, layers)
        x = self.model.check_input(x)
        if len(x) == 0:
            raise ModelError("bias correction needs calibration inputs; got none")
        corrections = {}
        for k, node in enumerate(self.nodes):
            m = assignment.get(node.name)
            if m is None or not isinstance(node.layer, QuantizedLayer):
                continue
            layer = node.layer
            layer.set_correction(m, None)
            total, count = 0, 0
            for i in range(0, len(x), batch_size):
                values = self._run_prefix(x[i:i + batch_size], assignment, k)
                sums, n = layer.error_sums(values[node.inputs[0]].codes, m)
                total, count = total + sums, count + n
            layer.set_correction(m, total / count)
            corrections[node.name] = layer.correction(m)
        return corrections

    def _run_prefix(self, x, assignment, stop):
        values = {INPUT: QTensor(quant.quantize_values(x, self.input_qparams, self.config),
                                 self.input_qparams)}
        for node in self.nodes[:stop]:
            values[node.name] = node.layer.forward([values[s] for s in node.inputs],
                                                   assignment.get(node.name))
        return values

    def run(self, x, multiplier=None, *, layers=None, batch_size=256):
        """Integer inference; returns the dequantized output (float64).

        >>> from approxmul_cffi import nn
        >>> m = nn.Model((2,), [("fc", nn.Linear(2, 1, weight=[[1.0, -1.0]]))])
        >>> q = quantize(m, np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]))
        >>> q.run(np.array([[1.0, 0.0], [0.0, 1.0]]), "exact:signed=1").round(2).tolist()
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
        """Class indices: the argmax of :meth:`run`."""
        return self.run(x, multiplier, layers=layers, batch_size=batch_size).argmax(axis=-1)


class DynamicQuantizedModel(QuantizedModel):
    """A float graph whose :class:`DynamicQuantized` layers take the multipliers.

    Every other node runs in float, as in the model; :meth:`run_codes` returns
    the float output (there are no output codes).
    """

    def __init__(self, model, config=None):
        self.model, self.qparams, self.given = model, {}, {}
        self.config = quant.QuantConfig(requantization="onnxruntime") if config is None \
            else config
        self.nodes = [Node(n.name, n.layer, n.inputs) for n in model.nodes]
        self._by_name = {n.name: n.layer for n in self.nodes}
        self.output = model.output

    @property
    def layer_names(self):
        return [n.name for n in self.nodes if isinstance(n.layer, DynamicQuantized)]

    def prepare(self, assignment):
        """Nothing to prepare: the weight codes are given."""

    def correct_bias(self, x, multiplier=None, *, layers=None, batch_size=256):
        """Refused: a bias in a dynamic layer's accumulator scale moves with every batch's grid."""
        raise ModelError("bias correction needs static activation grids; this model "
                         "quantizes each batch on its own grid (dynamic quantization)")

    def run_codes(self, x, multiplier=None, *, layers=None, return_all=False):
        """Float output for one batch (``return_all``: every node's output by name)."""
        assignment = multiplier if isinstance(multiplier, dict) else \
            self.assign(multiplier, layers)
        values = {INPUT: self.model.check_input(x)}
        for node in self.nodes:
            args = [values[s] for s in node.inputs]
            values[node.name] = node.layer.forward_with(args[0], assignment[node.name]) \
                if node.name in assignment else node.layer.forward(*args)
        return values if return_all else values[self.output]


def is_dynamic(model):
    """True when ``model`` holds a :class:`DynamicQuantized` layer.

    >>> from approxmul_cffi import nn
    >>> is_dynamic(nn.Model((1,), [("fc", nn.Linear(1, 1))]))
    False
    """
    return any(isinstance(n.layer, DynamicQuantized) for n in model.nodes)
