"""approxmul_cffi.torch forward: bit-exact against an int64 reference and the evaluator."""

import copy
import sys
import pathlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import approxmul_cffi as am
from approxmul_cffi import nn, quant
from approxmul_cffi.datasets import load_digits
from approxmul_cffi.evaluation import bundled_model, evaluate
from approxmul_cffi.torch import ApproximationError, approximate, layers, recalibrate
from approxmul_cffi.torch.graph import to_torch

import torch_reference as ref

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))


def codes_of_output(module, y):
    """Output codes back from the dequantized output (exact for float32/64)."""
    signed = bool(module.q_multiplier.signed)
    qp = module.q_node.output_qparams(signed)
    return ref.quantize(y.detach().to(torch.float64).numpy(), float(qp.scale), int(qp.zero_point),
                        qp.qmin, qp.qmax), qp


def reference_codes(module, x):
    m = module.q_multiplier
    signed = bool(m.signed)
    q = module.quantized(signed)
    lo, hi = quant.code_range(signed, bits=m.bits)
    x64 = x.detach().to(torch.float64).numpy()
    if module.q_conv1d:
        x64 = x64[:, :, None, :]
    x_codes = ref.quantize(x64, q["s_x"], q["z_x"], lo, hi)
    out_qp = module.q_node.output_qparams(signed)
    # exact multipliers by arithmetic (no 2^24-entry table at 12 bits)
    table = None if m.plan == "exact-gemm" else np.asarray(m.table(), np.int64)
    geometry = None
    if module.q_conv:  # torch's own attributes, not the layer's translation of them
        along_w = (lambda v, h: (h, v[0])) if module.q_conv1d else (lambda v, h: tuple(v))
        geometry = dict(stride=along_w(module.stride, 1), padding=along_w(module.padding, 0),
                        dilation=along_w(module.dilation, 1), groups=module.groups)
    out = ref.layer_codes(table, x_codes, q["w_codes"].numpy(), module.q_node.bias, q["s_x"],
                          q["z_x"], q["s_w"].numpy(), q["z_w"], float(out_qp.scale),
                          int(out_qp.zero_point), lo, hi, geometry)
    return out[:, :, 0] if module.q_conv1d else out


CONVS = {
    "plain": dict(in_channels=3, out_channels=4, kernel_size=3, padding=1),
    "stride-dilation": dict(in_channels=3, out_channels=4, kernel_size=3, stride=2, padding=2,
                            dilation=2),
    "groups": dict(in_channels=4, out_channels=6, kernel_size=(3, 2), groups=2, padding=(1, 0)),
    "depthwise": dict(in_channels=4, out_channels=4, kernel_size=3, groups=4, padding=1),
    "no-bias": dict(in_channels=2, out_channels=3, kernel_size=2, bias=False),
}
SPECS = ["exact", "drum:k=3", "drum:k=4,signed=1", "truncated:bits=8,cut=10",
         # other widths: the layer's codes take the multiplier's
         "drum:bits=4,k=2,signed=1", "truncated:bits=6,cut=5", "exact:bits=12"]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("case", sorted(CONVS))
def test_conv2d_matches_int64_reference(spec, case):
    torch.manual_seed(1)
    layer = torch.nn.Conv2d(**CONVS[case])
    c = CONVS[case]["in_channels"]
    net = torch.nn.Sequential(layer)
    approx = approximate(net, spec, calibration=[torch.randn(8, c, 7, 6)])
    x = torch.randn(5, c, 7, 6) * 1.2  # a little outside the calibrated range: clamps
    y = approx(x)
    got, _ = codes_of_output(approx[0], y)
    np.testing.assert_array_equal(got, reference_codes(approx[0], x))


@pytest.mark.parametrize("spec", ["drum:k=3", "drum:k=4,signed=1"])
def test_linear_and_conv1d_match_reference(spec):
    torch.manual_seed(2)
    net = torch.nn.Sequential(torch.nn.Conv1d(2, 3, 3, padding=1, stride=2), torch.nn.Flatten(),
                              torch.nn.Linear(3 * 5, 4))
    approx = approximate(net, spec, calibration=[torch.randn(16, 2, 9)])
    assert approx.approxmul_plan["calibration"] == "per-layer"   # Conv1d is not in the graph
    x = torch.randn(3, 2, 9)
    h = approx[0](x)
    np.testing.assert_array_equal(codes_of_output(approx[0], h)[0], reference_codes(approx[0], x))
    f = approx[1](h)
    np.testing.assert_array_equal(codes_of_output(approx[2], approx[2](f))[0],
                                  reference_codes(approx[2], f))


