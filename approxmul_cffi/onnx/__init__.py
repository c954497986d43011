"""Bring your own model: ONNX import into an ``nn.Model``.

:func:`load_onnx` reads an ONNX file (or its bytes) and returns the same
graph type the evaluator and the other front ends use, so ``approxmul
evaluate --model model.onnx`` quantizes and runs it like a native model:
Conv, Gemm and MatMul with constant weights pass the multiplier, every other
op runs in float as in the model. Constant subgraphs (Shape/Gather/Constant
chains, ConstantOfShape weights) are folded at import. docs/onnx.md is the
guide. Needs the ``onnx`` package (``pip install 'approxmul[onnx]'``).

>>> import numpy as np
>>> from onnx import helper, numpy_helper, TensorProto
>>> w = numpy_helper.from_array(np.array([[1.0, -1.0]], np.float32).T, "w")
>>> g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], "g",
...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])], [w])
>>> model = load_onnx(helper.make_model(g).SerializeToString())
>>> model.forward(np.array([[3.0, 1.0]], np.float32)).tolist(), model.output
([[2.0]], 'fc')
"""

from __future__ import annotations

import os

from ..errors import ModelError
from ._reader import check_graph, check_initializers, check_opsets, import_onnx, node_order, parse
from ._translate import Translator

__all__ = ["is_onnx_path", "load_model", "load_onnx", "source_files"]

FLOAT_TYPES = (1, 10, 11, 16)  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def is_onnx_path(path):
    """True for a path naming an ONNX file (by its extension).

    >>> is_onnx_path("resnet.onnx"), is_onnx_path("lenet.json")
    (True, False)
    """
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).lower().endswith(".onnx")


def load_model(path):
    """An ``nn.Model`` from a model JSON (``nn.Model.load``) or an ONNX file (by extension).

    >>> from approxmul_cffi.evaluation import BUNDLED_MODEL
    >>> load_model(BUNDLED_MODEL).output
    'fc2'
    """
    from .. import nn

    return load_onnx(path) if is_onnx_path(path) else nn.Model.load(path)


def source_files(path):
    """The files a saved model is made of: an ONNX file, or a JSON and its weights.

    >>> from approxmul_cffi.evaluation import BUNDLED_MODEL
    >>> [os.path.basename(p) for p in source_files(BUNDLED_MODEL)]
    ['digits_lenet.json', 'digits_lenet.npz']
    """
    if is_onnx_path(path):
        return [path]
    import json

    with open(path) as f:
        weights = json.load(f).get("weights", "")
    return [path, os.path.join(os.path.dirname(path), weights)]


def _input_shape(value_info, name, override):
    t = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type") or t.elem_type not in FLOAT_TYPES:
        raise ModelError(f"{name}: input {value_info.name!r} is not a float tensor (quantized "
                         "models take float inputs through QuantizeLinear)")
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    if override is not None:
        return 1, tuple(int(s) for s in override)
    if not t.HasField("shape") or not dims:
        raise ModelError(f"{name}: input {value_info.name!r} has no declared shape; pass "
                         "input_shape=(C, H, W)")
    if any(d is None or d <= 0 for d in dims[1:]):
        raise ModelError(f"{name}: input {value_info.name!r} has dynamic dimensions "
                         f"{[d.dim_param or d.dim_value for d in t.shape.dim]} beyond the batch; "
                         "pass input_shape= (one sample's shape) to resolve them")
    return (dims[0] or 1), tuple(dims[1:])


def load_onnx(source, *, input_shape=None):
    """The ``nn.Model`` of an ONNX model (a path, or the file's bytes).

    Dimension 0 of the single graph input is the batch; ``input_shape``
    (one sample's shape) resolves other dynamic dimensions. Layer names are
    the ONNX node names. Errors: :class:`~approxmul_cffi.errors.FormatError`
    for unreadable bytes, :class:`~approxmul_cffi.errors.ModelError` for a
    graph that is invalid or uses unsupported ops (all of them named),
    ``LibraryIOError`` for missing files.

    >>> from approxmul_cffi.errors import FormatError
    >>> try:
    ...     load_onnx(b"not a model")
    ... except FormatError as error:
    ...     print(str(error)[:37])
    ONNX bytes: not a readable ONNX model
    """
    onnx = import_onnx()
    from onnx import numpy_helper

    from .. import nn

    model, folder, name = parse(source)
    opset = check_opsets(model, name)
    check_initializers(model, folder, name)
    graph = model.graph
    order = node_order(graph, name)
    check_graph(model, name)
    constants = {}
    for t in graph.initializer:
        try:
            constants[t.name] = numpy_helper.to_array(t)
        except Exception as error:  # onnx raises several types for bad tensors
            raise ModelError(f"{name}: initializer {t.name!r}: {error}") from None
    read = {s for node in graph.node for s in node.input}
    inputs = [i for i in graph.input if i.name not in constants and i.name in read]
    if len(inputs) != 1:
        names = [i.name for i in inputs]
        raise ModelError(f"{name}: needs exactly one non-constant input that nodes read, has "
                         f"{len(names)}: {names[:5]}{' ...' if len(names) > 5 else ''}")
    batch, shape = _input_shape(inputs[0], name, input_shape)
    tr = Translator(constants, inputs[0].name, shape, opset, batch)
    for node in order:
        live = [s for s in node.input if s and s not in constants]
        try:
            if not live or (node.op_type in ("Shape", "Size") and live[0] in tr.source):
                tr.fold(node)
                continue
        except ModelError as error:
            raise ModelError(f"{name}: {node.op_type} node {tr.base(node)!r}: {error}") from None
        if any(s not in tr.source for s in live):  # downstream of an unsupported node
            if not tr.supports(node):
                tr.unsupported.append(node)
            continue
        try:
            tr.translate(node)
        except ModelError as error:
            raise ModelError(f"{name}: {error}") from None
    if not tr.unsupported:
        try:
            tr.finish_dynamic()
        except ModelError as error:
            raise ModelError(f"{name}: {error}") from None
    if tr.unsupported:
        kinds = {}
        for node in tr.unsupported:
            kinds.setdefault(node.op_type if node.domain in ("", "ai.onnx")
                             else f"{node.domain}.{node.op_type}", []).append(tr.base(node))
        listed = "; ".join(f"{op} (nodes {', '.join(map(repr, names[:5]))}"
                           f"{', ...' if len(names) > 5 else ''})" for op, names in kinds.items())
        raise ModelError(f"{name}: unsupported ONNX op(s): {listed}")
    out = graph.output[0].name
    if out in constants or tr.source.get(out, nn.INPUT) == nn.INPUT:
        raise ModelError(f"{name}: output {out!r} does not depend on the input through any op")
    if not tr.nodes:
        raise ModelError(f"{name}: no op to run")
    meta = {"format": "onnx", "source": name, "opset": opset,
            "producer": f"{model.producer_name} {model.producer_version}".strip(),
            "onnx_input": inputs[0].name, "onnx_output": out}
    del onnx
    result = nn.Model(shape, tr.nodes, output=tr.source[out], metadata=meta)
    if tr.quantized:  # QDQ/QOperator: nn.quantize keeps the model's own grids and codes
        try:
            result.quantization = tr.given_quantization(result)
        except ModelError as error:
            raise ModelError(f"{name}: {error}") from None
        result.metadata["quantized"] = True
    return result
