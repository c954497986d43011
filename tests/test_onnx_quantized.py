"""Quantized ONNX models (ONNX Runtime's quantize_static): integer tensors bit for bit."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
from onnx import helper  # noqa: E402

from approxmul_cffi import nn, quant  # noqa: E402
from approxmul_cffi.datasets import load_digits  # noqa: E402
from approxmul_cffi.evaluation import evaluate  # noqa: E402
from approxmul_cffi.onnx import load_onnx  # noqa: E402
from approxmul_cffi.requant_float import requantize_float  # noqa: E402
from onnx_models import calibration_reader, lenet_onnx, quantize_static  # noqa: E402

X, Y = load_digits("test")
CALIBRATION = load_digits("train")[0][:200]
# (format, per_channel, activation type, weight type)
SCHEMES = [("QDQ", False, "QInt8", "QInt8"), ("QDQ", True, "QInt8", "QInt8"),
           ("QDQ", False, "QUInt8", "QInt8"), ("QDQ", True, "QUInt8", "QInt8"),
           ("QOperator", False, "QUInt8", "QInt8"), ("QOperator", True, "QUInt8", "QInt8"),
           ("QOperator", False, "QInt8", "QInt8"), ("QOperator", False, "QUInt8", "QUInt8")]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quantized")
    onnx.save(lenet_onnx(), str(folder / "lenet.onnx"))
    # ONNX Runtime's recommended pre-processing: folds the batch norms into the convolutions
    quantization.shape_inference.quant_pre_process(str(folder / "lenet.onnx"),
                                                   str(folder / "pre.onnx"))
    return folder


def quantized(folder, scheme, **options):
    """The LeNet quantized by ONNX Runtime (int8 weights in 7 bits where its kernels
    saturate, unless ``reduce_range=False`` is given: onnx_models.quantize_static)."""
    fmt, per_channel, act, weight = scheme
    tag = "".join(f"_{k}{v}" for k, v in sorted(options.items()))
    path = folder / f"lenet_{fmt}_{int(per_channel)}_{act}_{weight}{tag}.onnx"
    if not path.exists():
        quantize_static(
            str(folder / "pre.onnx"), str(path), calibration_reader(CALIBRATION, 50),
            quant_format=getattr(quantization.QuantFormat, fmt), per_channel=per_channel,
            activation_type=getattr(quantization.QuantType, act),
            weight_type=getattr(quantization.QuantType, weight), **options)
    return path


def ort_outputs(model, names, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(names, {"x": x})))


def expose(model, tensors):
    """The model with integer tensors added as graph outputs (the types of their zero points)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    known = {o.name for o in model.graph.output}
    zp_index = {"QuantizeLinear": 2, "QLinearConv": 7, "QLinearMatMul": 7, "QGemm": 8,
                "QLinearAdd": 7, "QLinearAveragePool": 4, "QLinearGlobalAveragePool": 4,
                "QLinearConcat": 1}
    zero_points = {node.output[0]: node.input[zp_index[node.op_type]]
                   for node in model.graph.node if node.op_type in zp_index}
    types = {i.name: i.data_type for i in model.graph.initializer}
    for name in tensors:
        if name not in known:
            model.graph.output.append(helper.make_tensor_value_info(
                name, types[zero_points[name]], None))
    return model


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: "-".join(map(str, s)))
def test_integer_tensors_equal_onnxruntime(prepared, scheme):
    path = quantized(prepared, scheme)
    imported = load_onnx(path)
    assert imported.metadata["quantized"] and imported.quantization.config.requantization == \
        "onnxruntime"
    q = nn.quantize(imported, None)  # no calibration: the model's own grids
    assert q.layer_names == [n.name for n in imported.nodes if n.layer.takes_multiplier]
    model = onnx.load(str(path))
    tensors = imported.quantization.tensors
    if scheme[0] == "QDQ":
        # Exposing an intermediate tensor stops ONNX Runtime fusing DQ -> Conv -> Q into its
        # integer kernel (it then convolves in float), so QDQ graphs are compared at the last
        # integer tensor, computed by the fused integer kernels like in deployment.
        last = model.graph.node[-1]
        assert last.op_type == "DequantizeLinear"
        tensors = {last.input[0]: tensors[last.input[0]]}
    expected = ort_outputs(expose(model, tensors), list(tensors), X)
    for spec in ("exact", "exact:signed=1"):
        ours = q.run_codes(X, spec, return_all=True)
        for name, node in tensors.items():
            want = expected[name]
            got = ours[node].to_domain(want.dtype == np.int8).codes
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert np.array_equal(got, want), (spec, name, int((got != want).sum()))
    # the float output too: ONNX Runtime's DequantizeLinear of those codes
    final = ort_outputs(model, [model.graph.output[0].name], X)[model.graph.output[0].name]
    np.testing.assert_array_equal(q.run(X, "exact").astype(np.float32), final)