@pytest.mark.parametrize("kwargs", [dict(padding=2), dict(padding=1, stride=2, dilation=2),
                                    dict(groups=2, bias=False)])
def test_conv1d_follows_torch(kwargs):
    # the exact multiplier stays within quantization error of torch's float conv1d,
    # forward and backward (a padded height once made every output the bias)
    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Conv1d(4, 6, 5, **kwargs))
    x = torch.randn(8, 4, 32)
    approx = approximate(net, "exact", calibration=[x])
    xg = x.clone().requires_grad_()
    y = approx(xg)
    expected = net(x)
    assert y.shape == expected.shape
    assert (y - expected).abs().max() < 0.05 * expected.abs().max()
    y.sum().backward()
    xf = x.clone().requires_grad_()
    net(xf).sum().backward()
    assert (xg.grad - xf.grad).abs().max() < 0.05 * xf.grad.abs().max()


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_models_with_other_parameter_types(dtype):
    # calibration through the graph ran a float32 sample through the model,
    # which a float64 or half model refuses
    torch.manual_seed(6)
    net = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 4 * 4, 3)).to(dtype)
    x = torch.randn(16, 2, 6, 6).to(dtype)
    approx = approximate(net, "exact", calibration=[x])
    assert approx.approxmul_plan["calibration"] == "graph"
    xg = x.clone().requires_grad_()
    y = approx(xg)
    assert y.dtype == dtype
    expected = net(x).float()
    assert (y.float() - expected).abs().max() < 0.05 * expected.abs().max()
    y.float().sum().backward()
    assert xg.grad is not None and xg.grad.dtype == dtype


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_input_dtypes_and_layouts(dtype):
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1))
    approx = approximate(net, "drum:k=4", calibration=[torch.randn(8, 3, 6, 6)])
    x = torch.randn(4, 3, 6, 6).to(dtype)
    y = approx(x)
    assert y.dtype == dtype
    expected = reference_codes(approx[0], x.to(torch.float64))
    if dtype == torch.float64:
        np.testing.assert_array_equal(codes_of_output(approx[0], y)[0], expected)
    else:  # bfloat16 holds 8 significant bits: dequantized outputs within one code
        assert np.abs(codes_of_output(approx[0], y)[0] - expected).max() <= 1
    x32 = torch.randn(4, 3, 6, 6)
    cl = x32.to(memory_format=torch.channels_last)
    assert not cl.is_contiguous()
    with torch.no_grad():
        np.testing.assert_array_equal(approx(cl).numpy(), approx(x32).numpy())
        np.testing.assert_array_equal(approx(x32[:1]).numpy(), approx(x32)[:1].numpy())


def test_per_tensor_signed_weights():
    torch.manual_seed(4)
    net = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3))
    scheme = quant.QuantConfig(signed_per_channel=False)
    approx = approximate(net, "exact:signed=1", calibration=[torch.randn(4, 2, 5, 5)], scheme=scheme)
    assert approx[0].quantized(True)["s_w"].unique().numel() == 1
    x = torch.randn(2, 2, 5, 5)
    np.testing.assert_array_equal(codes_of_output(approx[0], approx(x))[0],
                                  reference_codes(approx[0], x))


def _torch_lenet():
    from train_digits import LeNet
    model = bundled_model()
    net = LeNet()
    params = {n.name: n.layer for n in model.nodes}
    state = {}
    for key, value in net.state_dict().items():
        mod, p = key.rsplit(".", 1)
        state[key] = value if p == "num_batches_tracked" else torch.from_numpy(getattr(params[mod], p))
    net.load_state_dict(state)
    return net.eval()


@pytest.mark.parametrize("spec", ["exact", "drum:k=3", "drum:k=4,signed=1", "truncated:bits=8,cut=10",
                                  "drum:bits=6,k=4,signed=1", "exact:bits=12"])
def test_digits_lenet_bit_exact_with_the_evaluator(spec):
    """The training script's torch LeNet, approximated, gives evaluate's integer outputs."""
    net = _torch_lenet()
    x_train = load_digits("train")[0]
    x, y = load_digits("test")
    approx = approximate(net, spec, calibration=[torch.from_numpy(x_train)])
    assert approx.approxmul_plan["calibration"] == "graph"
    with torch.no_grad():
        out = approx(torch.from_numpy(x)).numpy()
    m = am.multiplier(spec)
    qmodel = nn.quantize(bundled_model(), x_train, quant.QuantConfig(bits=m.bits))
    expected = qmodel.run_codes(x, m)
    qp = expected.qparams
    assert qp.bits == m.bits
    np.testing.assert_array_equal(ref.quantize(out, float(qp.scale), int(qp.zero_point), qp.qmin, qp.qmax),
                                  expected.codes)
    result = evaluate(bundled_model(), (x, y), [spec], calibration=x_train, progress=False)
    assert float((out.argmax(1) == y).mean() * 100) == pytest.approx(result[-1].top1, abs=1e-9)


