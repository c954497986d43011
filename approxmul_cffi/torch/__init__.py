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
import math
import dataclasses
import fnmatch
from collections.abc import Mapping

import numpy as np
import torch

from approxmul_cffi import nn, quant
from approxmul_cffi.errors import InvalidArgumentError
from approxmul_cffi.torch import _op
from approxmul_cffi.torch._translate import Untranslatable, translate

__all__ = ["ApproxLayer", "ApproximationError", "GRADIENTS", "LayerInfo", "approximate", "layers",
           "recalibrate"]

GRADIENTS = _op.GRADIENTS
_KINDS = (torch.nn.Conv2d, torch.nn.Conv1d, torch.nn.Linear)
_FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


class ApproximationError(InvalidArgumentError):
    """A model, layer, input or multiplier the adapter cannot approximate."""


# --------------------------------------------------------------------------
# Layer listing


@dataclasses.dataclass
class LayerInfo:
    """One approximable layer: qualified name, kind, weight shape, and with an
    example input its per-sample input/output shapes and multiply-accumulates."""

    name: str
    kind: str
    weight_shape: tuple
    input_shape: tuple | None = None
    output_shape: tuple | None = None
    macs: int | None = None


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
        with torch.no_grad():
            model(example)
    finally:
        for h in handles:
            h.remove()
    return infos


# --------------------------------------------------------------------------
# Multiplier assignment


def _resolve(m):
    from approxmul_cffi.evaluation import resolve_multiplier
    return resolve_multiplier(m)


def _assign(model, multipliers):
    names = [name for name, _ in _approximable(model)]
    if not names:
        raise ApproximationError("the model has no Conv1d, Conv2d or Linear layer to approximate")
    if not isinstance(multipliers, Mapping):
        m = _resolve(multipliers)
        return {name: m for name in names}
    out, unmatched = {}, []
    resolved = {pattern: _resolve(m) for pattern, m in multipliers.items()}
    for pattern in multipliers:  # exact names first, then patterns in the given order
        hits = [pattern] if pattern in names else fnmatch.filter(names, pattern)
        if not hits:
            unmatched.append(pattern)
        for name in hits:
            if name not in out or pattern == name:
                out[name] = resolved[pattern]
    if unmatched:
        raise ApproximationError(
            f"{', '.join(map(repr, unmatched))} match(es) no approximable layer; "
            f"the model's layers: {', '.join(names)}")
    return out


def _check_layer(name, module, m):
    if getattr(m, "bits", None) != 8:
        raise ApproximationError(f"layer {name!r}: the quantized layers use 8-bit codes, got a "
                                 f"{getattr(m, 'bits', '?')}-bit multiplier")
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


# --------------------------------------------------------------------------
# Calibration data


def _batches(calibration):
    out = []
    try:
        items = iter(calibration)
    except TypeError:
        raise ApproximationError("calibration must be an iterable of input batches "
                                 "(a list of tensors or a DataLoader)") from None
    if isinstance(calibration, (torch.Tensor, np.ndarray)):
        items = iter([calibration])
    for batch in items:
        if isinstance(batch, (tuple, list)):
            batch = batch[0]  # (inputs, labels) from a DataLoader
        batch = torch.as_tensor(batch)
        _check_input(batch, "calibration batch")
        out.append(batch)
    if not out:
        raise ApproximationError("calibration data is empty")
    return out


def _check_input(x, what):
    if x.device.type != "cpu":
        raise ApproximationError(
            f"{what} is on device {x.device}; approxmul's integer kernels run on the CPU: "
            "move the model and its inputs there (model.cpu(), x.cpu())")
    if x.dtype not in _FLOATS:
        raise ApproximationError(f"{what} has dtype {x.dtype}; a floating-point tensor is needed")
    # one reduction pass: NaN propagates through min/max, infinity shows in them
    if x.numel() and not all(map(math.isfinite, (float(v) for v in torch.aminmax(x)))):
        raise ApproximationError(f"{what} contains NaN or infinity; nothing is saturated "
                                 "silently, clean the data first")


