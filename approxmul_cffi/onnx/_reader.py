"""Reading an ONNX file without trusting it: one clear error per kind of bad input.

The protobuf is parsed from bytes read under a size limit; every
initializer's declared size is compared with the bytes that hold it (inline
or in an external file, which must lie next to the model) before any array
is made; the graph is checked for unknown tensors and cycles, then by
onnx's own checker. Errors are :class:`FormatError` (the bytes) or
:class:`ModelError` (the graph).
"""

from __future__ import annotations

import math
import os

from ..errors import FormatError, LibraryIOError, ModelError
from ..safe_files import read_bounded

MAX_MODEL_BYTES = 2 << 30   # protobuf's own limit for one message
MAX_TENSOR_BYTES = 1 << 31  # any one initializer or folded constant
MIN_OPSET = 7               # ONNX 1.2: the oldest opset whose operator semantics we map


def import_onnx():
    try:
        import onnx
    except ImportError:
        raise ImportError("ONNX import needs the onnx package: pip install 'approxmul[onnx]'") \
            from None
    return onnx


def parse(source):
    """(ModelProto, folder for external data or None, name for messages)."""
    onnx = import_onnx()
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, folder, name = bytes(source), None, "ONNX bytes"
    else:
        name = os.fspath(source)
        if not os.path.exists(name):
            raise LibraryIOError(f"ONNX model not found: {name}")
        data = read_bounded(name, MAX_MODEL_BYTES, "an ONNX model")
        folder = os.path.dirname(os.path.abspath(name))
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as error:  # protobuf's DecodeError and friends
        raise FormatError(f"{name}: not a readable ONNX model (truncated or corrupt: "
                          f"{error})") from None
    if not model.HasField("graph") or not model.graph.node or model.ir_version <= 0:
        raise FormatError(f"{name}: not an ONNX model (no graph, no nodes or no IR version; "
                          "truncated or another file type?)")
    return model, folder, name


def check_opsets(model, name):
    onnx = import_onnx()
    newest = onnx.defs.onnx_opset_version()
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    version = opsets.get("ai.onnx")
    if version is None:
        raise ModelError(f"{name}: imports no ai.onnx opset")
    if not MIN_OPSET <= version <= newest:
        raise ModelError(f"{name}: opset {version} is out of range: supported "
                         f"{MIN_OPSET}..{newest} (this onnx package's newest)")
    return version


def _external_info(tensor):
    entries = {e.key: e.value for e in tensor.external_data}
    try:
        return entries["location"], int(entries.get("offset", 0)), \
            int(entries["length"]) if "length" in entries else None
    except (KeyError, ValueError):
        raise FormatError(f"initializer {tensor.name!r}: external data without a valid "
                          "location/offset/length") from None


def check_initializers(model, folder, name):
    """Declared sizes against the bytes holding them, then external data loaded."""
    onnx = import_onnx()
    from onnx import external_data_helper

    for t in model.graph.initializer:
        try:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
        except (KeyError, ValueError, TypeError):
            raise ModelError(f"{name}: initializer {t.name!r} has unknown data type "
                             f"{t.data_type}") from None
        if any(d < 0 for d in t.dims):
            raise FormatError(f"{name}: initializer {t.name!r} has negative dims {list(t.dims)}")
        count = math.prod(t.dims)
        nbytes = count * dtype.itemsize
        if nbytes > MAX_TENSOR_BYTES:
            raise FormatError(f"{name}: initializer {t.name!r} declares {nbytes} bytes "
                              f"(dims {list(t.dims)}), more than {MAX_TENSOR_BYTES}")
        if t.data_location == onnx.TensorProto.EXTERNAL:
            location, offset, length = _external_info(t)
            if folder is None:
                raise ModelError(f"{name}: initializer {t.name!r} keeps its data in external "
                                 f"file {location!r}; load the model from its path")
            path = os.path.normpath(os.path.join(folder, location))
            if os.path.isabs(location) or not path.startswith(folder + os.sep):
                raise FormatError(f"{name}: external data {location!r} of {t.name!r} lies "
                                  "outside the model's folder")
            if not os.path.isfile(path):
                raise LibraryIOError(f"{name}: external data file {location!r} of initializer "
                                     f"{t.name!r} is missing")
            size = os.path.getsize(path)
            length = size - offset if length is None else length
            if length != nbytes or offset < 0 or offset + length > size:
                raise FormatError(f"{name}: initializer {t.name!r} declares {nbytes} bytes at "
                                  f"offset {offset} of {location!r} ({size} bytes, length "
                                  f"{length})")
            external_data_helper.load_external_data_for_tensor(t, folder)
            t.data_location = onnx.TensorProto.DEFAULT
            del t.external_data[:]
        elif t.HasField("raw_data"):
            if len(t.raw_data) != nbytes:
                raise FormatError(f"{name}: initializer {t.name!r} declares {nbytes} bytes "
                                  f"(dims {list(t.dims)}) but holds {len(t.raw_data)}")
        else:
            field = onnx.helper.tensor_dtype_to_field(t.data_type)
            held = len(getattr(t, field))
            if held != count and dtype.kind != "c":
                raise FormatError(f"{name}: initializer {t.name!r} declares {count} values "
                                  f"(dims {list(t.dims)}) but holds {held}")
    if len(model.graph.sparse_initializer):
        raise ModelError(f"{name}: sparse initializers are not supported")


def node_order(graph, name):
    """Nodes in dependency order; ModelError for unknown tensors and cycles."""
    known = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    producer = {}
    for index, node in enumerate(graph.node):
        for out in node.output:
            if out:
                producer[out] = index
    for node in graph.node:
        for src in node.input:
            if src not in known and src not in producer:
                raise ModelError(f"{name}: node {node.name or node.op_type!r} reads "
                                 f"{src!r}, which no input, initializer or node defines")
    for out in graph.output:
        if out.name not in known and out.name not in producer:
            raise ModelError(f"{name}: graph output {out.name!r} is never computed")
    order, state = [], {}
    for start in range(len(graph.node)):
        stack = [(start, 0)]
        while stack:  # iterative DFS: deep graphs do not hit the recursion limit
            index, pos = stack.pop()
            if pos == 0:
                if state.get(index) == "done":
                    continue
                state[index] = "open"
            inputs = [producer[s] for s in graph.node[index].input if s in producer]
            if pos < len(inputs):
                stack.append((index, pos + 1))
                nxt = inputs[pos]
                if state.get(nxt) == "open":
                    node = graph.node[nxt]
                    raise ModelError(f"{name}: the graph has a cycle through node "
                                     f"{node.name or node.op_type!r}")
                if nxt not in state:
                    stack.append((nxt, 0))
            else:
                state[index] = "done"
                order.append(graph.node[index])
    return order


def check_graph(model, name):
    """onnx's checker, its errors as ModelError."""
    onnx = import_onnx()
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else "invalid"
        raise ModelError(f"{name}: onnx checker: {first}") from None
