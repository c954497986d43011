"""approxmul_cffi.nn: layers, graphs, integer conv, per-layer assignment, files, errors."""

import json
import os

import numpy as np
import pytest

import approxmul_cffi as am
import reference
from approxmul_cffi import nn
from approxmul_cffi.datasets import load_digits
from approxmul_cffi.nn import windows
from approxmul_cffi.nn.layers import pair
from approxmul_cffi.evaluation import bundled_model

CONV_CASES = [  # in, out, kernel, stride, padding, dilation, groups
    (3, 4, 3, 1, 1, 1, 1),
    (4, 6, (3, 2), (2, 1), (1, 0), 1, 2),
    (5, 5, 3, 1, 2, 2, 5),   # depthwise, dilated
    (2, 6, 1, 2, 0, 1, 1),   # 1x1 strided
    (4, 8, 3, 1, 1, 1, 4),   # depthwise with channel multiplier 2
]


def random_conv(rng, case):
    c, o, k, s, p, d, g = case
    conv = nn.Conv2d(c, o, k, s, p, d, g)
    conv.set_param("weight", rng.normal(size=conv.weight.shape))
    conv.set_param("bias", rng.normal(size=o))
    return conv


@pytest.mark.parametrize("case", CONV_CASES)
def test_float_conv_and_pools_match_torch(case):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    conv = random_conv(rng, case)
    x = rng.normal(size=(2, case[0], 9, 8)).astype(np.float32)
    want = torch.nn.functional.conv2d(
        torch.from_numpy(x), torch.from_numpy(conv.weight), torch.from_numpy(conv.bias),
        stride=conv.stride, padding=conv.padding, dilation=conv.dilation, groups=conv.groups)
    np.testing.assert_allclose(conv.forward(x), want.numpy(), atol=1e-4)
    assert conv.output_shape(x.shape[1:]) == tuple(want.shape[1:])
    t = torch.from_numpy(x)
    np.testing.assert_allclose(nn.MaxPool2d(3, 2, 1).forward(x),
                               torch.nn.functional.max_pool2d(t, 3, 2, 1).numpy())
    for include in (True, False):
        np.testing.assert_allclose(
            nn.AvgPool2d(3, 2, 1, count_include_pad=include).forward(x),
            torch.nn.functional.avg_pool2d(t, 3, 2, 1, count_include_pad=include).numpy(),
            atol=1e-6)


def conv2d_codes_by_columns(x, w, multiplier, *, stride, padding, dilation, groups,
                            x_zero_point, w_zero_point):
    """Integer conv2d accumulators via im2col + approximate matmul.

    Same contract as ``approxmul_cffi.conv2d`` (padded taps hold the code
    ``x_zero_point`` and go through the multiplier like any code), built
    from other parts: the tests hold the two against each other.
    """
    geom = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    out_hw = am.conv2d_output_shape(x.shape, w.shape, **geom)[2:]

    def mm(a, b):
        return am.matmul(a, b, multiplier, a_zero_point=x_zero_point, b_zero_point=w_zero_point)

    return windows.conv_by_columns(x, w, geom, out_hw, x_zero_point, mm, np.int64)