def test_evaluate_a_quantized_onnx_model_under_approximate_multipliers(prepared):
    # full-range weights: DRUM on the uint8 codes of 7-bit weights loses most of the accuracy
    path = quantized(prepared, SCHEMES[4], reduce_range=False)
    result = evaluate(str(path), (X, Y), ["drum:k=4", "drum:k=3,signed=1"], progress=False)
    rows = {r.multiplier: r for r in result}
    model = onnx.load(str(path))
    logits = ort_outputs(model, [model.graph.output[0].name], X)[model.graph.output[0].name]
    ort_top1 = float((logits.argmax(axis=1) == Y).mean() * 100)
    assert rows["exact"].top1 == pytest.approx(ort_top1)  # the exact row is ONNX Runtime's
    assert rows["exact:signed=1"].top1 == pytest.approx(ort_top1)
    assert rows["float"].top1 > 95 and rows["drum:k=4"].top1 > 80
    assert rows["drum:k=4"].top1 != rows["exact"].top1 or rows["drum:k=3,signed=1"].top1 != \
        rows["exact"].top1


def test_gemmlowp_requantization_is_selectable_and_differs_only_by_rounding(prepared):
    path = quantized(prepared, SCHEMES[4])
    imported = load_onnx(path)
    ours = nn.quantize(imported, None).run_codes(X, "exact").codes.astype(int)
    gemmlowp = nn.quantize(imported, None, quant.QuantConfig(requantization="gemmlowp"))
    other = gemmlowp.run_codes(X, "exact").codes.astype(int)
    assert 0 < np.abs(ours - other).max() <= 2  # same grids, other rounding


def test_float_requantization_rounds_half_to_even():
    # 2.5 -> 2 and 3.5 -> 4 (ties to even), where gemmlowp's fixed point rounds 2.5 up
    got = requantize_float(np.array([5, 7, -5]), 0, np.float32(0.5), 0, -128, 127)
    assert got.tolist() == [2, 4, -2]
    m, s = quant.quantize_multiplier(0.5)
    assert quant.requantize(np.array([[5, 7, -5]]), 0, m, s, 0, -128, 127).tolist() == \
        [[3, 4, -2]]
    with pytest.raises(ValueError, match="requantization"):
        quant.QuantConfig(requantization="tflite")


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_quantized_matmuls_equal_onnxruntime(tmp_path, fmt):
    # MatMul with a constant weight (QLinearMatMul / DQ-MatMul-Q) on (batch, rows, features)
    from onnx_models import make_model

    rng = np.random.default_rng(1)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    init = {"w1": rng.normal(size=(8, 16)).astype(np.float32),
            "w2": rng.normal(size=(16, 4)).astype(np.float32)}
    onnx.save(make_model(nodes, [("x", ["N", 3, 8])], [("y", ["N", 3, 4])], init),
              str(tmp_path / "mlp.onnx"))
    x = rng.normal(size=(64, 3, 8)).astype(np.float32)

    quantize_static(str(tmp_path / "mlp.onnx"), str(tmp_path / "q.onnx"),
                                 calibration_reader(x, len(x)),
                                 quant_format=getattr(quantization.QuantFormat, fmt))
    model = onnx.load(str(tmp_path / "q.onnx"))
    imported = load_onnx(tmp_path / "q.onnx")
    q = nn.quantize(imported, None)
    assert q.layer_names == ["mm1", "mm2"] or q.layer_names[-1].startswith("mm2")
    final = ort_outputs(model, [model.graph.output[0].name], x)[model.graph.output[0].name]
    np.testing.assert_array_equal(q.run(x, "exact").astype(np.float32), final)


