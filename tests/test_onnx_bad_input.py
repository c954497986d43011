"""Bad ONNX input: one clear approxmul error each, nothing crashes, nothing huge is allocated."""

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from approxmul_cffi.errors import FormatError, LibraryIOError, ModelError  # noqa: E402
from approxmul_cffi.onnx import load_onnx  # noqa: E402
from onnx_models import lenet_onnx, make_model  # noqa: E402
from support import run_python  # noqa: E402

X = ("x", ["N", 2, 4, 4])


def relu_model(**kw):
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [X], [("y", None)], **kw)


def test_corrupt_and_truncated_files(tmp_path):
    data = lenet_onnx().SerializeToString()
    with pytest.raises(FormatError, match="not a readable ONNX model"):
        load_onnx(b"\xff" * 64)
    for cut in (7, 100, len(data) // 3, len(data) // 2, len(data) - 5):
        path = tmp_path / f"cut{cut}.onnx"
        path.write_bytes(data[:cut])
        with pytest.raises((FormatError, ModelError), match=f"cut{cut}.onnx"):
            load_onnx(path)
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(FormatError, match="not an ONNX model"):
        load_onnx(tmp_path / "empty.onnx")
    with pytest.raises(LibraryIOError, match="not found"):
        load_onnx(tmp_path / "missing.onnx")


def test_missing_and_short_external_data(tmp_path):
    model = lenet_onnx()
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="ext.data",
              size_threshold=0)
    assert load_onnx(path).layers["fc2"].weight.shape == (10, 64)  # the good case loads
    with pytest.raises(ModelError, match="external file 'ext.data'"):
        load_onnx(path.read_bytes())  # bytes have no folder to find the data in
    data = (tmp_path / "ext.data").read_bytes()
    (tmp_path / "ext.data").write_bytes(data[:len(data) // 2])
    with pytest.raises(FormatError, match="declares .* bytes at offset"):
        load_onnx(path)
    os.remove(tmp_path / "ext.data")
    with pytest.raises(LibraryIOError, match="external data file 'ext.data' .* missing"):
        load_onnx(path)


def test_external_data_outside_the_model_folder(tmp_path):
    model = relu_model(initializers={"w": np.ones(3, np.float32)})
    t = model.graph.initializer[0]
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="../../etc/passwd")
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    with pytest.raises(FormatError, match="outside the model's folder"):
        load_onnx(tmp_path / "m.onnx")


@pytest.mark.parametrize("opset", [3, 99])
def test_opset_out_of_range(opset):
    with pytest.raises(ModelError, match=f"opset {opset} is out of range"):
        load_onnx(relu_model(opset=opset).SerializeToString())


def test_dynamic_shapes_need_an_input_shape():
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                       [("x", ["N", "C", 4, 4])], [("y", None)])
    with pytest.raises(ModelError, match="dynamic dimensions .* input_shape="):
        load_onnx(model.SerializeToString())
    assert load_onnx(model.SerializeToString(), input_shape=(3, 4, 4)).input_shape == (3, 4, 4)


def test_cycles_and_unknown_tensors():
    cycle = make_model([helper.make_node("Add", ["x", "b"], ["a"], name="first"),
                        helper.make_node("Relu", ["a"], ["b"], name="second"),
                        helper.make_node("Relu", ["a"], ["y"], name="out")], [X], [("y", None)])
    with pytest.raises(ModelError, match="cycle through node"):
        load_onnx(cycle.SerializeToString())
    unknown = make_model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")], [X],
                         [("y", None)])
    with pytest.raises(ModelError, match="'add' reads 'nowhere', which no input"):
        load_onnx(unknown.SerializeToString())


def test_initializers_with_bad_types_or_sizes():
    model = relu_model(initializers={"w": np.ones(3, np.float32)})
    model.graph.initializer[0].data_type = 999
    with pytest.raises(ModelError, match="unknown data type 999"):
        load_onnx(model.SerializeToString())
    model = relu_model(initializers={"w": np.ones(3, np.float32)})
    model.graph.initializer[0].dims[:] = [1000]
    with pytest.raises(FormatError, match="declares 4000 bytes .* but holds 12"):
        load_onnx(model.SerializeToString())


def test_huge_declared_sizes_are_refused_before_allocation():
    # 2^40 floats declared, 4 bytes held; under a 1 GiB address-space cap nothing may allocate it
    big = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20],
                      raw_data=b"\0\0\0\0")
    model = relu_model()
    model.graph.initializer.append(big)
    shape = helper.make_node("Constant", [], ["s"], name="s", value=numpy_helper.from_array(
        np.array([1 << 20, 1 << 20], np.int64)))
    cos = make_model([shape, helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos"),
                      helper.make_node("Add", ["x", "c"], ["y"], name="add")], [X], [("y", None)])
    # ASan reserves terabytes of address space for its shadow memory: no cap
    # there (the checks under test run all the same)
    cap = "" if os.environ.get("APPROXMUL_SANITIZED") else \
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))"
    code = f"""
import resource, sys
{cap}
from approxmul_cffi.onnx import load_onnx
from approxmul_cffi.errors import ApproxmulError
for data in (bytes.fromhex({model.SerializeToString().hex()!r}),
             bytes.fromhex({cos.SerializeToString().hex()!r})):
    try:
        load_onnx(data)
    except ApproxmulError as e:
        print(type(e).__name__, str(e)[:60])
"""
    proc = run_python(code)  # outside the source tree: the package under test
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("FormatError") and "declares" in lines[0]
    assert lines[1].startswith("ModelError") and "ConstantOfShape" in lines[1]


def test_a_directory_and_a_device_are_not_models(tmp_path):
    with pytest.raises(LibraryIOError, match="directory"):
        load_onnx(tmp_path)
    if os.path.exists("/dev/zero"):
        with pytest.raises(FormatError):
            load_onnx("/dev/zero")