def direct_conv_codes(table, x, w, case, zx, zw):
    """Grouped conv by explicit loops over output pixels, products from the table."""
    _, _, k, s, p, d, g = case
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (pair(v, "") for v in (k, s, p, d))
    n, c, h, wd = x.shape
    o, cg = w.shape[:2]
    xp = np.full((n, c, h + 2 * ph, wd + 2 * pw), zx, dtype=np.int64)
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), dtype=np.int64)
    for oc in range(o):
        grp = oc // (o // g)
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, grp * cg:(grp + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                           j * sw:j * sw + dw * (kw - 1) + 1:dw].reshape(n, -1)
                out[:, oc, i, j] = reference.table_matmul(table, patch, w[oc].reshape(-1, 1), 8,
                                                          zx, zw)[:, 0]
    return out


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("case", CONV_CASES)
def test_integer_conv_matches_direct_loops(case, signed):
    rng = np.random.default_rng(2)
    table = rng.integers(-30000, 30000, (256, 256)).astype(np.int32)  # not symmetric
    m = am.Multiplier.from_table(table, signed=signed)
    dtype, (lo, hi) = (np.int8, (-128, 128)) if signed else (np.uint8, (0, 256))
    c, o = case[0], case[1]
    kh, kw = pair(case[2], "")
    x = rng.integers(lo, hi, (3, c, 7, 6)).astype(dtype)
    w = rng.integers(lo, hi, (o, c // case[6], kh, kw)).astype(dtype)
    zx, zw = int(rng.integers(lo, hi)), int(rng.integers(lo, hi))
    geom = dict(stride=pair(case[3], ""), padding=pair(case[4], ""),
                dilation=pair(case[5], ""), groups=case[6])
    want = direct_conv_codes(table, x, w, case, zx, zw)
    got = conv2d_codes_by_columns(x, w, m, x_zero_point=zx, w_zero_point=zw, **geom)
    np.testing.assert_array_equal(got, want)
    if callable(getattr(am, "conv2d", None)):  # the kernel library's conv2d, same contract
        np.testing.assert_array_equal(
            am.conv2d(x, w, m, x_zero_point=zx, w_zero_point=zw, **geom), want)


def test_im2col_fallback_works_in_bounded_chunks(monkeypatch):
    rng = np.random.default_rng(3)
    m = am.Multiplier.exact(bits=8)
    x = rng.integers(0, 256, (7, 2, 5, 5)).astype(np.uint8)
    w = rng.integers(0, 256, (3, 2, 3, 3)).astype(np.uint8)
    kw = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1, x_zero_point=3,
              w_zero_point=100)
    whole = conv2d_codes_by_columns(x, w, m, **kw)
    monkeypatch.setattr(windows, "IM2COL_BUDGET", 1)  # one image per chunk
    np.testing.assert_array_equal(conv2d_codes_by_columns(x, w, m, **kw), whole)


def residual_model(rng):
    """A small graph with every layer kind: depthwise, residual add, pools, ReLU6, softmax."""
    def conv(*args, **kw):
        layer = nn.Conv2d(*args, **kw)
        layer.set_param("weight", rng.normal(scale=0.5, size=layer.weight.shape))
        layer.set_param("bias", rng.normal(scale=0.1, size=layer.out_channels))
        return layer

    return nn.Model((2, 8, 8), [
        ("stem", conv(2, 4, 3, padding=1)),
        ("bn", nn.BatchNorm2d(4, running_var=rng.uniform(0.5, 2, 4), bias=rng.normal(size=4))),
        ("relu", nn.ReLU6()),
        ("dw", conv(4, 4, 3, padding=1, groups=4)),
        ("pw", conv(4, 4, 1), ["dw"]),
        ("add", nn.Add(), ["relu", "pw"]),
        ("relu2", nn.ReLU()),
        ("avg", nn.AvgPool2d(2)),
        ("down", conv(4, 6, 3, stride=2, padding=1, dilation=1)),
        ("max", nn.MaxPool2d(3, 1, 1)),
        ("gap", nn.GlobalAvgPool()),
        ("fc", nn.Linear(6, 3, weight=rng.normal(size=(3, 6)), bias_value=np.zeros(3))),
        ("softmax", nn.Softmax()),
    ])


def test_graph_model_quantized_is_close_to_float_in_both_domains():
    rng = np.random.default_rng(4)
    model = residual_model(rng)
    x = rng.uniform(-1, 1, (64, 2, 8, 8))
    q = nn.quantize(model, x)
    assert q.layer_names == ["stem", "dw", "pw", "down", "fc"]
    # the softmax saturates on this model, so compare the logits it is fed
    want = model.forward(x, return_all=True)["fc"]
    scale = want.std(axis=0)  # per class: how much the inputs move its logit
    assert scale.min() > 1
    for signed in (False, True):
        m = am.Multiplier.exact(bits=8, signed=signed)
        logits = q.run_codes(x, m, return_all=True)["fc"].dequantize()
        # quantization error is a fraction of that movement (another row's
        # logits, or the batch mean, are off by 1 to 4 times it)
        assert (np.abs(logits - want).max(axis=0) < 0.3 * scale).all()
        assert (logits.std(axis=0) > 0.8 * scale).all()
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        np.testing.assert_allclose(q.run(x, m), exp / exp.sum(axis=1, keepdims=True),
                                   rtol=1e-12, atol=1e-15)


def _windows_inside(shape, kernel, stride, padding, out_hw):
    """{(i, j): (row slice, column slice)} of each window's taps inside an (H, W) input."""
    (h, w), (kh, kw), (sh, sw), (ph, pw) = shape, kernel, stride, padding
    return {(i, j): (slice(max(i * sh - ph, 0), min(i * sh - ph + kh, h)),
                     slice(max(j * sw - pw, 0), min(j * sw - pw + kw, w)))
            for i in range(out_hw[0]) for j in range(out_hw[1])}


def _round_half_away(num, den):
    q, r = divmod(abs(num), den)
    return (1 if num >= 0 else -1) * (q + (2 * r >= den))


@pytest.mark.parametrize("geometry", [((3, 3), (2, 2), (1, 1), (7, 6)),
                                      ((3, 3), (1, 1), (1, 1), (5, 5)),
                                      ((2, 4), (1, 3), (1, 2), (4, 9)),
                                      ((5, 5), (2, 1), (2, 0), (6, 5))])
@pytest.mark.parametrize("zero_point,signed", [(37, False), (0, False), (-5, True)])
def test_average_pool_leaving_the_padding_out_takes_each_windows_own_mean(
        geometry, zero_point, signed):
    # ONNX AveragePool's default and PyTorch's count_include_pad=False: each
    # window divides by its taps inside the input, in float and on codes
    kernel, stride, padding, hw = geometry
    rng = np.random.default_rng(sum(hw) + zero_point)
    layer = nn.AvgPool2d(kernel, stride, padding, count_include_pad=False)
    assert layer.config()["count_include_pad"] is False
    x = rng.normal(size=(2, 3, *hw))
    out_hw = layer.output_shape(x.shape[1:])[1:]
    inside = _windows_inside(hw, kernel, stride, padding, out_hw)
    want = np.empty((2, 3, *out_hw))
    for (i, j), (rows, cols) in inside.items():
        want[..., i, j] = x[..., rows, cols].mean(axis=(2, 3))
    np.testing.assert_allclose(layer.forward(x), want, rtol=1e-12)
    # codes: the mean of the taps' q - zp, rounded half away from zero, plus zp
    qp = nn.quant.QParams(0.05, zero_point, signed=signed)
    codes = rng.integers(qp.qmin, qp.qmax + 1, (2, 3, *hw)).astype(qp.dtype)
    # whole windows of the extreme codes: no overflow, and the exact bounds come back
    codes[0, 0] = qp.qmax
    codes[0, 1] = qp.qmin
    got = layer.forward_codes(nn.QTensor(codes, qp))
    assert got.codes.dtype == codes.dtype and got.qparams == qp
    expect = np.empty((2, 3, *out_hw), np.int64)
    for (i, j), (rows, cols) in inside.items():
        for n in range(2):
            for c in range(3):
                taps = codes[n, c, rows, cols].astype(np.int64) - zero_point
                expect[n, c, i, j] = _round_half_away(int(taps.sum()), taps.size) + zero_point
    np.testing.assert_array_equal(got.codes, expect)
    assert (got.codes[0, 0] == qp.qmax).all() and (got.codes[0, 1] == qp.qmin).all()
    # counting the padding gives other means at the borders, the same inside
    counted = nn.AvgPool2d(kernel, stride, padding).forward_codes(nn.QTensor(codes, qp)).codes
    full = [k for k, (r, c) in inside.items()
            if r.stop - r.start == kernel[0] and c.stop - c.start == kernel[1]]
    np.testing.assert_array_equal(counted[..., [i for i, _ in full], [j for _, j in full]],
                                  got.codes[..., [i for i, _ in full], [j for _, j in full]])
    assert not np.array_equal(counted, got.codes)


def test_average_pool_options_survive_a_model_file(tmp_path):
    pools = [("same", nn.AvgPool2d(3, 1, 1, count_include_pad=False)),
             ("counted", nn.AvgPool2d(3, 1, 1)),
             ("unpadded", nn.AvgPool2d(2, count_include_pad=False))]
    model = nn.Model((2, 6, 6), pools + [("gap", nn.GlobalAvgPool())])
    assert "count_include_pad" not in pools[1][1].config()
    # without padding both rules are one pool, saved as the counted one
    assert "count_include_pad" not in pools[2][1].config()
    model.save(tmp_path / "m.json")
    loaded = nn.Model.load(tmp_path / "m.json")
    assert [n.layer.config() for n in loaded.nodes] == [n.layer.config() for n in model.nodes]
    x = np.random.default_rng(0).normal(size=(3, 2, 6, 6))
    np.testing.assert_array_equal(loaded.forward(x), model.forward(x))


def test_codes_only_layers_are_domain_invariant():
    rng = np.random.default_rng(6)
    qp = nn.quant.QParams(0.05, 37, signed=False)
    codes = rng.integers(0, 256, (2, 3, 6, 6)).astype(np.uint8)
    u = nn.QTensor(codes, qp)
    s = u.to_domain(True)
    for layer in (nn.AvgPool2d(3, 2, 1), nn.AvgPool2d(3, 2, 1, count_include_pad=False),
                  nn.GlobalAvgPool(), nn.MaxPool2d(2), nn.ReLU(),
                  nn.ReLU6(), nn.Flatten()):
        node = layer.lower([qp], qp, nn.quant.QuantConfig())
        a = node.forward([u], None).to_domain(False).codes
        b = node.forward([s], None).to_domain(False).codes
        np.testing.assert_array_equal(a, b)
    avg = nn.GlobalAvgPool().forward_codes(u).dequantize()
    np.testing.assert_allclose(avg, u.dequantize().mean(axis=(2, 3)), atol=0.05 / 2 + 1e-12)


@pytest.fixture(scope="module")
def digits_q():
    return nn.quantize(bundled_model(), load_digits("train")[0])


def test_per_layer_assignment_changes_only_the_named_layer(digits_q):
    x = load_digits("test")[0][:40]
    zero = am.Multiplier.from_table(np.zeros((256, 256), np.int32), signed=False)
    exact = digits_q.run_codes(x, return_all=True)
    for target in ("conv2", "fc2"):
        got = digits_q.run_codes(x, layers={target: zero}, return_all=True)
        names = [n.name for n in digits_q.nodes]
        first = names.index(target)
        for name in names[:first]:
            np.testing.assert_array_equal(got[name].codes, exact[name].codes)
        assert not np.array_equal(got[target].codes, exact[target].codes)
    assignment = digits_q.assign(zero, {"conv1": am.Multiplier.exact(bits=8)})
    assert assignment["conv1"] is not zero and assignment["fc1"] is zero


def test_assignment_errors(digits_q):
    with pytest.raises(nn.ModelError, match="unknown layer name.*'conv9'.*conv1, conv2, fc1, fc2"):
        digits_q.assign(None, {"conv9": am.Multiplier.exact()})
    with pytest.raises(nn.ModelError, match="8-bit"):
        digits_q.assign(am.Multiplier.exact(bits=4))


def test_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(7)
    model = residual_model(rng)
    path = model.save(tmp_path / "net")
    assert path.endswith("net.json") and (tmp_path / "net.npz").exists()
    loaded = nn.Model.load(path)
    x = rng.uniform(-1, 1, (5, 2, 8, 8))
    np.testing.assert_array_equal(loaded.forward(x), model.forward(x))
    assert [(n.name, n.inputs, n.layer.config()) for n in loaded.nodes] == \
        [(n.name, n.inputs, n.layer.config()) for n in model.nodes]
    np.testing.assert_array_equal(nn.quantize(loaded, x).run(x), nn.quantize(model, x).run(x))
    assert nn.Model.load(tmp_path / "net").output == "softmax"  # stem works too


@pytest.fixture
def saved(tmp_path):
    path = bundled_model().save(tmp_path / "m")
    return path, path[:-5] + ".npz"


def edit_json(path, change):
    with open(path) as f:
        doc = json.load(f)
    change(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def test_file_errors(saved, tmp_path):
    path, npz = saved
    with pytest.raises(nn.ModelError, match="model file not found"):
        nn.Model.load(tmp_path / "nope.json")
    text = open(path).read()
    with open(path, "w") as f:
        f.write(text[: len(text) // 2])
    with pytest.raises(nn.ModelError, match="not valid JSON"):
        nn.Model.load(path)
    with open(path, "w") as f:
        f.write(text)
    data = open(npz, "rb").read()
    with open(npz, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(nn.ModelError, match="truncated or corrupt"):
        nn.Model.load(path)
    os.remove(npz)
    with pytest.raises(nn.ModelError, match="weights file not found"):
        nn.Model.load(path)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["nodes"][0]["config"].update(out_channels=12), r"'conv1'.*weight.*\(16, 1, 3, 3\)"),
    (lambda d: d["nodes"][9]["config"].update(in_features=100), r"'fc1'"),
    (lambda d: d["nodes"][3]["config"].update(kernel_size=[9, 9]), "'pool1'.*leaves no output"),
    (lambda d: d["nodes"][3]["config"].update(kernel_size=0), "'pool1': bad config.*invalid sizes"),
    (lambda d: d["nodes"][2].update(op="Gelu"), "unknown op 'Gelu'"),
    (lambda d: d["nodes"][2].update(inputs=["fc2"]), "not defined before"),
    (lambda d: d["nodes"][0]["config"].pop("kernel_size"), "bad config"),
    (lambda d: d.pop("nodes"), "malformed"),
    (lambda d: d.update(format="other"), "not an approxmul model"),
    (lambda d: d.pop("weights"), "names no weights file"),
    (lambda d: d["input"].update(shape=[3, 8, 8]), "'conv1'.*1 input channels, got 3"),
])
def test_inconsistent_models_are_rejected(saved, change, message):
    path, _ = saved
    edit_json(path, change)
    with pytest.raises(nn.ModelError, match=message):
        nn.Model.load(path)


def test_extra_or_missing_weights_are_rejected(saved):
    path, npz = saved
    weights = dict(np.load(npz))
    np.savez(npz, **weights, stray=np.zeros(1))
    with pytest.raises(nn.ModelError, match="no layer uses.*stray"):
        nn.Model.load(path)
    del weights["fc2.bias"]
    np.savez(npz, **weights)
    with pytest.raises(nn.ModelError, match="lacks 'fc2.bias'"):
        nn.Model.load(path)


def test_graph_and_data_errors():
    with pytest.raises(nn.ModelError, match="Flatten"):
        nn.Model((1, 8, 8), [("fc", nn.Linear(64, 10))])
    with pytest.raises(nn.ModelError, match="used twice"):
        nn.Model((3,), [("a", nn.ReLU()), ("a", nn.ReLU())])
    with pytest.raises(nn.ModelError, match="equal shape"):
        nn.Model((3,), [("a", nn.Linear(3, 2)), ("b", nn.Add(), ["a", "input"])])
    with pytest.raises(nn.ModelError, match="groups: 3 does not divide"):
        nn.Conv2d(4, 6, 3, groups=3)
    with pytest.raises(nn.ModelError, match="leaves no output"):
        nn.Model((1, 2, 2), [("c", nn.Conv2d(1, 1, 3))])
    model = bundled_model()
    with pytest.raises(nn.ModelError, match=r"shape \(2, 8, 8\), the model needs \(N, 1, 8, 8\)"):
        model.forward(np.zeros((2, 8, 8)))
    with pytest.raises(nn.ModelError, match="floating-point.*uint8"):
        model.forward(np.zeros((2, 1, 8, 8), np.uint8))
    with pytest.raises(nn.ModelError, match="NaN"):
        nn.Linear(2, 1, weight=[[1.0, np.nan]])
    with pytest.raises(nn.ModelError, match="parameter 'weight' has shape"):
        nn.Linear(3, 2, weight=np.zeros((3, 2)))
    with pytest.raises(nn.ModelError, match="must be the only reader"):
        nn.quantize(nn.Model((1, 4, 4), [("bn", nn.BatchNorm2d(1))]), np.zeros((1, 1, 4, 4)))
    with pytest.raises(nn.ModelError, match="Softmax 'sm' must be the model output"):
        nn.quantize(nn.Model((3,), [("sm", nn.Softmax()), ("fc", nn.Linear(3, 2))]),
                    np.zeros((2, 3)))
    assert issubclass(nn.ModelError, ValueError) and issubclass(nn.ModelError, am.ApproxmulError)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.float32])
