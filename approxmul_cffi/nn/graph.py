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
import zipfile

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
        """Read a model saved by :meth:`save` (path of the JSON, or its stem)."""
        path = os.fspath(path)
        if not path.endswith(".json") and not os.path.exists(path):
            path += ".json"
        try:
            with open(path) as f:
                doc = json.load(f)
        except FileNotFoundError:
            raise ModelError(f"model file not found: {path}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ModelError(f"model file {path} is not valid JSON (truncated?): {e}") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ModelError(f"{path} is not an approxmul model (format {FORMAT!r})")
        if doc.get("version") != FORMAT_VERSION:
            raise ModelError(f"{path}: unsupported model format version {doc.get('version')!r}")
        if not isinstance(doc.get("weights"), str) or not doc["weights"]:
            raise ModelError(f"{path} names no weights file")
        weights_path = os.path.join(os.path.dirname(path), doc["weights"])
        try:
            with np.load(weights_path, allow_pickle=False) as npz:
                weights = {k: npz[k] for k in npz.files}
        except FileNotFoundError:
            raise ModelError(f"weights file not found: {weights_path}") from None
        except (zipfile.BadZipFile, EOFError, ValueError, OSError) as e:
            raise ModelError(f"weights file {weights_path} is truncated or corrupt: {e}") from None
        try:
            nodes = []
            for spec in doc["nodes"]:
                op = LAYER_TYPES.get(spec["op"])
                if op is None:
                    raise ModelError(f"layer {spec['name']!r}: unknown op {spec['op']!r}; "
                                     f"known: {', '.join(sorted(LAYER_TYPES))}")
                try:
                    layer = op(**spec.get("config", {}))
                except (TypeError, ModelError) as e:
                    raise ModelError(f"layer {spec['name']!r}: bad config: {e}") from None
                for pname in layer.param_shapes():
                    key = f"{spec['name']}.{pname}"
                    if key not in weights:
                        raise ModelError(f"weights file {weights_path} lacks {key!r}")
                    try:
                        layer.set_param(pname, weights.pop(key))
                    except ModelError as e:
                        raise ModelError(f"layer {spec['name']!r}: {e}") from None
                nodes.append((spec["name"], layer, spec["inputs"]))
            model = cls(doc["input"]["shape"], nodes, output=doc.get("output"),
                        metadata=doc.get("metadata"))
        except (KeyError, TypeError) as e:
            raise ModelError(f"model file {path} is malformed: missing or bad entry {e}") from None
        if weights:
            raise ModelError(f"weights file {weights_path} has entries no layer uses: "
                             f"{sorted(weights)}")
        return model


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
