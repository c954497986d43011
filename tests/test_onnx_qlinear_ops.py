"""ONNX Runtime's QLinearAdd and QLinearSoftmax arithmetic, bit for bit, alone and in models."""

from fractions import Fraction

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from approxmul_cffi import nn  # noqa: E402
from approxmul_cffi.onnx import load_onnx  # noqa: E402
from approxmul_cffi.quant import QParams, convert_codes  # noqa: E402
from approxmul_cffi.requant_float import (  # noqa: E402
    fma32, qlinear_add, qlinear_mul, qlinear_softmax)
from onnx_models import calibration_reader, make_model, quantize_static  # noqa: E402

F32 = np.float32


def _session(op, inputs, grids, dtype, shape, **attributes):
    """ONNX Runtime running one com.microsoft QLinear op; ``grids`` are (scale, zero point)
    pairs, each following the code tensor it describes in ``inputs``, or at the end."""
    code = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
    names, args = [], []
    for i, (scale, zp) in enumerate(grids):
        tensor = inputs[i] if i < len(inputs) else None
        names += [f"s{i}", f"z{i}"]
        args += ([tensor] if tensor else []) + [f"s{i}", f"z{i}"]
    values = [v for scale, zp in grids for v in (F32(scale), dtype(zp))]
    node = helper.make_node(op, args, ["y"], domain="com.microsoft", **attributes)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, code, shape) for n in inputs],
        [helper.make_tensor_value_info("y", code, shape)],
        [numpy_helper.from_array(np.array(v), n) for n, v in zip(names, values)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("op,arithmetic,low", [("QLinearAdd", qlinear_add, 1e-4),
                                                ("QLinearMul", qlinear_mul, 1e-3)],
                         ids=["add", "mul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["uint8", "int8"])
def test_binary_ops_equal_onnxruntime_on_every_pair_of_codes(dtype, op, arithmetic, low):
    info = np.iinfo(dtype)
    a, b = (v.ravel().astype(dtype) for v in np.meshgrid(np.arange(info.min, info.max + 1),
                                                         np.arange(info.min, info.max + 1)))
    rng = np.random.default_rng(11)
    # grids on which a fused multiply-add would round one pair differently from ONNX
    # Runtime's QLinearMul (and the plain float32 expression from its QLinearAdd)
    known = {np.uint8: [(0.034739889204502106, 92), (0.029634447768330574, 6),
                        (0.10783420503139496, 138)],
             np.int8: [(0.185519278049469, -99), (0.6478856801986694, 4),
                       (0.1378239095211029, -127)]}[dtype]
    for trial in range(17):  # scales over three or four decades
        scales = np.exp(rng.uniform(np.log(low), 0.0, 3)).astype(F32)
        zps = rng.integers(info.min, info.max + 1, 3)
        grids = known if trial == 16 else list(zip(scales.tolist(), zps.tolist()))
        want = _session(op, "ab", grids, dtype, [None]).run(None, {"a": a, "b": b})[0]
        qps = [QParams(s, z, signed=dtype == np.int8) for s, z in grids]
        got = arithmetic(a, qps[0], b, qps[1], qps[2])
        assert got.dtype == want.dtype
        assert np.array_equal(got, want), (grids, int((got != want).sum()))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["uint8", "int8"])
def test_lookup_table_ops_are_the_float_op_between_grids(dtype):
    # QLinearSigmoid / QLinearLeakyRelu: dequantize -> f -> QuantizeLinear for every code
    from approxmul_cffi.onnx._float_ops import sigmoid
    from approxmul_cffi.requant_float import quantize_float
    info = np.iinfo(dtype)
    x = np.arange(info.min, info.max + 1).astype(dtype)
    rng = np.random.default_rng(14)
    for trial in range(20):
        grids = [(float(np.exp(rng.uniform(np.log(1e-3), hi))), int(rng.integers(info.min,
                                                                            info.max + 1)))
                 for hi in (0.0, -2.0)]
        qps = [QParams(s, z, signed=dtype == np.int8) for s, z in grids]
        real = qps[0].dequantize(x).astype(F32)
        for op, f, attributes in (("QLinearSigmoid", sigmoid, {}),
                                  ("QLinearLeakyRelu", lambda v: np.where(v >= 0, v, 0.1 * v),
                                   {"alpha": 0.1})):
            want = _session(op, "x", grids, dtype, [None], **attributes).run(None, {"x": x})[0]
            with np.errstate(over="ignore"):
                got = quantize_float(np.asarray(f(real)), qps[1])
            assert np.array_equal(got, want), (op, grids, int((got != want).sum()))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["uint8", "int8"])
def test_qlinear_softmax_equals_onnxruntime(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(12)
    for trial in range(17):
        # and one long row: the table's shift depends on the row length
        features = 1000 if trial == 16 else int(rng.integers(2, 40))
        x = rng.integers(info.min, info.max + 1, (64, features)).astype(dtype)
        x_grid = (float(np.exp(rng.uniform(-5, 0))), int(rng.integers(info.min, info.max + 1)))
        # ONNX Runtime's output grid for probabilities (1/256, saturating at 1.0), or any other
        y_grid = (1 / 256, info.min) if trial % 2 else (float(rng.uniform(0.002, 0.01)), info.min)
        session = _session("QLinearSoftmax", "x", [x_grid, y_grid], dtype, [None, features],
                           axis=-1, opset=13)
        want = session.run(None, {"x": x})[0]
        qps = [QParams(s, z, signed=dtype == np.int8) for s, z in (x_grid, y_grid)]
        got = qlinear_softmax(x, *qps)
        assert got.dtype == want.dtype
        assert np.array_equal(got, want), (trial, int((got != want).sum()))
        # the other code domain gives the same codes, shifted
        other = [q.to_domain(dtype == np.uint8) for q in qps]
        shifted = qlinear_softmax(convert_codes(x, other[0].signed), *other)
        assert np.array_equal(shifted.view(np.uint8) ^ 0x80, got.view(np.uint8))


def _rounded_to_float32(exact):
    """The float32 nearest to a Fraction, ties to even (the oracle for fma32)."""
    guess = F32(float(exact))
    candidates = [guess, np.nextafter(guess, F32(np.inf)), np.nextafter(guess, F32(-np.inf))]
    distance = [abs(Fraction(float(c)) - exact) for c in candidates]
    best = min(distance)
    ties = [c for c, d in zip(candidates, distance) if d == best]
    return min(ties, key=lambda c: int(np.array(c).view(np.int32)) & 1)


def test_fma32_rounds_the_exact_value_once():
    rng = np.random.default_rng(3)
    # operands spread over many binades, so p + z often needs more than float64 holds
    x = (rng.standard_normal(3000) * np.exp2(rng.integers(-30, 30, 3000))).astype(F32)
    y = (rng.standard_normal(3000) * np.exp2(rng.integers(-30, 30, 3000))).astype(F32)
    z = (rng.standard_normal(3000) * np.exp2(rng.integers(-60, 60, 3000))).astype(F32)
    # ties of float32 built on purpose: 1 + 2^-24 is halfway between two float32 values
    x[:3], y[:3], z[:3] = F32(1 + 2.0 ** -12), F32(1 + 2.0 ** -12), F32(-(2.0 ** -40))
    got = fma32(x, y, z)
    for i in range(len(x)):
        exact = Fraction(float(x[i])) * Fraction(float(y[i])) + Fraction(float(z[i]))
        assert got[i] == _rounded_to_float32(exact), (x[i], y[i], z[i])
    # the plain float32 expression double-rounds some of them: fma32 is not it
    plain = x * y + z
    assert not np.array_equal(plain, got)


@pytest.fixture(scope="module")
def residual(tmp_path_factory):
    """conv -> relu -> h; conv(h) + h (the residual add) -> conv: float ONNX and its input."""
    folder = tmp_path_factory.mktemp("residual")
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1] * 4),
             helper.make_node("Relu", ["c1"], ["h"], name="relu1"),
             helper.make_node("Conv", ["h", "w2", "b2"], ["c2"], name="conv2", pads=[1] * 4),
             helper.make_node("Add", ["c2", "h"], ["s"], name="add"),
             helper.make_node("Conv", ["s", "w3"], ["y"], name="conv3")]
    init = {"w1": rng.normal(size=(6, 3, 3, 3)).astype(F32) * 0.5,
            "b1": rng.normal(size=6).astype(F32) * 0.1,
            "w2": rng.normal(size=(6, 6, 3, 3)).astype(F32) * 0.3,
            "b2": rng.normal(size=6).astype(F32) * 0.1,
            "w3": rng.normal(size=(4, 6, 1, 1)).astype(F32)}
    onnx.save(make_model(nodes, [("x", ["N", 3, 8, 8])], [("y", ["N", 4, 8, 8])], init),
              str(folder / "residual.onnx"))
    return folder, rng.normal(size=(64, 3, 8, 8)).astype(F32)