@pytest.mark.parametrize("kernel, stride, padding", [((2, 2), (2, 2), (0, 0)),
                                                     ((3, 3), (2, 1), (1, 1)),
                                                     ((3, 2), (1, 3), (1, 0))])
def test_pool_tap_loop_equals_window_reduction(dtype, kernel, stride, padding):
    # pool takes max / integer sums one tap at a time; same as reducing the windows
    rng = np.random.default_rng(3)
    x = rng.integers(-100, 200, (3, 4, 9, 11)).astype(dtype)
    pad = 0 if dtype == np.uint8 else -1
    out_hw = am.conv2d_output_shape((1, 1, *x.shape[2:]), (1, 1, *kernel), stride=stride,
                                    padding=padding)[2:]
    views = windows.windows(x, kernel, stride, padding, (1, 1), out_hw, pad)
    got = windows.pool(x, "max", kernel, stride, padding, out_hw, pad)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, views.max(axis=(4, 5)))
    if dtype != np.float32:
        expected = windows.windows(x, kernel, stride, padding, (1, 1), out_hw, 0).sum(
            axis=(4, 5), dtype=np.int64)
        got = windows.pool(x, "avg", kernel, stride, padding, out_hw, 0)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("signed", [False, True])
def test_a_standalone_quantized_layer_is_the_graph_s_integer_path(signed):
    # what a framework adapter does per layer: build the node from float
    # parameters and QParams, and get the graph's codes bit for bit
    rng = np.random.default_rng(8)
    model = residual_model(rng)
    x = rng.uniform(-1, 1, (16, 2, 8, 8))
    q = nn.quantize(model, x)
    m = am.Multiplier.from_table(rng.integers(-300, 300, (256, 256)).astype(np.int32) +
                                 am.Multiplier.exact(8, signed=signed).table(), signed=signed)
    values = q.run_codes(x, m, return_all=True)
    stem, bn = model.layers["stem"], model.layers["bn"]
    weight, bias = bn.fold(stem.weight, stem.bias)
    node = nn.QuantizedLayer(stem, weight, bias, q.input_qparams, q.qparams["relu"], "relu6",
                             q.config)
    codes = node.forward_codes(values[nn.INPUT].codes, m)
    np.testing.assert_array_equal(codes, values["stem"].codes)
    assert node.output_qparams(signed) == values["stem"].qparams
    fc = model.layers["fc"]
    # pooling keeps its input's grid: the layer reads the grid the codes are on
    node = nn.QuantizedLayer(fc, fc.weight, fc.bias, values["gap"].qparams, q.qparams["fc"])
    np.testing.assert_array_equal(node.forward_codes(values["gap"].codes, m),
                                  values["fc"].codes)
    assert node.prepare(signed) is node.prepare(signed)  # cached per code domain