def _config(scheme):
    if scheme is None:
        return quant.QuantConfig()
    if isinstance(scheme, quant.QuantConfig):
        return scheme
    if isinstance(scheme, Mapping):
        return quant.QuantConfig(**scheme)
    if scheme in ("minmax", "percentile"):
        return quant.QuantConfig(calibration=scheme)
    raise ApproximationError(f"scheme must be a quant.QuantConfig, a dict of its fields or "
                             f"'minmax'/'percentile', got {scheme!r}")


# --------------------------------------------------------------------------
# The approximate layer


class ApproxLayer:
    """Mixed into the swapped layer's own class (``ApproxConv2d`` etc.).

    The module keeps its parameters (same state_dict keys as before); its
    forward runs ``torch.ops.approxmul.layer``. ``q_node`` is the evaluator's
    integer layer; ``q_bn`` a batch norm folded into it (its module in the
    model became an identity that keeps its parameters).
    """

    def _setup(self, name, multiplier, node, bn, gradient, sample_shape):
        self.q_name, self.q_multiplier, self.q_node, self.q_gradient = name, multiplier, node, gradient
        self.q_sample_shape = sample_shape
        object.__setattr__(self, "_q_bn", bn)  # not a submodule: the BN keeps its place
        self.q_conv = not isinstance(self, torch.nn.Linear)
        self.q_conv1d = isinstance(self, torch.nn.Conv1d)
        if self.q_conv:
            geom = node.layer.geometry
            self.q_stride, self.q_padding = geom["stride"], geom["padding"]
            self.q_dilation, self.q_groups = geom["dilation"], geom["groups"]
        self.code_dtype = torch.int8 if multiplier.signed else torch.uint8
        self._q_versions, self._q_cache, self._q_tables = None, {}, {}
        self._q_float = False
        if not hasattr(self, "q_key"):
            self.q_key = _op.register(self)

    def __deepcopy__(self, memo):
        # a copy is a layer of its own (own registry key); the multiplier is
        # immutable and shared (in-memory tables have no spec to rebuild from)
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = value if key == "q_multiplier" else copy.deepcopy(value, memo)
        new.q_key = _op.register(new)
        return new

    # ---- shapes
    def conv_in_shape(self, shape):
        return (shape[0], shape[1], 1, shape[2]) if self.q_conv1d else tuple(shape)

    def conv_out_shape(self, shape):
        return (shape[0], shape[1], 1, shape[2]) if self.q_conv1d else tuple(shape)

    def output_shape(self, x_shape):
        if not self.q_conv:
            return (*x_shape[:-1], self.q_node.layer.out_features)
        n, _, h, w = self.conv_in_shape(x_shape)
        kh, kw = self.q_node.layer.kernel_size
        oh, ow = (nn._out_size(s, k, st, p, d) for s, k, st, p, d in zip(
            (h, w), (kh, kw), self.q_stride, self.q_padding, self.q_dilation))
        o = self.q_node.layer.out_channels
        return (n, o, ow) if self.q_conv1d else (n, o, oh, ow)

    # ---- weights: quantized once per parameter version
    def _params(self):
        bn = self._q_bn
        ps = [self.weight, self.bias]
        if bn is not None:
            ps += [bn.weight, bn.bias, bn.running_mean, bn.running_var]
        return ps

    def _refresh(self):
        versions = tuple((id(p), p._version) if p is not None else None for p in self._params())
        if versions == self._q_versions:
            return
        as32 = lambda t: t.detach().to(torch.float32).numpy()  # noqa: E731
        weight = as32(self.weight).astype(np.float64)
        if self.q_conv1d:
            weight = weight[:, :, None, :]
        bias = as32(self.bias) if self.bias is not None else np.zeros(weight.shape[0])
        bn = self._q_bn
        if bn is not None:
            weight, bias = quant.fold_batchnorm(weight, bias, as32(bn.weight), as32(bn.bias),
                                                as32(bn.running_mean), as32(bn.running_var), bn.eps)
        if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
            raise ApproximationError(f"layer {self.q_name!r}: parameters contain NaN or infinity")
        self.q_node.weight, self.q_node.bias = weight, bias
        self.q_node._cache.clear()
        self._q_cache, self._q_versions = {}, versions

    def quantized(self, signed):
        """Integer weights and the scales the backward needs, as tensors (cached)."""
        self._refresh()
        if signed not in self._q_cache:
            w = self.q_node.weights(signed)
            wqp, in_qp = w["qparams"], self.q_node.in_qp.to_domain(signed)
            s_w = np.broadcast_to(wqp.scale, (w["codes"].shape[0],))
            self._q_cache[signed] = dict(
                w_codes=torch.from_numpy(np.ascontiguousarray(w["codes"])),
                w_dq=torch.from_numpy(wqp.dequantize(w["codes"])),
                s_w=torch.from_numpy(np.array(s_w, dtype=np.float64)), z_w=int(w["zero_point"]),
                s_x=float(in_qp.scale), z_x=int(in_qp.zero_point))
        return self._q_cache[signed]

    def gradient_tables(self, kind, dtype):
        """(dM/da, dM/db) of the multiplier: 1-D slopes or 2-D tables, from the C library."""
        from approxmul_cffi.gradients import gradient_slopes, gradient_table
        key = (kind, dtype)
        if key not in self._q_tables:
            m = self.q_multiplier
            if kind == "slopes":  # dM/da as a function of b, dM/db as a function of a
                pair = gradient_slopes(m, "a"), gradient_slopes(m, "b")
            else:
                pair = gradient_table(m, "a"), gradient_table(m, "b")
            self._q_tables[key] = tuple(torch.from_numpy(t).to(dtype) for t in pair)
        return self._q_tables[key]

    # ---- forward
    def integer_forward(self, x):
        """(dequantized output, input codes) of the integer layer for float ``x``."""
        _check_input(x, f"input of layer {self.q_name!r}")
        if tuple(x.shape[1:]) != self.q_sample_shape:
            raise ApproximationError(
                f"layer {self.q_name!r} was calibrated on per-sample inputs of shape "
                f"{self.q_sample_shape}, got {tuple(x.shape[1:])}: calibrate again with "
                "inputs shaped as in use")
        self._refresh()
        m, signed = self.q_multiplier, bool(self.q_multiplier.signed)
        xs = x.detach()
        if xs.dtype not in (torch.float32, torch.float64):
            xs = xs.to(torch.float32)  # exact for bfloat16/float16
        xn = xs.numpy()
        if self.q_conv1d:
            xn = xn[:, :, None, :]
        in_qp = self.q_node.in_qp
        codes = nn.QTensor(in_qp.quantize(xn), in_qp)
        out = self.q_node.forward([codes], {self.q_name: m})
        y = torch.from_numpy(out.dequantize()).to(x.dtype)
        x_codes = torch.from_numpy(codes.to_domain(signed).codes)
        if self.q_conv1d:
            y, x_codes = y[:, :, 0], x_codes[:, :, 0]
        return y, x_codes

    def forward(self, x):
        if self._q_float:  # calibration runs the float model
            weight, bias = self._folded()
            if self.q_conv:
                return self._conv_forward(x, weight[:, :, 0] if self.q_conv1d else weight, bias)
            return torch.nn.functional.linear(x, weight, bias)
        if not isinstance(x, torch.Tensor):
            raise ApproximationError(f"layer {self.q_name!r}: input must be a tensor")
        if x.device.type != "cpu":  # before any op sees it
            _check_input(x, f"input of layer {self.q_name!r}")
        if self.q_gradient == "none" or not torch.is_grad_enabled():
            with torch.no_grad():
                bias = self.bias if self.bias is not None else self.weight.new_zeros(self.weight.shape[0])
                return _op.approx_layer(x, self.weight, bias, self.q_key, "none")[0]
        weight, bias = self._folded()
        return _op.approx_layer(x, weight, bias, self.q_key, self.q_gradient)[0]

    def _folded(self):
        """BN-folded float weight and bias, differentiable (the backward's inputs)."""
        w = self.weight if not self.q_conv1d else self.weight.unsqueeze(2)
        b = self.bias if self.bias is not None else w.new_zeros(w.shape[0])
        bn = self._q_bn
        if bn is not None:
            factor = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            w = w * factor.reshape(-1, *([1] * (w.dim() - 1)))
            b = (b - bn.running_mean) * factor + bn.bias
        return w, b

    def extra_repr(self):
        spec = getattr(self.q_multiplier, "spec", None) or getattr(self.q_multiplier, "name", "")
        return f"{super().extra_repr()}, multiplier={spec!r}, gradient={self.q_gradient!r}"


