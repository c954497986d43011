"""Calibration of approximate layers: through the translated graph, or layer by layer.

:func:`plan` gives each selected layer its integer node (an
``nn.QuantizedLayer`` with the calibrated grids), the batch norm folded into
it, and its per-sample input shape; through the graph, a ReLU that only
follows a layer becomes its output clamp, as in ``approxmul evaluate``.

>>> import torch
>>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.Flatten(),
...                           torch.nn.Linear(8, 2))
>>> plans, how, why, pools = plan(net, [torch.rand(4, 1, 4, 4)], quant.QuantConfig(), ["0", "3"])
>>> how, sorted(plans), plans["0"]["sample_shapes"], plans["0"]["node"].activation
('graph', ['0', '3'], ((1, 4, 4),), 'relu')
"""

from __future__ import annotations

import numpy as np
import torch

from .. import nn, quant
from ._common import ApproximationError, evaluation_mode
from ._translate import Untranslatable, translate
from .layer import ApproxLayer, GridAveragePool

# the modules the graph's average pools come from (AdaptiveAvgPool2d only to 1x1)
_AVERAGE_POOLS = (torch.nn.AvgPool2d, torch.nn.AdaptiveAvgPool2d)

def _plan_from_graph(model, batches, config, correct):
    sample = batches[0]
    shapes = sorted({tuple(b.shape[1:]) for b in batches})
    if len(shapes) > 1:  # the evaluator's graph has one input shape; layer by layer, each
        raise Untranslatable(f"calibration batches of per-sample shapes "
                             f"{', '.join(map(str, shapes))}")
    graph = translate(model, sample.to(torch.float32))
    data = np.concatenate([b.detach().to(torch.float32).numpy() for b in batches])
    qmodel = nn.quantize(graph, data, config)
    if correct is not None:  # the evaluator's bias correction, on the same data
        qmodel.correct_bias(data, qmodel.assign(None, correct))
    float_nodes = {n.name: n for n in graph.nodes}
    plan = {}
    for node in qmodel.nodes:
        if not node.layer.takes_multiplier:
            continue
        fused_bn = None
        readers = [n for n in graph.nodes if node.name in n.inputs]
        if len(readers) == 1 and isinstance(readers[0].layer, nn.BatchNorm2d) \
                and node.name != graph.output:
            fused_bn = readers[0].name
        plan[node.name] = dict(node=node.layer, bn=fused_bn,
                               sample_shapes=(tuple(graph.shapes[float_nodes[node.name].inputs[0]]),))
    return plan, _average_pools(model, qmodel)


def _average_pools(model, qmodel):
    """{module name: its input grid} of the average-pooling modules in the
    evaluator's graph (functional pools have no module to carry the grid)."""
    modules = dict(model.named_modules())
    pools = {}
    for node in qmodel.nodes:
        layer = getattr(node.layer, "layer", None)
        if isinstance(node.layer, nn.CodeOp) and isinstance(layer, (nn.AvgPool2d, nn.GlobalAvgPool)) \
                and not layer.requantize and isinstance(modules.get(node.name), _AVERAGE_POOLS):
            pools[node.name] = node.layer.out_qparams
    return pools


def _node_for(module, name, in_range, out_range, config):
    weight = module.weight.detach().to(torch.float32).numpy().astype(np.float64)
    has_bias = module.bias is not None
    if isinstance(module, torch.nn.Linear):
        layer = nn.Linear(module.in_features, module.out_features, has_bias)
    else:
        one = isinstance(module, torch.nn.Conv1d)
        # a Conv1d is a Conv2d over a height of 1: kernel, stride and dilation 1
        # along it, and no padding (a padded row would be all zero points)
        pair = (lambda v, h=1: (h, v[0])) if one else (lambda v, h=None: tuple(v))
        if one:
            weight = weight[:, :, None, :]
        layer = nn.Conv2d(module.in_channels, module.out_channels, pair(module.kernel_size),
                          pair(module.stride), pair(module.padding, 0), pair(module.dilation),
                          module.groups, has_bias)
    bias = module.bias.detach().to(torch.float32).numpy() if has_bias else np.zeros(weight.shape[0])
    qps = [quant.choose_qparams(lo, hi, signed=False, symmetric=config.activation_symmetric,
                                bits=config.bits)
           for lo, hi in (in_range, out_range)]
    return nn.QuantizedLayer(layer, weight, bias, qps[0], qps[1], None, config)


def _plan_by_layer(model, batches, config, selected):
    observers, shapes, handles = {}, {}, []
    modules = dict(model.named_modules())

    def hook(name):
        def record(module, inputs, output):
            for key, value in (("in", inputs[0]), ("out", output)):
                observers.setdefault((name, key), nn.RangeObserver(
                    config.calibration, config.percentile)).update(
                        value.detach().to(torch.float32).numpy())
            shapes.setdefault(name, set()).add(tuple(inputs[0].shape[1:]))  # every call site
        return record

    for name in selected:
        handles.append(modules[name].register_forward_hook(hook(name)))
    try:
        with evaluation_mode(model):
            for b in batches:
                model(b)
    finally:
        for h in handles:
            h.remove()
    plan = {}
    for name in selected:
        if name not in shapes:
            raise ApproximationError(f"layer {name!r} never ran on the calibration data")
        node = _node_for(modules[name], name, observers[(name, "in")].range(),
                         observers[(name, "out")].range(), config)
        plan[name] = dict(node=node, bn=None, sample_shapes=tuple(sorted(shapes[name])))
    return plan


def _check_runs(model, batches):
    """The model's own error on a calibration sample (one of each shape), as the adapter's."""
    firsts = {}
    for b in batches:
        firsts.setdefault(tuple(b.shape[1:]), b)
    for shape, batch in firsts.items():
        try:
            with evaluation_mode(model):
                model(batch[:1])
        except Exception as e:  # whatever the model's forward raises
            raise ApproximationError(
                f"the model fails on the calibration data (samples of shape {shape}, "
                f"batches of {batch.shape[0]}): {type(e).__name__}: {e}") from None


def plan(model, batches, config, selected, correct=None):
    """{layer: its integer node, folded BN, input shape}, how, why, {average pool:
    its input grid}; ``correct``: the multipliers ({layer: Multiplier}) to apply
    bias correction for, or None."""
    float_layers = [m for m in model.modules() if isinstance(m, (ApproxLayer, GridAveragePool))]
    for m in float_layers:
        m._q_float = True
    try:
        _check_runs(model, batches)
        try:
            layers, pools = _plan_from_graph(model, batches, config, correct)
            return layers, "graph", None, pools
        except Untranslatable as e:
            if correct is not None:
                raise ApproximationError(
                    f"bias correction runs the evaluator's graph, and torch.fx cannot translate "
                    f"this model ({e}); approximate it without bias_correction") from None
            return _plan_by_layer(model, batches, config, selected), "per-layer", str(e), {}
    finally:
        for m in float_layers:
            m._q_float = False