def test_per_layer_mapping_and_graph_twin():
    net = to_torch(bundled_model())
    x_train = torch.from_numpy(load_digits("train")[0])
    approx = approximate(net, {"conv*": "drum:k=3", "fc2": "exact"}, calibration=[x_train])
    kinds = {name: type(m).__name__ for name, m in approx.named_modules()}
    assert kinds["conv1"] == "ApproxConv2d" and kinds["fc2"] == "ApproxLinear"
    assert kinds["fc1"] == "Linear" and kinds["bn1"] == "FoldedBatchNorm2d"
    assert type(net.conv1) is torch.nn.Conv2d   # not in place: the original is untouched
    net.train()
    net.bn2.eval()  # fine-tuning with a frozen batch norm: its flag must survive
    stats = net.bn1.running_mean.clone()
    info = layers(net, x_train[:1] + 3)
    assert [(i.name, i.macs) for i in info] == [("conv1", 16 * 9 * 64), ("conv2", 32 * 16 * 9 * 16),
                                                ("fc1", 128 * 64), ("fc2", 640)]
    assert net.training and torch.equal(net.bn1.running_mean, stats)  # listing changes nothing
    assert net.bn1.training and not net.bn2.training
    # nor does approximating it (calibration, the graph's shape pass)
    approximate(net, "exact", calibration=[x_train[:64]], inplace=True)
    assert net.training and not net.bn2.training


class _PooledNet(torch.nn.Module):
    """conv -> ReLU -> module average pool (padded, strided) -> residual conv ->
    global average pool module -> Linear."""

    def __init__(self, relu=True, count_include_pad=True):
        super().__init__()
        self.act = torch.relu if relu else (lambda t: t)  # without: negative pool inputs
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.AvgPool2d(3, 2, 1, count_include_pad=count_include_pad)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.gap = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x):
        x = self.pool(self.act(self.c1(x)))
        x = self.act(self.c2(x) + x)
        return self.fc(self.gap(x).flatten(1))


def _evaluator_codes(net, x_cal, x, spec):
    from approxmul_cffi.torch._translate import translate
    m = am.multiplier(spec)
    qmodel = nn.quantize(translate(net, x_cal), x_cal.numpy(), quant.QuantConfig(bits=m.bits))
    return qmodel.run_codes(x.numpy(), m)


@pytest.mark.parametrize("relu,count_include_pad", [(True, True), (False, True), (True, False),
                                                    (False, False)])
@pytest.mark.parametrize("spec", ["exact", "drum:k=4", "drum:k=4,signed=1"])
def test_average_pool_modules_take_the_evaluators_integer_mean(spec, relu, count_include_pad):
    # torch's float mean of a tie between two codes rounds either way; the pools
    # between approximate layers take the evaluator's integer mean instead (with
    # count_include_pad=False, over each window's taps inside the input)
    torch.manual_seed(7)
    net = _PooledNet(relu, count_include_pad).eval()
    x_cal, x = torch.randn(256, 3, 8, 8), torch.randn(200, 3, 8, 8)
    approx = approximate(net, spec, calibration=[x_cal])
    assert type(approx.pool).__name__ == "GridAvgPool2d"
    assert type(approx.gap).__name__ == "GridAdaptiveAvgPool2d"
    expected = _evaluator_codes(net, x_cal, x, spec)
    qp = expected.qparams
    with torch.no_grad():
        out = approx(x).numpy()
    np.testing.assert_array_equal(
        ref.quantize(out, float(qp.scale), int(qp.zero_point), qp.qmin, qp.qmax), expected.codes)
    # the gradient is torch's pool's (straight through the rounding), compiled too
    xg = x[:8].clone().requires_grad_()
    approx(xg).sum().backward()
    torch._dynamo.reset()  # each case is a new model: no recompile limit across the cases
    compiled = torch.compile(approx, backend="aot_eager", fullgraph=True)
    xc = x[:8].clone().requires_grad_()
    compiled(xc).sum().backward()
    torch.testing.assert_close(xc.grad, xg.grad, rtol=0, atol=0)
    recalibrate(approx, [x_cal * 2])
    assert approx.approxmul_plan["calibration"] == "graph" and approx.gap.q_grid is not None
    with torch.no_grad():
        torch.testing.assert_close(compiled(x[:8]), approx(x[:8]), rtol=0, atol=0)