class _FoldedBatchNorm:
    """A batch norm folded into the approximate layer before it: identity here,
    its parameters stay in place (state_dict unchanged)."""

    def forward(self, x):
        return x


_CLASSES = {}


def _swap_class(module, mixin, prefix):
    base = type(module)
    key = (mixin, base)
    if key not in _CLASSES:
        _CLASSES[key] = type(prefix + base.__name__, (mixin, base),
                             {"__module__": __name__, "_q_base": base})
    module.__class__ = _CLASSES[key]


# --------------------------------------------------------------------------
# Calibration: through the translated graph, or layer by layer


def _plan_from_graph(model, batches, config):
    sample = batches[0]
    graph = translate(model, sample.to(torch.float32))
    data = np.concatenate([b.detach().to(torch.float32).numpy() for b in batches])
    qmodel = nn.quantize(graph, data, config)
    float_nodes = {n.name: n for n in graph.nodes}
    plan = {}
    for node in qmodel.nodes:
        if not node.multiplier:
            continue
        fused_bn = None
        readers = [n for n in graph.nodes if node.name in n.inputs]
        if len(readers) == 1 and isinstance(readers[0].layer, nn.BatchNorm2d) \
                and node.name != graph.output:
            fused_bn = readers[0].name
        plan[node.name] = dict(node=node, bn=fused_bn,
                               sample_shape=graph.shapes[float_nodes[node.name].inputs[0]])
    return plan


