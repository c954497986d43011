"""Graph models: named layers wired by name, float inference, and model files.

A model file is ``<stem>.json`` (structure: every node's op, inputs and
config) next to ``<stem>.npz`` (weights, ``<node>.<parameter>``).

>>> import numpy as np
>>> from approxmul_cffi import nn
>>> m = nn.Model((3,), [("fc", nn.Linear(3, 2)), ("sm", nn.Softmax())])
>>> m.forward(np.zeros((4, 3))).shape, m.output
((4, 2), 'sm')
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from ..errors import ModelError
from .layers import LAYER_TYPES, Layer

__all__ = ["FORMAT", "FORMAT_VERSION", "INPUT", "Model", "Node", "load", "save"]

FORMAT = "approxmul-model"
FORMAT_VERSION = 1
INPUT = "input"


@dataclasses.dataclass
class Node:
    name: str
    layer: Layer
    inputs: list


class Model:
    """A graph of named layers with one float input and one output.

    ``nodes`` are ``(name, layer)`` (input: the previous node, or the model
    input for the first) or ``(name, layer, [input names])``, in an order
    where every input is defined before use. ``input_shape`` is one sample's
    shape, e.g. ``(1, 8, 8)``.

    >>> from approxmul_cffi.nn import Linear, Softmax
    >>> m = Model((3,), [("fc", Linear(3, 2)), ("sm", Softmax())])
    >>> m.forward(np.zeros((4, 3))).shape, m.output
    ((4, 2), 'sm')
    """

    def __init__(self, input_shape, nodes, *, output=None, metadata=None):
        self.input_shape = tuple(int(s) for s in input_shape)
        self.metadata = dict(metadata or {})
        self.nodes = []
        previous = INPUT
        for entry in nodes:
            if isinstance(entry, Node):
                entry = (entry.name, entry.layer, entry.inputs)
            if len(entry) == 2:
                entry = (*entry, [previous])
            name, layer, inputs = entry
            if isinstance(inputs, str):
                inputs = [inputs]
            self.nodes.append(Node(str(name), layer, list(inputs)))
            previous = name
        if not self.nodes:
            raise ModelError("a model needs at least one layer")
        self.output = self.nodes[-1].name if output is None else output
        self.shapes = self._check_graph()

    def _check_graph(self):
        shapes = {INPUT: self.input_shape}
        for node in self.nodes:
            if not node.name or node.name in shapes:
                raise ModelError(f"layer name {node.name!r} is empty, reserved or used twice")
            if not isinstance(node.layer, Layer):
                raise ModelError(f"layer {node.name!r} is not an nn.Layer: {node.layer!r}")
            if len(node.inputs) != node.layer.arity:
                raise ModelError(f"layer {node.name!r} takes {node.layer.arity} input(s), "
                                 f"got {node.inputs}")
            for src in node.inputs:
                if src not in shapes:
                    raise ModelError(f"layer {node.name!r} reads {src!r}, which is not "
                                     "defined before it")
            try:
                shapes[node.name] = tuple(node.layer.output_shape(*(shapes[s] for s in node.inputs)))
            except ModelError as e:
                raise ModelError(f"layer {node.name!r}: {e}") from None
        if self.output not in shapes:
            raise ModelError(f"output {self.output!r} is not a layer of the model")
        return shapes

    @property
    def layers(self):
        return {node.name: node.layer for node in self.nodes}

    def check_input(self, x):
        """``x`` as a floating-point array of shape (N, *input_shape), or ModelError."""
        if not isinstance(x, np.ndarray):
            x = np.asarray(x)
        if x.dtype.kind != "f":
            raise ModelError(f"input data must be a floating-point array, got dtype {x.dtype}")
        if x.shape[1:] != self.input_shape or x.ndim != len(self.input_shape) + 1:
            raise ModelError(f"input data has shape {x.shape}, the model needs "
                             f"(N, {', '.join(map(str, self.input_shape))})")
        return x

    def forward(self, x, *, return_all=False):
        """Float inference; ``return_all`` gives every node's output by name."""
        values = {INPUT: self.check_input(x)}
        for node in self.nodes:
            values[node.name] = node.layer.forward(*(values[s] for s in node.inputs))
        return values if return_all else values[self.output]

    def predict(self, x):
        return self.forward(x).argmax(axis=-1)

    # ---- files: structure in JSON, weights in .npz next to it ----

    def to_json(self, weights_file):
        nodes = [dict(name=n.name, op=type(n.layer).__name__, inputs=n.inputs,
                      config=n.layer.config()) for n in self.nodes]
        return dict(format=FORMAT, version=FORMAT_VERSION,
                    input=dict(name=INPUT, shape=list(self.input_shape)),
                    output=self.output, weights=weights_file, nodes=nodes,
                    metadata=self.metadata)

    def save(self, path):
        """Write ``<stem>.json`` and ``<stem>.npz``; returns the JSON path.

        >>> import tempfile, os
        >>> from approxmul_cffi.nn import Linear
        >>> m = Model((3,), [("fc", Linear(3, 2, weight=np.ones((2, 3))))])
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = m.save(os.path.join(d, "tiny"))
        ...     bool((Model.load(p).forward(np.ones((1, 3))) == 3).all())
        True
        """
        stem = os.fspath(path)
        if stem.endswith(".json"):
            stem = stem[:-5]
        weights = {f"{n.name}.{k}": v for n in self.nodes for k, v in n.layer.params().items()}
        np.savez(stem + ".npz", **weights)
        with open(stem + ".json", "w") as f:
            json.dump(self.to_json(os.path.basename(stem) + ".npz"), f, indent=1)
            f.write("\n")
        return stem + ".json"

    @classmethod
    def load(cls, path):
        """Read a model saved by :meth:`save` (path of the JSON, or its stem).

        Declared sizes are checked against the weights file and the layers
        before anything is allocated (:mod:`approxmul_cffi.model_files`).
        """
        from ..model_files import read_model

        shape, nodes, output, metadata, path = read_model(path, LAYER_TYPES, FORMAT,
                                                          FORMAT_VERSION)
        try:
            return cls(shape, nodes, output=output, metadata=metadata)
        except (KeyError, TypeError) as e:
            raise ModelError(f"model file {path} is malformed: missing or bad entry {e}") from None
        except ModelError as e:
            raise ModelError(f"model file {path}: {e}") from None


def load(path):
    """The model saved at ``path`` (JSON path or stem): same as :meth:`Model.load`.

    >>> from approxmul_cffi.evaluation import BUNDLED_MODEL
    >>> load(BUNDLED_MODEL).input_shape
    (1, 8, 8)
    """
    return Model.load(path)


def save(model, path):
    """Write ``model`` to ``<stem>.json`` + ``<stem>.npz``: same as :meth:`Model.save`.

    >>> import tempfile, os
    >>> from approxmul_cffi import nn
    >>> m = Model((3,), [("fc", nn.Linear(3, 2))])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     os.path.basename(save(m, os.path.join(d, "tiny")))
    'tiny.json'
    """
    return model.save(path)
