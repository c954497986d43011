"""torch.fx graph of a torch model -> approxmul_cffi.nn.Model with the same weights.

Calibrating through the translated model makes exactly the evaluator's
quantization decisions (BN folding, ReLU fusion, scales carried through
pools and flatten). A model with anything the nn graph cannot express
raises :class:`Untranslatable`; the adapter then calibrates layer by layer.
"""

import operator

import numpy as np
import torch
import torch.nn.functional as F
from torch import fx
from torch.fx.passes.shape_prop import ShapeProp

from approxmul_cffi import nn

from ._common import evaluation_mode


class Untranslatable(Exception):
    """The model has a node the approxmul nn graph cannot express."""


def _kind(m):
    """The torch class a module was before the adapter swapped it."""
    return getattr(type(m), "_q_base", type(m))


class _Tracer(fx.Tracer):
    """Keeps swapped (approximate, folded) layers as leaves, like torch.nn's own."""

    def is_leaf_module(self, m, qualname):
        return hasattr(type(m), "_q_base") or super().is_leaf_module(m, qualname)


def _np(t):
    return t.detach().cpu().to(torch.float32).numpy()


def _conv(m):
    if _kind(m) is not torch.nn.Conv2d or m.padding_mode != "zeros" or isinstance(m.padding, str):
        raise Untranslatable(f"{type(m).__name__} (padding_mode {m.padding_mode!r})")
    return nn.Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding,
                     m.dilation, m.groups, m.bias is not None, weight=_np(m.weight),
                     bias_value=None if m.bias is None else _np(m.bias))


def _linear(m):
    if _kind(m) is not torch.nn.Linear:
        raise Untranslatable(type(m).__name__)
    return nn.Linear(m.in_features, m.out_features, m.bias is not None, weight=_np(m.weight),
                     bias_value=None if m.bias is None else _np(m.bias))


def _batchnorm(m):
    if _kind(m) is not torch.nn.BatchNorm2d or not m.track_running_stats or not m.affine:
        raise Untranslatable("BatchNorm2d without affine running statistics")
    return nn.BatchNorm2d(m.num_features, m.eps, weight=_np(m.weight), bias=_np(m.bias),
                          running_mean=_np(m.running_mean), running_var=_np(m.running_var))


def _pool(cls, kernel, stride=None, padding=0, dilation=1, ceil_mode=False, **rest):
    include = rest.pop("count_include_pad", True)
    if ceil_mode or dilation not in (1, (1, 1)) or rest.get("divisor_override") is not None \
            or rest.get("return_indices"):
        raise Untranslatable(f"{cls.__name__} with options {rest}")
    try:
        return cls(kernel, stride or None, padding) if cls is nn.MaxPool2d else \
            cls(kernel, stride or None, padding, count_include_pad=include)
    except nn.ModelError as e:
        raise Untranslatable(str(e)) from None


