"""Reading a saved model (JSON + .npz weights) without trusting what it declares.

A model file names layers and their sizes; its weights file declares array
shapes. Both are checked against each other, against the bytes present and
for plain mistakes (two layers with one name, a kernel size that is not a
number) before any weight is read or any
layer allocates parameters, and every error is one line naming the file and
the layer (a count like ``in_features: 1e300`` ends as a shape the weights
file does not hold). :func:`read_model` does the reading for
``nn.Model.load``.
"""

import json
import math
import os

from . import safe_files
from .errors import ApproxmulError, ModelError

#: a model description larger than this is not a model description
MAX_JSON_BYTES = 16 << 20


def _layer_without_parameters(op, config, where):
    """``op(**config)`` with parameter allocation skipped: they come from the file, checked.

    The constructor's own zeros for missing weights would allocate whatever
    the config declares (a Linear of 10^6 x 10^6: 7 TiB) before the weights
    file could say otherwise.
    """
    layer = op.__new__(op)
    layer._init_params = lambda given: None  # shadows the method for this construction only
    try:
        op.__init__(layer, **config)
    except (TypeError, ValueError, OverflowError, ApproxmulError) as error:
        raise ModelError(f"{where}: bad config ({op.__name__} {json.dumps(config)}): "
                         f"{error}") from None
    finally:
        del layer._init_params
    return layer


def read_model(path, layer_types, model_format, format_version):
    """(input shape, [(name, layer, inputs)], output, metadata, JSON path) of a saved model.

    Every problem is one ModelError naming the file (and the layer):

    >>> from approxmul_cffi import nn
    >>> _ = nn.Model((2,), [("fc", nn.Linear(2, 1))]).save("m.json")
    >>> _ = open("m.json", "a").write("x")
    >>> nn.load("m.json")
    Traceback (most recent call last):
    ...
    approxmul_cffi.errors.ModelError: model file m.json is not valid JSON (truncated?): ...
    """
    path = os.fspath(path)
    if not path.endswith(".json") and not os.path.exists(path):
        path += ".json"
    if not os.path.exists(path):
        raise ModelError(f"model file not found: {path}")
    try:
        text = safe_files.read_bounded(path, MAX_JSON_BYTES, "a model description")
        doc = json.loads(text)
    except ApproxmulError as error:
        raise ModelError(str(error)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ModelError(f"model file {path} is not valid JSON (truncated?): {error}") from None
    if not isinstance(doc, dict) or doc.get("format") != model_format:
        raise ModelError(f"{path} is not an approxmul model (format {model_format!r})")
    if doc.get("version") != format_version:
        raise ModelError(f"{path}: unsupported model format version {doc.get('version')!r}")
    if not isinstance(doc.get("weights"), str) or not doc["weights"]:
        raise ModelError(f"{path} names no weights file")
    weights_path = os.path.join(os.path.dirname(path), doc["weights"])
    if not os.path.exists(weights_path):
        raise ModelError(f"weights file not found: {weights_path}")
    try:
        headers = safe_files.npz_headers(weights_path)
    except ApproxmulError as error:
        raise ModelError(f"weights file {error}") from None

    specs = doc.get("nodes")
    if not isinstance(specs, list) or not specs:
        raise ModelError(f"model file {path} is malformed: it lists no layers ('nodes')")
    seen = {}
    for index, spec in enumerate(specs):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ModelError(f"model file {path}: node {index} is not an object with a 'name'")
        if spec["name"] in seen:
            raise ModelError(f"model file {path}: layer name {spec['name']!r} is used twice "
                             f"(nodes {seen[spec['name']]} and {index})")
        seen[spec["name"]] = index

    layers, wanted, total = [], {}, 0
    for spec in specs:
        name = spec["name"]
        where = f"model file {path}: layer {name!r}"
        op = layer_types.get(spec.get("op"))
        if op is None:
            raise ModelError(f"{where}: unknown op {spec.get('op')!r}; known: "
                             f"{', '.join(sorted(layer_types))}")
        config = spec.get("config", {})
        if not isinstance(config, dict):
            raise ModelError(f"{where}: config is not an object")
        layer = _layer_without_parameters(op, config, where)
        for pname, shape in layer.param_shapes().items():
            key = f"{name}.{pname}"
            if key not in headers:
                raise ModelError(f"weights file {weights_path} lacks {key!r} (layer {name!r} "
                                 f"needs shape {tuple(shape)})")
            held, dtype = headers[key]
            if tuple(held) != tuple(shape):
                raise ModelError(f"{where} ({spec['op']}): needs {pname} of shape "
                                 f"{tuple(shape)}; weights file {weights_path} holds "
                                 f"{key!r} of shape {tuple(held)} ({dtype})")
            wanted[key] = (layer, pname)
            total += math.prod(held) * dtype.itemsize
        inputs = spec.get("inputs")
        layers.append((name, layer, inputs))
    unused = sorted(set(headers) - set(wanted))
    if unused:
        raise ModelError(f"weights file {weights_path} has entries no layer uses: {unused}")

    # every declared size is now the one the structure needs: read exactly those
    try:
        arrays = safe_files.load_npz(weights_path, max_bytes=total, what="the model's weights",
                                     names=list(wanted))
    except ApproxmulError as error:
        raise ModelError(f"weights file {error}") from None
    for key, (layer, pname) in wanted.items():
        try:
            layer.set_param(pname, arrays.pop(key))
        except ApproxmulError as error:
            raise ModelError(f"model file {path}: layer {key.split('.')[0]!r}: {error}") from None
    try:
        input_shape = doc["input"]["shape"]
    except (KeyError, TypeError):
        raise ModelError(f"model file {path} is malformed: no input shape") from None
    return input_shape, layers, doc.get("output"), doc.get("metadata"), path