def test_wide_conv2d_layers_are_accepted():
    """The geometry check ran on a 2^24 x 2^24 input, which overflowed for 64->64 3x3 layers."""
    from approxmul_cffi import nn as _nn
    assert _nn.Conv2d(64, 64, 3, padding=1).weight.shape == (64, 64, 3, 3)
    assert _nn.Conv2d(512, 512, 3, padding=2, dilation=2).weight.shape == (512, 512, 3, 3)


@pytest.mark.parametrize("signed", [(False, False), (True, True), (False, True), (True, False)])
def test_the_integer_adds_table_gives_its_arithmetic(signed):
    # 8-bit codes go through a table of the 65536 byte pairs; it must give
    # what TFLite's arithmetic gives element by element, in every domain
    rng = np.random.default_rng(sum(signed))
    grids = [nn.quant.QParams(0.05, 37, signed=False), nn.quant.QParams(0.02, 200, signed=False)]
    out = nn.quant.QParams(0.07, 90, signed=False)
    add = nn.Add().lower(grids, out, nn.quant.QuantConfig())
    inputs = []
    for grid, s in zip(grids, signed):
        codes = rng.integers(0, 256, (3, 5, 7, 7)).astype(np.uint8)
        inputs.append(nn.QTensor(codes, grid).to_domain(s))
    got = add.forward(inputs)
    out_qp = out.to_domain(signed[0])
    want = add.add_codes(inputs[0].codes, inputs[0].qparams, inputs[1].codes, inputs[1].qparams,
                         out_qp)
    assert got.qparams.signed == signed[0] and got.codes.dtype == want.dtype
    np.testing.assert_array_equal(got.codes, want)
    # and the same values as the unsigned inputs' sum, whatever the domains
    plain = add.forward([x.to_domain(False) for x in inputs]).to_domain(False).codes
    np.testing.assert_array_equal(got.to_domain(False).codes, plain)