def _avg_pool(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    """F.avg_pool2d's arguments (its order has no dilation)."""
    return _pool(nn.AvgPool2d, kernel_size, stride, padding, 1, ceil_mode,
                 count_include_pad=count_include_pad, divisor_override=divisor_override)


def _module_layer(m):
    """nn layer for a leaf module, or None for an identity."""
    if isinstance(m, (torch.nn.Identity, torch.nn.Dropout)):
        return None
    if isinstance(m, torch.nn.Conv2d):
        return _conv(m)
    if isinstance(m, torch.nn.Linear):
        return _linear(m)
    if isinstance(m, torch.nn.BatchNorm2d):
        return _batchnorm(m)
    if _kind(m) is torch.nn.ReLU:
        return nn.ReLU()
    if _kind(m) is torch.nn.ReLU6:
        return nn.ReLU6()
    if _kind(m) is torch.nn.MaxPool2d:
        return _pool(nn.MaxPool2d, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode,
                     return_indices=m.return_indices)
    if _kind(m) is torch.nn.AvgPool2d:
        return _pool(nn.AvgPool2d, m.kernel_size, m.stride, m.padding, 1, m.ceil_mode,
                     count_include_pad=m.count_include_pad, divisor_override=m.divisor_override)
    if _kind(m) is torch.nn.AdaptiveAvgPool2d and m.output_size in (1, (1, 1)):
        return nn.GlobalAvgPool()
    if _kind(m) is torch.nn.Softmax and m.dim in (1, -1):
        return nn.Softmax()
    if _kind(m) is torch.nn.Flatten and m.start_dim == 1 and m.end_dim == -1:
        return nn.Flatten()
    raise Untranslatable(f"module {type(m).__name__}")


def _call(fn, args, kwargs):
    """nn layer for a function call, or None for an identity."""
    if fn in (F.relu, torch.relu):
        return nn.ReLU()
    if fn is F.relu6:
        return nn.ReLU6()
    if fn in (F.max_pool2d, torch.max_pool2d):
        return _pool(nn.MaxPool2d, *args[1:], **kwargs)
    if fn is F.avg_pool2d:
        return _avg_pool(*args[1:], **kwargs)
    if fn is F.adaptive_avg_pool2d and tuple(np.atleast_1d(args[1])) in ((1,), (1, 1)):
        return nn.GlobalAvgPool()
    if fn is torch.flatten and (args[1:] or [kwargs.get("start_dim", 0)])[0] == 1:
        return nn.Flatten()
    if fn in (operator.add, torch.add) and len(args) == 2 and not kwargs:
        return nn.Add()
    if fn in (F.dropout,):
        return None
    raise Untranslatable(f"function {getattr(fn, '__name__', fn)}")


def _method(name, node):
    if name == "relu":
        return nn.ReLU()
    if name in ("flatten", "view", "reshape") and len(node.meta["tensor_meta"].shape) == 2:
        return nn.Flatten()
    if name in ("size", "contiguous"):
        return None
    raise Untranslatable(f"method .{name}()")


def translate(model, sample):
    """(nn.Model, {nn name: torch module name}) for ``model``; ``sample`` is one input batch."""
    try:
        gm = fx.GraphModule(model, _Tracer().trace(model))
    except Exception as e:  # torch raises many kinds for untraceable control flow
        raise Untranslatable(f"torch.fx cannot trace the model: {e}") from None
    # the sample in the model's own floating type (a float64 or bfloat16 model
    # refuses float32 inputs); the graph itself takes float32 weights and data
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), sample.dtype)
    try:
        with evaluation_mode(gm):  # gm shares the model's modules: their flags come back
            ShapeProp(gm).propagate(sample.to(dtype))
    except Exception as e:  # whatever the model's own forward raises on the sample
        raise Untranslatable(f"torch.fx cannot run the traced model: {e}") from None
    names, nodes, flat = {}, [], set()
    output = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if names:
                raise Untranslatable("a model with more than one input")
            names[node] = nn.INPUT
            continue
        if node.op == "output":
            output = names.get(node.args[0])
            continue
        tensors = [a for a in node.args if isinstance(a, fx.Node)]
        if node.op == "call_module":
            layer, name = _module_layer(gm.get_submodule(node.target)), node.target
        elif node.op == "call_function":
            layer, name = _call(node.target, node.args, node.kwargs), node.name
        elif node.op == "call_method":
            layer, name = _method(node.target, node), node.name
        else:
            raise Untranslatable(f"graph node {node.op} {node.target}")
        if node.op == "call_method" and node.target == "size":
            continue
        inputs = [names[a] for a in tensors if a in names]
        if isinstance(layer, nn.Flatten) and inputs[0] in flat:
            layer = None  # GlobalAvgPool already gave (C,)
        if layer is None:
            names[node] = inputs[0]
            continue
        if isinstance(layer, nn.GlobalAvgPool):
            flat.add(name)
        if name == nn.INPUT:
            raise Untranslatable(f"a layer named {nn.INPUT!r}")
        nodes.append((name, layer, inputs[:layer.arity]))
        names[node] = name
    if output is None:
        raise Untranslatable("the model's output is not a tensor the graph computes")
    try:
        return nn.Model(tuple(sample.shape[1:]), nodes, output=output)
    except nn.ModelError as e:
        raise Untranslatable(str(e)) from None
