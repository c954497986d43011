"""ONNX float import: the bundled LeNet round trip, every supported op against ONNX Runtime."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from approxmul_cffi import nn  # noqa: E402
from approxmul_cffi.datasets import load_digits  # noqa: E402
from approxmul_cffi.evaluation import bundled_model  # noqa: E402
from approxmul_cffi.onnx import load_onnx  # noqa: E402
from onnx_models import lenet_onnx, make_model  # noqa: E402

RNG = np.random.default_rng(0)


def run_ort(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def test_lenet_float_logits_and_integer_codes_equal_the_native_model(tmp_path):
    path = tmp_path / "lenet.onnx"
    onnx.save(lenet_onnx(), str(path))
    imported, native = load_onnx(path), bundled_model()
    x, _ = load_digits("test")
    calibration = load_digits("train")[0]
    assert [n.name for n in imported.nodes] == [n.name for n in native.nodes]
    np.testing.assert_allclose(imported.forward(x), native.forward(x), rtol=0, atol=1e-5)
    np.testing.assert_allclose(run_ort(lenet_onnx(), x), imported.forward(x), rtol=0, atol=1e-4)
    q_imported, q_native = nn.quantize(imported, calibration), nn.quantize(native, calibration)
    assert q_imported.layer_names == ["conv1", "conv2", "fc1", "fc2"]
    for spec in ("exact", "exact:signed=1", "drum:k=3"):
        a, b = q_imported.run_codes(x, spec), q_native.run_codes(x, spec)
        assert a.codes.dtype == b.codes.dtype and np.array_equal(a.codes, b.codes), spec


def node(op, inputs, **attrs):
    return helper.make_node(op, inputs, ["y"], name=op.lower(), **attrs)


W = RNG.normal(size=(6, 4, 3, 3)).astype(np.float32)
B6 = RNG.normal(size=6).astype(np.float32)
X4 = ("x", [2, 4, 9, 9])
X2 = ("x", [2, 12])
X3 = ("x", [2, 3, 5])

# name -> (nodes, input, initializers, opset); output "y"
CASES = {
    "conv_groups_dilation_stride": ([node("Conv", ["x", "w", "b"], group=2, dilations=[2, 1],
                                          strides=[2, 1], pads=[1, 2, 1, 2])],
                                    X4, {"w": W[:, :2], "b": B6}),
    "conv_depthwise": ([node("Conv", ["x", "w"], group=4)], X4,
                       {"w": RNG.normal(size=(4, 1, 3, 3)).astype(np.float32)}),
    "conv_asymmetric_pads": ([node("Conv", ["x", "w"], pads=[0, 1, 2, 0])], X4, {"w": W}),
    "conv_same_upper": ([node("Conv", ["x", "w"], auto_pad="SAME_UPPER", strides=[2, 2])],
                        X4, {"w": W}),
    "conv_same_lower": ([node("Conv", ["x", "w"], auto_pad="SAME_LOWER", kernel_shape=[3, 3])],
                        X4, {"w": W}),
    "conv_valid": ([node("Conv", ["x", "w"], auto_pad="VALID")], X4, {"w": W}),
    "gemm_alpha_beta": ([node("Gemm", ["x", "w", "c"], alpha=0.5, beta=2.0)], X2,
                        {"w": RNG.normal(size=(12, 5)).astype(np.float32),
                         "c": RNG.normal(size=(1, 5)).astype(np.float32)}),
    "gemm_transB": ([node("Gemm", ["x", "w", "c"], transB=1)], X2,
                    {"w": RNG.normal(size=(5, 12)).astype(np.float32),
                     "c": np.float32(0.5)}),
    "matmul_2d": ([node("MatMul", ["x", "w"])], X2,
                  {"w": RNG.normal(size=(12, 3)).astype(np.float32)}),
    "matmul_batched_weight": ([node("MatMul", ["x", "w"])], X3,
                              {"w": RNG.normal(size=(5, 4)).astype(np.float32)}),
    "matmul_two_activations_bmm": ([helper.make_node("Transpose", ["x"], ["t"], name="t",
                                                     perm=[0, 2, 1]),
                                    node("MatMul", ["x", "t"])], X3, {}),
    "matmul_broadcast_4d": ([helper.make_node("Relu", ["x"], ["r"], name="r"),
                             node("MatMul", ["x", "r"])], ("x", [2, 3, 4, 4]), {}),
    "relu": ([node("Relu", ["x"])], X4, {}),
    "clip": ([node("Clip", ["x", "lo", "hi"])], X4, {"lo": np.float32(-0.5), "hi": np.float32(1)}),
    "clip_relu6": ([node("Clip", ["x", "lo", "hi"])], X4, {"lo": np.float32(0), "hi": np.float32(6)}),
    "leaky_relu": ([node("LeakyRelu", ["x"], alpha=0.2)], X4, {}),
    "sigmoid": ([node("Sigmoid", ["x"])], X4, {}),
    "tanh": ([node("Tanh", ["x"])], X4, {}),
    "maxpool": ([node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                X4, {}),
    "maxpool_ceil_asym": ([node("MaxPool", ["x"], kernel_shape=[2, 2], strides=[2, 2],
                                pads=[0, 0, 1, 0], ceil_mode=1)], X4, {}),
    "avgpool_exclude_pad": ([node("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1])], X4, {}),
    "avgpool_include_pad": ([node("AveragePool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                  count_include_pad=1)], X4, {}),
    "avgpool_same": ([node("AveragePool", ["x"], kernel_shape=[2, 2], auto_pad="SAME_UPPER",
                           strides=[2, 2])], X4, {}),
    "global_average_pool": ([node("GlobalAveragePool", ["x"])], X4, {}),
    "add_const_broadcast": ([node("Add", ["x", "c"])], X4,
                            {"c": RNG.normal(size=(1, 4, 1, 1)).astype(np.float32)}),
    "sub_const": ([node("Sub", ["c", "x"])], X4, {"c": np.float32(1.5)}),
    "mul_const": ([node("Mul", ["x", "c"])], X4, {"c": RNG.normal(size=(9,)).astype(np.float32)}),
    "div_const": ([node("Div", ["x", "c"])], X4, {"c": np.float32(4)}),
    "add_self_and_mul": ([helper.make_node("Relu", ["x"], ["r"], name="r"),
                          helper.make_node("Mul", ["x", "r"], ["m"], name="m"),
                          helper.make_node("Add", ["m", "x"], ["s"], name="s"),
                          node("Sub", ["s", "m"])], X4, {}),
    "sum": ([helper.make_node("Relu", ["x"], ["r"], name="r"), node("Sum", ["x", "r", "x"])],
            X4, {}),
    "concat": ([helper.make_node("Relu", ["x"], ["r"], name="r"),
                node("Concat", ["x", "r"], axis=1)], X4, {}),
    "flatten": ([node("Flatten", ["x"])], X4, {}),
    "reshape": ([node("Reshape", ["x", "s"])], X4, {"s": np.array([0, -1, 9], np.int64)}),
    "transpose": ([node("Transpose", ["x"], perm=[0, 2, 3, 1])], X4, {}),
    "squeeze_unsqueeze": ([helper.make_node("Unsqueeze", ["x", "a"], ["u"], name="u"),
                           node("Squeeze", ["u", "a"])], X4, {"a": np.array([2], np.int64)}),
    "batchnorm": ([node("BatchNormalization", ["x", "g", "b", "m", "v"], epsilon=1e-3)], X4,
                  {k: RNG.uniform(0.5, 2, size=4).astype(np.float32) for k in "gbmv"}),
    "softmax": ([node("Softmax", ["x"], axis=1)], X2, {}),
    "softmax_3d_last": ([node("Softmax", ["x"])], X3, {}),
    "softmax_opset11": ([node("Softmax", ["x"], axis=1)], X3, {}, 11),
    "dropout_identity": ([helper.make_node("Dropout", ["x"], ["d"], name="d"),
                          helper.make_node("Identity", ["d"], ["i"], name="i"),
                          node("Relu", ["i"])], X4, {}),
    "pad_reflect": ([node("Pad", ["x", "p"], mode="reflect")], X4,
                    {"p": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)}),
    "pad_constant": ([node("Pad", ["x", "p", "v"])], X4,
                     {"p": np.array([0, 1, 1, 0, 0, 0, 0, 3], np.int64), "v": np.float32(0.5)}),
    # what exporters emit for flatten: Shape -> Gather -> Unsqueeze -> Concat -> Reshape
    "folded_shape_chain": ([helper.make_node("Shape", ["x"], ["sh"], name="sh"),
                            helper.make_node("Gather", ["sh", "zero"], ["n"], name="g", axis=0),
                            helper.make_node("Unsqueeze", ["n", "ax"], ["n1"], name="u"),
                            helper.make_node("Constant", [], ["m1"], name="k",
                                             value=onnx.numpy_helper.from_array(
                                                 np.array([-1], np.int64))),
                            helper.make_node("Concat", ["n1", "m1"], ["s"], name="c", axis=0),
                            node("Reshape", ["x", "s"])], X4,
                           {"zero": np.array(0, np.int64), "ax": np.array([0], np.int64)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_onnxruntime(case):
    nodes, (name, shape), init, *opset = CASES[case]
    model = make_model(nodes, [(name, shape)], [("y", None)], init, *opset)
    x = RNG.normal(size=shape).astype(np.float32)
    expected = run_ort(model, x)
    imported = load_onnx(model.SerializeToString())
    got = imported.forward(x)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # batch-size independent: one sample at a time gives the same rows
    np.testing.assert_allclose(imported.forward(x[:1]), expected[:1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["conv_groups_dilation_stride", "gemm_transB", "matmul_2d",
                                  "matmul_batched_weight", "matmul_two_activations_bmm", "sum", "concat", "pad_reflect"])
def test_imported_graph_runs_quantized_through_a_multiplier(case):
    nodes, (name, shape), init, *opset = CASES[case]
    model = load_onnx(make_model(nodes, [(name, shape)], [("y", None)], init,
                                 *opset).SerializeToString())
    x = RNG.normal(size=(16, *shape[1:])).astype(np.float32)
    q = nn.quantize(model, x)
    exact, approx = q.run(x, "exact"), q.run(x, "drum:k=3")
    span = np.ptp(model.forward(x))
    assert np.abs(exact - model.forward(x)).max() < 0.1 * span
    assert (not q.layer_names) or np.abs(approx - exact).max() > 0  # the multiplier is used


def test_unsupported_ops_are_all_named():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="r"),
             helper.make_node("Erf", ["r"], ["e"], name="erf_1"),
             helper.make_node("HardSwish", ["e"], ["h"], name="hs"),
             helper.make_node("Erf", ["h"], ["y"], name="erf_2")]
    model = make_model(nodes, [X4], [("y", None)])
    with pytest.raises(nn.ModelError, match=r"unsupported ONNX op\(s\): Erf \(nodes 'erf_1', "
                                            r"'erf_2'\); HardSwish \(nodes 'hs'\)"):
        load_onnx(model.SerializeToString())


@pytest.mark.parametrize("nodes, message", [
    ([node("Transpose", ["x"], perm=[1, 0, 2, 3])], "moves the batch"),
    ([node("Concat", ["x", "x"], axis=0)], "along the batch"),
    ([node("MatMul", ["c", "x"])], "constant left operand"),
])
def test_ops_that_mix_the_batch_or_lack_weights_are_refused(nodes, message):
    model = make_model(nodes, [X4], [("y", None)], {"c": np.ones((9, 2, 9), np.float32)})
    with pytest.raises(nn.ModelError, match=message):
        load_onnx(model.SerializeToString())