@pytest.mark.parametrize("fmt,act", [("QOperator", "QUInt8"), ("QOperator", "QInt8"),
                                     ("QDQ", "QUInt8"), ("QDQ", "QInt8")])
def test_quantized_residual_add_equals_onnxruntime(residual, fmt, act):
    folder, x = residual
    path = folder / f"q_{fmt}_{act}.onnx"
    quantize_static(str(folder / "residual.onnx"), str(path),
                                 calibration_reader(x),
                                 quant_format=getattr(quantization.QuantFormat, fmt),
                                 activation_type=getattr(quantization.QuantType, act),
                                 weight_type=quantization.QuantType.QInt8)
    model = onnx.load(str(path))
    ops = {n.op_type for n in model.graph.node}
    assert ("QLinearAdd" in ops) == (fmt == "QOperator") and ("Add" in ops) == (fmt == "QDQ")
    imported = load_onnx(path)
    q = nn.quantize(imported, None)
    assert any(isinstance(n.layer, nn.Add) for n in imported.nodes)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    for spec in ("exact", "exact:signed=1"):  # either code domain: the same integers
        np.testing.assert_array_equal(q.run(x, spec).astype(F32), want)
    # the add's own arithmetic decides: TFLite's integer add gives other codes here
    from approxmul_cffi import quant
    tflite = nn.quantize(imported, None, quant.QuantConfig(requantization="gemmlowp"))
    assert not np.array_equal(tflite.run(x, "exact").astype(F32), want)


