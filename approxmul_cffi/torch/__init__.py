"""Approximate multipliers inside PyTorch models: bit-exact inference and retraining.

:func:`approximate` swaps the selected ``nn.Conv2d``, ``nn.Conv1d`` and
``nn.Linear`` layers (and subclasses) of a torch model for approximate
layers, as torch's quantization ``convert`` step swaps modules. Each runs the
evaluator's own integer layer (approxmul_cffi.nn): quantize the float input,
integer convolution/matmul through approxmul's kernels with the layer's
multiplier, requantize, dequantize for the rest of the model. Backward runs
through one custom operator (``torch.ops.approxmul.layer``) with
straight-through or multiplier-table gradients. docs/torch.md is the guide,
docs/retraining.md states the gradients.

CPU tensors only; torch is imported with this module, not with approxmul_cffi.

Example:
    >>> import torch
    >>> from approxmul_cffi.torch import approximate
    >>> torch.manual_seed(0) is not None
    True
    >>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(),
    ...                           torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3))
    >>> x = torch.rand(16, 1, 8, 8)
    >>> approx = approximate(net, {"0": "drum:k=4", "3": "exact"}, calibration=[x])
    >>> type(approx[0]).__name__, approx.approxmul_plan["calibration"]
    ('ApproxConv2d', 'graph')
    >>> approx(x).shape
    torch.Size([16, 3])
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ..adapters import LayerInfo, assign as _assign_names, check_gradient, with_width
from . import _op
from ._common import ApproximationError, batches as _batches, config_of as _config, \
    evaluation_mode
from .calibration import plan as _plan
from .layer import ApproxLayer, GridAveragePool, _FoldedBatchNorm, swap_class as _swap_class

__all__ = ["ApproxLayer", "ApproximationError", "GRADIENTS", "LayerInfo", "approximate", "layers",
           "recalibrate"]

GRADIENTS = _op.GRADIENTS
_KINDS = (torch.nn.Conv2d, torch.nn.Conv1d, torch.nn.Linear)
_FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)

# --------------------------------------------------------------------------
# Layer listing


def _approximable(model):
    return [(name, m) for name, m in model.named_modules() if isinstance(m, _KINDS)]


def layers(model, example=None):
    """The approximable layers of ``model`` (Conv1d/Conv2d/Linear and subclasses).

    With an ``example`` input batch, also their per-sample shapes and
    multiply-accumulates per sample (each passes through the multiplier).

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(8, 2))
    >>> [(i.name, i.macs) for i in layers(net, torch.zeros(1, 1, 4, 4))]
    [('0', 72), ('2', 16)]
    """
    infos = [LayerInfo(name, type(m).__name__, tuple(m.weight.shape)) for name, m in _approximable(model)]
    if example is None:
        return infos
    by_name = {i.name: i for i in infos}
    handles = []

    def hook(name):
        def record(module, inputs, output):
            info = by_name[name]
            info.input_shape, info.output_shape = tuple(inputs[0].shape[1:]), tuple(output.shape[1:])
            weight = module.weight
            per_output = weight[0].numel()
            info.macs = int(np.prod(output.shape[1:])) * per_output
        return record

    for name, m in _approximable(model):
        handles.append(m.register_forward_hook(hook(name)))
    try:
        with evaluation_mode(model):  # a listing must not move batch norms' running statistics
            model(example)
    finally:
        for h in handles:
            h.remove()
    return infos

# --------------------------------------------------------------------------
# Multiplier assignment


def _assign(model, multipliers):
    return _assign_names([name for name, _ in _approximable(model)], multipliers)


def _check_layer(name, module):
    # a subclass that computes something else than its torch base (a weight
    # standardization, a scaled output) would be silently replaced by the base's layer
    base = next(kind for kind in _KINDS if isinstance(module, kind))
    for method in ("forward", "_conv_forward"):
        mine = getattr(type(module), method, None)
        if mine is not getattr(base, method, None):
            raise ApproximationError(
                f"layer {name!r} ({type(module).__name__}) overrides {base.__name__}.{method}; "
                f"the approximate layer computes {base.__name__}'s own function, so it cannot "
                "stand in for it: leave the layer out of the multiplier mapping")
    if isinstance(module, (torch.nn.Conv2d, torch.nn.Conv1d)):
        if module.padding_mode != "zeros":
            raise ApproximationError(
                f"layer {name!r} ({type(module).__name__}): padding_mode={module.padding_mode!r} "
                "cannot be approximated (the integer convolution pads with the zero code); "
                "use padding_mode='zeros' or leave the layer out of the multiplier mapping")
        if isinstance(module.padding, str):
            raise ApproximationError(f"layer {name!r}: padding={module.padding!r}; give the "
                                     "padding as numbers")
    if module.weight.dtype not in _FLOATS or module.weight.device.type != "cpu":
        raise ApproximationError(
            f"layer {name!r}: weights of dtype {module.weight.dtype} on {module.weight.device}; "
            "the approximate layers take floating-point CPU parameters (model.cpu().float())")

def recalibrate(model, calibration):
    """Calibrate an approximated model again, in place (after its weights changed).

    Activation ranges come from the float model with the current weights, as
    ``approximate`` did (and the bias correction is measured again if it was
    asked for); retraining calls this once per epoch so that the model
    matches what ``approxmul evaluate`` makes of its saved weights.

    >>> import torch
    >>> net = approximate(torch.nn.Sequential(torch.nn.Linear(2, 2)), "exact",
    ...                   calibration=[torch.rand(4, 2)])
    >>> recalibrate(net, [torch.rand(4, 2) * 10]) is net
    True
    """
    plan_info = getattr(model, "approxmul_plan", None)
    if plan_info is None:
        raise ApproximationError("recalibrate() takes a model returned by approximate()")
    layers_ = {name: m for name, m in model.named_modules() if isinstance(m, ApproxLayer)}
    correct = ({name: m.q_multiplier for name, m in layers_.items()}
               if plan_info.get("bias_correction") else None)
    plan, how, why, pools = _plan(model, _batches(calibration), plan_info["config"],
                                  list(layers_), correct)
    for name, module in layers_.items():
        entry = plan[name]
        module._setup(name, module.q_multiplier, entry["node"], module._q_bn, module.q_gradient,
                      entry["sample_shapes"])
    for name, module in model.named_modules():
        if isinstance(module, GridAveragePool):
            module._setup_grid(name, pools.get(name))
    plan_info.update(calibration=how, reason=why)
    return model


def approximate(model, multipliers, *, calibration, scheme=None, gradient="ste", inplace=False,
                bias_correction=False):
    """A copy of ``model`` (or ``model`` itself with ``inplace``) with approximate layers.

    multipliers: one multiplier for every Conv1d/Conv2d/Linear layer (a
        Multiplier or anything :func:`approxmul_cffi.multiplier` accepts), or
        a mapping from qualified module names or glob patterns to
        multipliers; unmatched layers stay float torch layers.
    calibration: an iterable of input batches (tensors, arrays, or
        (inputs, labels) pairs as a DataLoader yields).
    scheme: a :class:`approxmul_cffi.quant.QuantConfig` (or a dict of its
        fields, or "minmax"/"percentile"): code domains follow each
        multiplier's signedness as in ``approxmul evaluate``; the codes'
        width is ``bits`` there, else the multipliers' common width
        (``"drum:bits=4,k=2"`` quantizes to 4 bits; 2 to 16 bits, tables
        and the "table"/"table2d" gradients up to 12).
    gradient: "ste", "table" (1-D slopes), "table2d" (full gradient tables)
        or "none" (inference only).
    bias_correction: add to each layer's accumulators minus their mean
        multiplier error per output channel on the calibration data, as
        ``approxmul evaluate --bias-correction`` does
        (:meth:`approxmul_cffi.nn.QuantizedModel.correct_bias`); needs a model
        torch.fx translates.

    When torch.fx can trace the model into approxmul's graph (Conv2d,
    Linear, BatchNorm2d, ReLU/ReLU6, pools, flatten, add), calibration runs
    through that graph and every decision (BN folding, ReLU fusion, scales
    kept through pools) is the evaluator's: the outputs are bit-exact with
    ``approxmul evaluate`` where the float operations between the layers keep
    the codes' grid (ReLU, max pooling, flatten, average pooling modules; not
    residual additions or functional average pools: docs/torch.md). Otherwise each layer is calibrated on its own
    input and output (``model.approxmul_plan`` says which, and why).

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 2))
    >>> approx = approximate(net, "exact", calibration=[torch.rand(8, 4)])
    >>> bool((approx(torch.rand(3, 4)) - net(torch.rand(3, 4))).abs().max() < 10)
    True
    """
    check_gradient(gradient)
    if not isinstance(model, torch.nn.Module):
        raise ApproximationError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    done = [name for name, m in model.named_modules() if isinstance(m, ApproxLayer)]
    if done:
        raise ApproximationError(
            f"the model already has approximate layers ({', '.join(done[:4])}"
            f"{', ...' if len(done) > 4 else ''}): approximate the float model (approximate() "
            "returns a copy and leaves its argument float unless inplace=True)")
    assignment = _assign(model, multipliers)
    config = with_width(_config(scheme), assignment, gradient)
    modules = dict(model.named_modules())
    for name in assignment:
        _check_layer(name, modules[name])
    batches = _batches(calibration)
    if not inplace:
        model = copy.deepcopy(model)
        modules = dict(model.named_modules())
    plan, how, why, pools = _plan(model, batches, config, list(assignment),
                                  assignment if bias_correction else None)
    for name, m in assignment.items():
        entry, module = plan[name], modules[name]
        bn = modules[entry["bn"]] if entry["bn"] else None
        if bn is not None:
            _swap_class(bn, _FoldedBatchNorm, "Folded")
        _swap_class(module, ApproxLayer, "Approx")
        module._setup(name, m, entry["node"], bn, gradient, entry["sample_shapes"])
    if len(assignment) == len(_approximable(model)):
        # every layer integer, as in the evaluator: average pools take its integer mean
        # (with float layers left, a pool's input is not on a grid of the evaluator's)
        for name, qparams in pools.items():
            _swap_class(modules[name], GridAveragePool, "Grid")
            modules[name]._setup_grid(name, qparams)
    model.approxmul_plan = {"calibration": how, "reason": why, "config": config,
                            "bias_correction": bool(bias_correction),
                            "layers": {name: getattr(m, "spec", None) for name, m in assignment.items()}}
    return model
