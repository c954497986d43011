"""approxmul_cffi.nn models as torch modules, and trained weights back.

:func:`to_torch` builds a torch module that computes what an ``nn.Model``
computes, with its layer names as module names (so ``--layer conv1=...``
means the same layer in both); :func:`save_weights` writes a trained torch
module's parameters back into the ``nn.Model`` (for ``approxmul evaluate``).

Example:
    >>> import torch
    >>> from approxmul_cffi.evaluation import bundled_model
    >>> from approxmul_cffi.torch.graph import to_torch
    >>> model = bundled_model()
    >>> net = to_torch(model)
    >>> x = torch.rand(2, 1, 8, 8)
    >>> bool(torch.allclose(net(x), torch.from_numpy(model.forward(x.numpy())), atol=1e-5))
    True
"""

import operator

import torch

from approxmul_cffi import nn

__all__ = ["GraphNet", "save_weights", "to_torch"]


def _module(layer):
    t = torch.nn
    if isinstance(layer, nn.Conv2d):
        return t.Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride,
                        layer.padding, layer.dilation, layer.groups, layer.has_bias)
    if isinstance(layer, nn.Linear):
        return t.Linear(layer.in_features, layer.out_features, layer.has_bias)
    if isinstance(layer, nn.BatchNorm2d):
        return t.BatchNorm2d(layer.num_features, layer.eps)
    if isinstance(layer, nn.ReLU6):
        return t.ReLU6()
    if isinstance(layer, nn.ReLU):
        return t.ReLU()
    if isinstance(layer, nn.MaxPool2d):
        return t.MaxPool2d(layer.kernel_size, layer.stride, layer.padding)
    if isinstance(layer, nn.AvgPool2d):
        return t.AvgPool2d(layer.kernel_size, layer.stride, layer.padding,
                           count_include_pad=layer.count_include_pad)
    if isinstance(layer, nn.GlobalAvgPool):
        return t.Sequential(t.AdaptiveAvgPool2d(1), t.Flatten())
    if isinstance(layer, nn.Flatten):
        return t.Flatten()
    if isinstance(layer, nn.Softmax):
        return t.Softmax(dim=-1)
    if isinstance(layer, nn.Add):
        return None
    raise nn.ModelError(f"no torch module for {type(layer).__name__}")


class GraphNet(torch.nn.Module):
    """The nodes of an ``nn.Model`` as torch modules named like its layers."""

    def __init__(self, model):
        super().__init__()
        self.order = []
        for node in model.nodes:
            module = _module(node.layer)
            if module is not None:
                self.add_module(node.name, module)
            self.order.append((node.name, module is not None, list(node.inputs)))
        self.output = model.output

    def forward(self, x):
        values = {nn.INPUT: x}
        for name, is_module, inputs in self.order:
            args = [values[s] for s in inputs]
            values[name] = getattr(self, name)(*args) if is_module else operator.add(*args)
        return values[self.output]


def _params(layer):
    return {k: torch.from_numpy(v.copy()) for k, v in layer.params().items()}


def to_torch(model):
    """A float torch module (eval mode) with ``model``'s weights and layer names."""
    net = GraphNet(model)
    for node in model.nodes:
        if node.layer.param_shapes():
            module = getattr(net, node.name)
            for key, value in _params(node.layer).items():
                getattr(module, key).data.copy_(value)
    return net.eval()


def save_weights(net, model):
    """Copy the parameters of ``net`` (from :func:`to_torch`, trained) into ``model``.

    Returns ``model``; its structure and metadata are unchanged.
    """
    modules = dict(net.named_modules())
    for node in model.nodes:
        for key in node.layer.param_shapes():
            node.layer.set_param(key, getattr(modules[node.name], key).detach().to(torch.float32).numpy())
    return model