class _FunctionalPools(torch.nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.conv, self.pool = torch.nn.Conv2d(2, 2, 3, padding=1), pool

    def forward(self, x):
        return self.pool(self.conv(x))


@pytest.mark.parametrize("pool,config", [
    (lambda x: F.avg_pool2d(x, 3, 2, 1), dict(count_include_pad=True)),
    (lambda x: F.avg_pool2d(x, 3, 2, 1, False, False), dict(count_include_pad=False)),
    (lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), dict(count_include_pad=False)),
    (torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False), dict(count_include_pad=False)),
    (lambda x: F.avg_pool2d(x, 3, 2, 1, True), None),  # ceil mode: no window of the evaluator's
    (lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=2), None),
])
def test_average_pools_translate_with_their_divisor(pool, config):
    from approxmul_cffi.torch._translate import Untranslatable, translate
    net, x = _FunctionalPools(pool).eval(), torch.randn(2, 2, 7, 7)
    if config is None:
        with pytest.raises(Untranslatable, match="AvgPool2d with options"):
            translate(net, x)
        return
    model = translate(net, x)
    layer = model.layers["pool"] if "pool" in model.layers else model.nodes[-1].layer
    assert isinstance(layer, nn.AvgPool2d)
    assert layer.count_include_pad == config["count_include_pad"]
    with torch.no_grad():
        np.testing.assert_allclose(model.forward(x.numpy().astype(np.float64)), net(x).numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_average_pools_stay_float_beside_float_layers():
    # with a layer left float the pool's input is on no grid of the evaluator's
    torch.manual_seed(7)
    net = _PooledNet().eval()
    approx = approximate(net, {"c*": "exact"}, calibration=[torch.randn(64, 3, 8, 8)])
    assert type(approx.pool) is torch.nn.AvgPool2d and type(approx.fc) is torch.nn.Linear


def test_exact_multiplier_is_close_to_float():
    torch.manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(8 * 4 * 4, 5))
    x = torch.randn(32, 3, 6, 6)
    approx = approximate(net, "exact", calibration=[x])
    with torch.no_grad():
        err = (approx(x) - net(x)).abs().max() / net(x).abs().max()
    assert err < 0.05


@pytest.mark.parametrize("spec, top1", [("truncated:bits=8,cut=10", 36.22), ("drum:k=3", 75.56),
                                        ("drum:k=4,signed=1", None)])
def test_bias_correction_bit_exact_with_the_evaluator(spec, top1):
    """bias_correction=True: the evaluator's corrections on the same data, the same codes."""
    net = _torch_lenet()
    x_train = load_digits("train")[0]
    x, y = load_digits("test")
    approx = approximate(net, spec, calibration=[torch.from_numpy(x_train)], bias_correction=True)
    m = am.multiplier(spec)
    qmodel = nn.quantize(bundled_model(), x_train)
    corrections = qmodel.correct_bias(x_train, m)
    for name, c in corrections.items():
        np.testing.assert_array_equal(getattr(approx, name).q_node.correction(m), c)
    expected = qmodel.run_codes(x, m)
    qp = expected.qparams
    for model in (approx, recalibrate(approx, [torch.from_numpy(x_train)])):  # kept on recalibration
        with torch.no_grad():
            out = model(torch.from_numpy(x)).numpy()
        np.testing.assert_array_equal(
            ref.quantize(out, float(qp.scale), int(qp.zero_point), qp.qmin, qp.qmax), expected.codes)
    with torch.no_grad():   # a copy keeps the corrections
        np.testing.assert_array_equal(copy.deepcopy(approx)(torch.from_numpy(x)).numpy(), out)
    accuracy = float((out.argmax(1) == y).mean() * 100)
    result = evaluate(bundled_model(), (x, y), [spec], calibration=x_train, progress=False,
                      bias_correction=True)
    assert accuracy == pytest.approx(result[-1].top1, abs=1e-9)
    plain = evaluate(bundled_model(), (x, y), [spec], calibration=x_train, progress=False)
    assert plain[-1].top1 < result[-1].top1                    # off by default, and it helps
    if top1 is not None:
        assert result[-1].top1 == pytest.approx(top1, abs=0.01)


def test_bias_correction_needs_the_graph():
    class Odd(torch.nn.Module):   # a sine: no approxmul graph node, calibrated per layer
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(torch.sin(x))

    x = torch.rand(8, 3)
    assert approximate(Odd(), "drum:k=3", calibration=[x]).approxmul_plan["calibration"] == "per-layer"
    with pytest.raises(ApproximationError, match="bias correction runs the evaluator's graph"):
        approximate(Odd(), "drum:k=3", calibration=[x], bias_correction=True)