def _node_for(module, name, in_range, out_range, config):
    weight = module.weight.detach().to(torch.float32).numpy().astype(np.float64)
    has_bias = module.bias is not None
    if isinstance(module, torch.nn.Linear):
        layer = nn.Linear(module.in_features, module.out_features, has_bias)
    else:
        one = isinstance(module, torch.nn.Conv1d)
        pair = (lambda v: (1, v[0])) if one else (lambda v: tuple(v))
        if one:
            weight = weight[:, :, None, :]
        layer = nn.Conv2d(module.in_channels, module.out_channels, pair(module.kernel_size),
                          pair(module.stride), pair(module.padding), pair(module.dilation),
                          module.groups, has_bias)
    bias = module.bias.detach().to(torch.float32).numpy() if has_bias else np.zeros(weight.shape[0])
    qps = [quant.choose_qparams(lo, hi, signed=False, symmetric=config.activation_symmetric)
           for lo, hi in (in_range, out_range)]
    return nn._QWeighted(name, [nn.INPUT], layer, weight, bias, qps[0], qps[1], None, config)


def _plan_by_layer(model, batches, config, selected):
    observers, shapes, handles = {}, {}, []
    modules = dict(model.named_modules())

    def hook(name):
        def record(module, inputs, output):
            for key, value in (("in", inputs[0]), ("out", output)):
                observers.setdefault((name, key), nn._RangeObserver(
                    config.calibration, config.percentile)).update(
                        value.detach().to(torch.float32).numpy())
            shapes[name] = tuple(inputs[0].shape[1:])
        return record

    for name in selected:
        handles.append(modules[name].register_forward_hook(hook(name)))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for b in batches:
                model(b)
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()
    plan = {}
    for name in selected:
        if name not in shapes:
            raise ApproximationError(f"layer {name!r} never ran on the calibration data")
        node = _node_for(modules[name], name, observers[(name, "in")].range(),
                         observers[(name, "out")].range(), config)
        plan[name] = dict(node=node, bn=None, sample_shape=shapes[name])
    return plan