@pytest.mark.parametrize("shape", [(), (6, 1, 1), (8,)], ids=["scalar", "per-channel", "row"])
@pytest.mark.parametrize("first", [False, True], ids=["constant-second", "constant-first"])
def test_qlinear_adds_of_constants_and_broadcasts_equal_onnxruntime(residual, tmp_path, shape,
                                                                     first):
    # QLinearAdd of an activation and a uint8 constant that broadcasts: the Add float node with
    # the constant's codes and grid, in ONNX Runtime's arithmetic
    folder, x = residual
    path = folder / "q_QOperator_QUInt8.onnx"
    if not path.exists():
        quantize_static(str(folder / "residual.onnx"), str(path),
                                     calibration_reader(x),
                                     quant_format=quantization.QuantFormat.QOperator)
    model = onnx.load(str(path))
    add = next(n for n in model.graph.node if n.op_type == "QLinearAdd")
    codes = np.random.default_rng(7).integers(0, 256, shape).astype(np.uint8)
    model.graph.initializer.extend([numpy_helper.from_array(codes, "k"),
                                    numpy_helper.from_array(F32(0.05), "k_scale"),
                                    numpy_helper.from_array(np.uint8(100), "k_zp")])
    kept = list(add.input[3:6]) if first else list(add.input[0:3])
    operands = ["k", "k_scale", "k_zp"] + kept if first else kept + ["k", "k_scale", "k_zp"]
    del add.input[:6]
    add.input[:0] = operands
    onnx.save(model, str(tmp_path / "constant.onnx"))
    imported = load_onnx(tmp_path / "constant.onnx")
    assert not any(isinstance(n.layer, nn.Add) for n in imported.nodes)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    np.testing.assert_array_equal(nn.quantize(imported, None).run(x, "exact").astype(F32), want)


@pytest.mark.parametrize("fmt,act", [("QOperator", "QUInt8"), ("QOperator", "QInt8"),
                                     ("QDQ", "QUInt8"), ("QDQ", "QInt8")])
def test_quantized_classifier_softmax_equals_onnxruntime(tmp_path, fmt, act):
    # Gemm -> Softmax: QLinearSoftmax, or DQ -> Softmax -> Q that ONNX Runtime fuses into it
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Gemm", ["x", "w"], ["h"], name="fc", transB=1),
             helper.make_node("Softmax", ["h"], ["y"], name="softmax", axis=-1)]
    onnx.save(make_model(nodes, [("x", ["N", 16])], [("y", ["N", 10])],
                         {"w": rng.normal(size=(10, 16)).astype(F32)}), str(tmp_path / "fc.onnx"))
    x = rng.normal(size=(64, 16)).astype(F32)
    quantize_static(str(tmp_path / "fc.onnx"), str(tmp_path / "q.onnx"),
                                 calibration_reader(x),
                                 quant_format=getattr(quantization.QuantFormat, fmt),
                                 activation_type=getattr(quantization.QuantType, act))
    model = onnx.load(str(tmp_path / "q.onnx"))
    assert ("QLinearSoftmax" in {n.op_type for n in model.graph.node}) == (fmt == "QOperator")
    q = nn.quantize(load_onnx(tmp_path / "q.onnx"), None)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    np.testing.assert_array_equal(q.run(x, "exact").astype(F32), want)
    # the gemmlowp mode (fixed-point requantization, a float softmax node) gives other codes
    from approxmul_cffi import quant
    float_node = nn.quantize(load_onnx(tmp_path / "q.onnx"), None,
                             quant.QuantConfig(requantization="gemmlowp"))
    assert not np.array_equal(float_node.run(x, "exact").astype(F32), want)


