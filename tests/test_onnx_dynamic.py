"""Dynamically quantized ONNX models (ONNX Runtime's quantize_dynamic).

Each activation batch is quantized on the grid of its own range; the
integer products go through the multiplier and the rest stays float. With
the exact multiplier every tensor of the chain (codes, scale and zero point
of DynamicQuantizeLinear, the int32 accumulators, the float32 scaled
output) equals ONNX Runtime's, bit for bit, and so do the logits.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import approxmul_cffi as am  # noqa: E402
from approxmul_cffi import nn  # noqa: E402
from approxmul_cffi.datasets import load_digits  # noqa: E402
from approxmul_cffi.errors import ModelError  # noqa: E402
from approxmul_cffi.evaluation import evaluate  # noqa: E402
from approxmul_cffi.onnx import load_onnx  # noqa: E402
from onnx_models import OPSET, lenet_onnx, quantize_dynamic  # noqa: E402

X, Y = load_digits("test")
X = X.astype(np.float32)
INTEGER_OPS = ("ConvInteger", "MatMulInteger")


@pytest.fixture(scope="module", params=[False, True], ids=["per-tensor", "per-channel"])
def dynamic(request, tmp_path_factory):
    """The digits LeNet after quantize_dynamic (batch norms folded first, as ONNX Runtime advises)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    folder = tmp_path_factory.mktemp("dynamic")
    onnx.save(lenet_onnx(), str(folder / "lenet.onnx"))
    quant_pre_process(str(folder / "lenet.onnx"), str(folder / "pre.onnx"))
    path = folder / "dynamic.onnx"
    quantize_dynamic(str(folder / "pre.onnx"), str(path), per_channel=request.param)
    return path


def every_tensor(path, x):
    """ONNX Runtime's value of every node output (no graph optimization, so none is fused away)."""
    model = onnx.load(str(path))
    types = {"DynamicQuantizeLinear": [TensorProto.UINT8, TensorProto.FLOAT, TensorProto.UINT8],
             "ConvInteger": [TensorProto.INT32], "MatMulInteger": [TensorProto.INT32]}
    known = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for out, kind in zip(node.output, types.get(node.op_type, [TensorProto.FLOAT])):
            if out not in known:
                model.graph.output.append(helper.make_tensor_value_info(out, kind, None))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return model, dict(zip(names, session.run(names, {"x": x})))


def test_every_tensor_equals_onnxruntime(dynamic):
    x = X[:100]
    model, theirs = every_tensor(dynamic, x)
    imported = load_onnx(str(dynamic))
    q = nn.quantize(imported, None)
    assert isinstance(q, nn.DynamicQuantizedModel)
    integer_nodes = [n for n in model.graph.node if n.op_type in INTEGER_OPS]
    assert q.layer_names == [n.name for n in integer_nodes] and len(integer_nodes) == 4
    ours = q.run_codes(x, "exact", return_all=True)
    producer = {out: n for n in model.graph.node for out in n.output}
    exact = am.Multiplier.exact(8)
    for node in integer_nodes:
        layer = q.layer(node.name)
        dql = producer[node.input[0]]
        our_input = ours[next(n.inputs[0] for n in q.nodes if n.name == node.name)]
        codes = layer.quantize(our_input)
        np.testing.assert_array_equal(codes.codes, theirs[dql.output[0]])
        assert np.float32(codes.qparams.scale) == theirs[dql.output[1]]
        assert int(codes.qparams.zero_point) == int(theirs[dql.output[2]])
        np.testing.assert_array_equal(layer.accumulate(codes, exact), theirs[node.output[0]])
        # the node's output is the float32 Mul after the Cast
        scaled = next(n for n in model.graph.node if n.op_type == "Mul" and
                      producer[n.input[0]].op_type == "Cast" and
                      producer[n.input[0]].input[0] == node.output[0])
        np.testing.assert_array_equal(ours[node.name], theirs[scaled.output[0]])
    np.testing.assert_array_equal(ours[q.output], theirs[model.graph.output[0].name])
    # the model's own float forward is the same computation
    np.testing.assert_array_equal(imported.forward(x), theirs[model.graph.output[0].name])


def test_onnxruntime_default_session_gives_the_same_predictions(dynamic):
    # with its default optimizations ONNX Runtime fuses the chain (MatMulIntegerToFloat, ...),
    # which may round the float32 scaling and bias differently: predictions and 1e-5 agree
    session = ort.InferenceSession(str(dynamic), providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"x": X})[0]
    ours = nn.quantize(load_onnx(str(dynamic)), None).run(X, "exact", batch_size=len(X))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    assert (ours.argmax(1) == theirs.argmax(1)).all()