def _plan(model, batches, config, selected):
    float_layers = [m for m in model.modules() if isinstance(m, ApproxLayer)]
    for m in float_layers:
        m._q_float = True
    try:
        try:
            return _plan_from_graph(model, batches, config), "graph", None
        except Untranslatable as e:
            return _plan_by_layer(model, batches, config, selected), "per-layer", str(e)
    finally:
        for m in float_layers:
            m._q_float = False


def recalibrate(model, calibration):
    """Calibrate an approximated model again, in place (after its weights changed).

    Activation ranges come from the float model with the current weights, as
    ``approximate`` did; retraining calls this once per epoch so that the
    model matches what ``approxmul evaluate`` makes of its saved weights.

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
    plan, how, why = _plan(model, _batches(calibration), plan_info["config"], list(layers_))
    for name, module in layers_.items():
        entry = plan[name]
        module._setup(name, module.q_multiplier, entry["node"], module._q_bn, module.q_gradient,
                      tuple(entry["sample_shape"]))
    plan_info.update(calibration=how, reason=why)
    return model


def approximate(model, multipliers, *, calibration, scheme=None, gradient="ste", inplace=False):
    """A copy of ``model`` (or ``model`` itself with ``inplace``) with approximate layers.

    multipliers: one multiplier for every Conv1d/Conv2d/Linear layer (a
        Multiplier or anything :func:`approxmul_cffi.multiplier` accepts), or
        a mapping from qualified module names or glob patterns to
        multipliers; unmatched layers stay float torch layers.
    calibration: an iterable of input batches (tensors, arrays, or
        (inputs, labels) pairs as a DataLoader yields).
    scheme: a :class:`approxmul_cffi.quant.QuantConfig` (or a dict of its
        fields, or "minmax"/"percentile"): code domains follow each
        multiplier's signedness as in ``approxmul evaluate``.
    gradient: "ste", "table" (1-D slopes), "table2d" (full gradient tables)
        or "none" (inference only).

    When torch.fx can trace the model into approxmul's graph (Conv2d,
    Linear, BatchNorm2d, ReLU/ReLU6, pools, flatten, add), calibration runs
    through that graph and every decision (BN folding, ReLU fusion, scales
    kept through pools) is the evaluator's: the outputs are bit-exact with
    ``approxmul evaluate``. Otherwise each layer is calibrated on its own
    input and output (``model.approxmul_plan`` says which, and why).

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 2))
    >>> approx = approximate(net, "exact", calibration=[torch.rand(8, 4)])
    >>> bool((approx(torch.rand(3, 4)) - net(torch.rand(3, 4))).abs().max() < 10)
    True
    """
    if gradient not in GRADIENTS:
        raise ApproximationError(f"gradient must be one of {', '.join(GRADIENTS)}, got {gradient!r}")
    if not isinstance(model, torch.nn.Module):
        raise ApproximationError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    config = _config(scheme)
    assignment = _assign(model, multipliers)
    modules = dict(model.named_modules())
    for name, m in assignment.items():
        _check_layer(name, modules[name], m)
    batches = _batches(calibration)
    if not inplace:
        model = copy.deepcopy(model)
        modules = dict(model.named_modules())
    plan, how, why = _plan(model, batches, config, list(assignment))
    for name, m in assignment.items():
        entry, module = plan[name], modules[name]
        bn = modules[entry["bn"]] if entry["bn"] else None
        if bn is not None:
            _swap_class(bn, _FoldedBatchNorm, "Folded")
        _swap_class(module, ApproxLayer, "Approx")
        module._setup(name, m, entry["node"], bn, gradient, tuple(entry["sample_shape"]))
    model.approxmul_plan = {"calibration": how, "reason": why, "config": config,
                            "layers": {name: getattr(m, "spec", None) for name, m in assignment.items()}}
    return model