ELEMENTWISE = {  # between two convolutions: (nodes, extra initializers)
    "swish": ([helper.make_node("Sigmoid", ["c"], ["s"], name="sigmoid"),
               helper.make_node("Mul", ["c", "s"], ["m"], name="mul")], {}),
    "scaled": ([helper.make_node("Mul", ["c", "k"], ["m"], name="mul")], {"k": F32(0.7)}),
    "leaky": ([helper.make_node("LeakyRelu", ["c"], ["m"], name="leaky", alpha=0.1)], {}),
    "bias": ([helper.make_node("Add", ["c", "kc"], ["m"], name="bias")],
             {"kc": np.linspace(-1, 1, 4, dtype=F32).reshape(4, 1, 1)}),
}


@pytest.mark.parametrize("case", ELEMENTWISE)
@pytest.mark.parametrize("fmt,act", [("QOperator", "QUInt8"), ("QOperator", "QInt8"),
                                     ("QDQ", "QUInt8"), ("QDQ", "QInt8")])
def test_quantized_elementwise_ops_equal_onnxruntime(tmp_path, case, fmt, act):
    # QLinearSigmoid/QLinearLeakyRelu (lookup tables of dequantize -> f -> QuantizeLinear: the
    # float node between grids), QLinearMul and QLinearAdd of a broadcast constant (their own
    # float32 arithmetic, qlinear_mul and qlinear_add)
    rng = np.random.default_rng(6)
    middle, extra = ELEMENTWISE[case]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv1", pads=[1] * 4), *middle,
             helper.make_node("Conv", ["m", "w2"], ["y"], name="conv2")]
    init = {"w1": rng.normal(size=(4, 3, 3, 3)).astype(F32),
            "w2": rng.normal(size=(2, 4, 1, 1)).astype(F32), **extra}
    onnx.save(make_model(nodes, [("x", ["N", 3, 8, 8])], [("y", ["N", 2, 8, 8])], init),
              str(tmp_path / "m.onnx"))
    x = rng.normal(size=(32, 3, 8, 8)).astype(F32)
    quantize_static(str(tmp_path / "m.onnx"), str(tmp_path / "q.onnx"),
                                 calibration_reader(x),
                                 quant_format=getattr(quantization.QuantFormat, fmt),
                                 activation_type=getattr(quantization.QuantType, act))
    model = onnx.load(str(tmp_path / "q.onnx"))
    assert any(n.op_type.startswith("QLinear") for n in model.graph.node if n.op_type not in
               ("QLinearConv",)) == (fmt == "QOperator")
    imported = load_onnx(tmp_path / "q.onnx")
    if case in ("scaled", "bias"):  # the constant's codes and grid reach the quantized node
        (mul,) = [n.layer for n in imported.nodes if type(n.layer).__name__ == "BinaryOp"]
        assert mul.constant is not None
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    np.testing.assert_array_equal(nn.quantize(imported, None).run(x, "exact").astype(F32), want)


@pytest.mark.parametrize("opset", [13, 11], ids=["one-axis", "flattened"])
@pytest.mark.parametrize("fmt", ["QOperator", "QDQ"])
def test_quantized_softmax_over_channels_equals_onnxruntime(tmp_path, opset, fmt):
    # per-pixel class scores (a segmentation head): softmax over axis 1 of (N, C, H, W), which
    # ONNX Runtime transposes last (opset 13), or over C*H*W flattened (opset < 13)
    rng = np.random.default_rng(8)
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], name="conv", pads=[1] * 4),
             helper.make_node("Softmax", ["h"], ["y"], name="softmax", axis=1)]
    onnx.save(make_model(nodes, [("x", ["N", 3, 6, 6])], [("y", ["N", 5, 6, 6])],
                         {"w": rng.normal(size=(5, 3, 3, 3)).astype(F32)}, opset=opset),
              str(tmp_path / "seg.onnx"))
    x = rng.normal(size=(16, 3, 6, 6)).astype(F32)
    quantize_static(str(tmp_path / "seg.onnx"), str(tmp_path / "q.onnx"),
                                 calibration_reader(x),
                                 quant_format=getattr(quantization.QuantFormat, fmt))
    model = onnx.load(str(tmp_path / "q.onnx"))
    assert ("QLinearSoftmax" in {n.op_type for n in model.graph.node}) == (fmt == "QOperator")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    got = nn.quantize(load_onnx(tmp_path / "q.onnx"), None).run(x, "exact").astype(F32)
    np.testing.assert_array_equal(got, want)