def _pool_model(tmp_path, pool):
    """conv -> pool -> flatten -> fc, float ONNX, and a batch to calibrate and run it on."""
    from onnx_models import make_model

    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]), pool,
             helper.make_node("Flatten", ["g"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fw"], ["y"], name="fc", transB=1)]
    features = 8 if pool.op_type == "GlobalAveragePool" else 8 * 4 * 4
    init = {"w": rng.normal(size=(8, 3, 3, 3)).astype(np.float32),
            "fw": rng.normal(size=(5, features)).astype(np.float32)}
    onnx.save(make_model(nodes, [("x", ["N", 3, 8, 8])], [("y", ["N", 5])], init),
              str(tmp_path / "pool.onnx"))
    x = rng.normal(size=(16, 3, 8, 8)).astype(np.float32)

    return x


POOLS = {"global": lambda: helper.make_node("GlobalAveragePool", ["c"], ["g"], name="gap"),
         "2x2": lambda: helper.make_node("AveragePool", ["c"], ["g"], name="pool",
                                         kernel_shape=[2, 2], strides=[2, 2]),
         # padded: the border windows divide by their taps inside the input
         "3x3_padded": lambda: helper.make_node("AveragePool", ["c"], ["g"], name="pool",
                                                kernel_shape=[3, 3], strides=[2, 2],
                                                pads=[1, 1, 1, 1]),
         "3x3_padded_counted": lambda: helper.make_node(
             "AveragePool", ["c"], ["g"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1], count_include_pad=1)}


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("fmt", ["QOperator", "QDQ"])
@pytest.mark.parametrize("act", ["QUInt8", "QInt8"])
def test_quantized_average_pools_equal_onnxruntime(tmp_path, pool, fmt, act):
    # QLinear(Global)AveragePool, or DQ -> pool -> Q that ONNX Runtime fuses into them: the
    # mean requantized to its own grid in ONNX Runtime's arithmetic (and for QDQ int8 graphs,
    # in the uint8 domain ONNX Runtime converts them to)
    x = _pool_model(tmp_path, POOLS[pool]())
    quantize_static(str(tmp_path / "pool.onnx"), str(tmp_path / "q.onnx"),
                                 calibration_reader(x, len(x)),
                                 quant_format=getattr(quantization.QuantFormat, fmt),
                                 activation_type=getattr(quantization.QuantType, act))
    model = onnx.load(str(tmp_path / "q.onnx"))
    assert any(n.op_type.startswith("QLinear") and "Pool" in n.op_type
               for n in model.graph.node) == (fmt == "QOperator")
    imported = load_onnx(tmp_path / "q.onnx")
    pools = [n.layer for n in imported.nodes if isinstance(n.layer, (nn.GlobalAvgPool,
                                                                      nn.AvgPool2d))]
    assert len(pools) == 1 and pools[0].requantize
    assert getattr(pools[0], "count_include_pad", True) == (pool != "3x3_padded")
    q = nn.quantize(imported, None)
    final = ort_outputs(model, [model.graph.output[0].name], x)[model.graph.output[0].name]
    for spec in ("exact", "exact:signed=1"):
        np.testing.assert_array_equal(q.run(x, spec).astype(np.float32), final)
    with pytest.raises(nn.ModelError, match="requantization='onnxruntime'"):
        nn.quantize(imported, None, quant.QuantConfig(requantization="gemmlowp"))
    # evaluate (and `approxmul evaluate`) keep the model's own arithmetic whatever
    # quantization options they are given: its exact row is ONNX Runtime's
    labels = final.argmax(axis=1)
    result = evaluate(str(tmp_path / "q.onnx"), (x, labels), ["drum:k=4"], progress=False,
                      config=quant.QuantConfig(calibration="percentile"))
    assert {r.multiplier: r.top1 for r in result}["exact"] == 100.0
    with pytest.raises(nn.ModelError, match="its own 8-bit quantization.*4 bits"):
        evaluate(str(tmp_path / "q.onnx"), (x, labels), ["drum:bits=4,k=2"], progress=False)


def test_average_pools_nn_cannot_compute_are_refused_not_approximated(tmp_path):
    # ceil mode: QLinearAveragePool windows nn.AvgPool2d does not have
    pool = helper.make_node("AveragePool", ["c"], ["g"], name="pool", kernel_shape=[3, 3],
                            strides=[2, 2], ceil_mode=1)
    x = _pool_model(tmp_path, pool)
    quantize_static(str(tmp_path / "pool.onnx"), str(tmp_path / "q.onnx"),
                                 calibration_reader(x, len(x)),
                                 quant_format=quantization.QuantFormat.QOperator)
    with pytest.raises(nn.ModelError, match="only windows nn.AvgPool2d computes"):
        load_onnx(tmp_path / "q.onnx")


@pytest.mark.parametrize("fmt", ["QOperator", "QDQ"])
@pytest.mark.parametrize("act", ["QUInt8", "QInt8"])
def test_quantized_concat_equals_onnxruntime(tmp_path, fmt, act):
    # two branches of different ranges: QLinearConcat requantizes one input (a lookup table of
    # dequantize -> QuantizeLinear in ONNX Runtime) and copies the other
    from onnx_models import make_model

    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1] * 4),
             helper.make_node("Conv", ["x", "w2"], ["c2"], name="conv2", pads=[1] * 4),
             helper.make_node("Concat", ["c1", "c2"], ["cat"], name="cat", axis=1),
             helper.make_node("Conv", ["cat", "w3"], ["y"], name="conv3")]
    init = {"w1": rng.normal(size=(4, 3, 3, 3)).astype(np.float32),
            "w2": rng.normal(size=(5, 3, 3, 3)).astype(np.float32) * 3,
            "w3": rng.normal(size=(2, 9, 1, 1)).astype(np.float32)}
    onnx.save(make_model(nodes, [("x", ["N", 3, 8, 8])], [("y", ["N", 2, 8, 8])], init),
              str(tmp_path / "cat.onnx"))
    x = rng.normal(size=(32, 3, 8, 8)).astype(np.float32)

    quantize_static(str(tmp_path / "cat.onnx"), str(tmp_path / "q.onnx"),
                                 calibration_reader(x, len(x)),
                                 quant_format=getattr(quantization.QuantFormat, fmt),
                                 activation_type=getattr(quantization.QuantType, act))
    model = onnx.load(str(tmp_path / "q.onnx"))
    imported = load_onnx(tmp_path / "q.onnx")
    q = nn.quantize(imported, None)
    final = ort_outputs(model, [model.graph.output[0].name], x)[model.graph.output[0].name]
    np.testing.assert_array_equal(q.run(x, "exact").astype(np.float32), final)
    if fmt == "QOperator":  # the concatenated codes themselves (exposing them keeps the kernels)
        concat = next(n for n in model.graph.node if n.op_type == "QLinearConcat")
        values = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
        assert values[concat.input[3]] != values[concat.input[0]]  # one input is requantized
        tensors = {concat.output[0]: imported.quantization.tensors[concat.output[0]]}
        want = ort_outputs(expose(model, tensors), list(tensors), x)[concat.output[0]]
        got = q.run_codes(x, "exact", return_all=True)[tensors[concat.output[0]]]
        assert np.array_equal(got.to_domain(want.dtype == np.int8).codes, want)