def test_evaluate_under_approximate_multipliers(dynamic):
    result = evaluate(str(dynamic), (X, Y), ["drum:k=4", "drum:k=3,signed=1"], batch_size=len(X),
                      progress=False)
    rows = {r.multiplier: r for r in result}
    session = ort.InferenceSession(str(dynamic), providers=["CPUExecutionProvider"])
    ort_top1 = float((session.run(None, {"x": X})[0].argmax(1) == Y).mean() * 100)
    assert rows["exact"].top1 == pytest.approx(ort_top1)  # one batch: ONNX Runtime's grids
    assert rows["exact:signed=1"].top1 == pytest.approx(ort_top1)
    assert rows["float"].top1 == pytest.approx(ort_top1)  # the model's own arithmetic
    # DRUM on uint8 codes of centred weights loses much (docs/evaluate.md), on int8 little
    assert rows["drum:k=4"].top1 < rows["exact"].top1 - 5
    assert rows["exact"].top1 - 3 < rows["drum:k=3,signed=1"].top1 < rows["exact"].top1
    q = nn.quantize(load_onnx(str(dynamic)), None)
    exact = q.run_codes(X[:50], "exact", return_all=True)
    approx = q.run_codes(X[:50], "drum:k=4", return_all=True)
    assert all(not np.array_equal(exact[n], approx[n]) for n in q.layer_names)
    with pytest.raises(ModelError, match="bias correction needs static activation grids"):
        evaluate(str(dynamic), (X[:20], Y[:20]), ["drum:k=4"], bias_correction=True,
                 progress=False)
    # one layer assigned by its ONNX node name changes that layer only
    first, second = q.layer_names[:2]
    mixed = q.run_codes(X[:50], q.assign("exact", {second: "drum:k=4"}), return_all=True)
    np.testing.assert_array_equal(mixed[first], exact[first])
    assert not np.array_equal(mixed[second], exact[second])


def test_grids_follow_each_batch(dynamic):
    q = nn.quantize(load_onnx(str(dynamic)), None)
    layer = q.layer(q.layer_names[0])
    small, large = layer.quantize(X[:1] * 0.5), layer.quantize(X[:1])
    assert float(small.qparams.scale) < float(large.qparams.scale)
    # as in ONNX Runtime, a sample's result depends on the batch it is in
    alone = q.run(X[:1], "exact", batch_size=1)
    session = ort.InferenceSession(str(dynamic), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(alone, session.run(None, {"x": X[:1]})[0], rtol=1e-5, atol=1e-5)


def test_cli_evaluate_and_layers(dynamic, tmp_path):
    np.savez(tmp_path / "data.npz", x=X[:90], y=Y[:90])
    env = dict(os.environ)
    name = nn.quantize(load_onnx(str(dynamic)), None).layer_names[0]
    out = subprocess.run([sys.executable, "-m", "approxmul_cffi", "evaluate", "--model",
                          str(dynamic), "--data", str(tmp_path / "data.npz"), "-m", "drum:k=4",
                          "--layer", f"{name}=exact"], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "drum:k=4" in out.stdout and f"{name}=exact" in out.stdout
    out = subprocess.run([sys.executable, "-m", "approxmul_cffi", "layers", str(dynamic)],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith(name))
    assert "DynamicQuantized(Conv2d)" in row and row.split()[-1] == f"{16 * 8 * 8 * 9:,}"


def chain(tail):
    """x -> DynamicQuantizeLinear -> MatMulInteger -> ``tail`` nodes; tail ends in "y"."""
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"], name="dq"),
             helper.make_node("MatMulInteger", ["q", "w", "z", "wz"], ["acc"], name="mm")] + tail
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
                              [numpy_helper.from_array(np.arange(8, dtype=np.int8).reshape(4, 2),
                                                       "w"),
                               numpy_helper.from_array(np.array([0, 0], np.int8), "wz"),
                               numpy_helper.from_array(np.array(0.5, np.float32), "ws")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model.SerializeToString()


SCALE = [helper.make_node("Mul", ["s", "ws"], ["sw"], name="scales"),
         helper.make_node("Cast", ["acc"], ["accf"], name="cast", to=TensorProto.FLOAT)]


def test_a_minimal_chain_and_its_errors():
    good = chain(SCALE + [helper.make_node("Mul", ["accf", "sw"], ["y"], name="out")])
    q = nn.quantize(load_onnx(good), None)
    x = np.array([[1.0, -2.0, 0.5, 3.0]], np.float32)
    session = ort.InferenceSession(good, providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(q.run_codes(x, "exact"), session.run(None, {"x": x})[0])
    with pytest.raises(ModelError, match="NaN or infinity"):
        q.run_codes(np.array([[np.nan, 0, 0, 0]], np.float32), "exact")
    unscaled = chain([helper.make_node("Cast", ["acc"], ["y"], name="cast", to=TensorProto.FLOAT)])
    with pytest.raises(ModelError, match="integer node.*'mm'.*not Cast to float and multiplied"):
        load_onnx(unscaled)
    misused = chain(SCALE + [helper.make_node("Relu", ["accf"], ["y"], name="relu")])
    with pytest.raises(ModelError, match="Relu node 'relu': reads 'accf'.*only Mul may"):
        load_onnx(misused)
    codes_read = chain(SCALE + [helper.make_node("Mul", ["accf", "sw"], ["t"], name="out"),
                                helper.make_node("Add", ["t", "q"], ["y"], name="add")])
    with pytest.raises(ModelError, match="Add node 'add': reads 'q'"):
        load_onnx(codes_read)