def test_cli_evaluates_a_quantized_onnx_model_with_an_average_pool(tmp_path):
    import subprocess
    import sys

    x = _pool_model(tmp_path, POOLS["global"]())
    quantize_static(str(tmp_path / "pool.onnx"), str(tmp_path / "q.onnx"),
                    calibration_reader(x, len(x)), quant_format=quantization.QuantFormat.QDQ)
    model = onnx.load(str(tmp_path / "q.onnx"))
    labels = ort_outputs(model, [model.graph.output[0].name], x)[model.graph.output[0].name]
    np.savez(tmp_path / "data.npz", x=x, y=labels.argmax(axis=1))
    proc = subprocess.run([sys.executable, "-m", "approxmul_cffi", "evaluate", "--model", "q.onnx",
                           "--data", "data.npz", "-m", "drum:k=4", "--no-progress"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    exact = next(line for line in proc.stdout.splitlines() if line.startswith("exact"))
    assert exact.split()[3] == "100.00"  # ONNX Runtime's own predictions


def test_per_channel_uint8_weights_are_refused_at_import_naming_the_node(tmp_path):
    # QOperator uint8 per-channel weights have a zero point per channel; the kernels take one
    # (refused when the first batch ran, with no node named)
    x = _pool_model(tmp_path, POOLS["2x2"]())
    quantize_static(str(tmp_path / "pool.onnx"), str(tmp_path / "q.onnx"),
                    calibration_reader(x, len(x)), quant_format=quantization.QuantFormat.QOperator,
                    per_channel=True, activation_type=quantization.QuantType.QUInt8,
                    weight_type=quantization.QuantType.QUInt8)
    with pytest.raises(nn.ModelError, match=r"node '\w+': per-channel weights with different "
                                            r"zero points.*QInt8"):
        load_onnx(tmp_path / "q.onnx")
