"""approxmul_cffi.torch backward: ste, table and table2d against independent formulas."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from approxmul_cffi.gradients import DEFAULT_HALF_WINDOW
from approxmul_cffi.torch import approximate, recalibrate

import torch_reference as ref
from test_multiplier_gradients import numpy_slopes, numpy_table


CONV = dict(in_channels=4, out_channels=6, kernel_size=3, padding=1, stride=2, dilation=1, groups=2)


def _layer(kind, spec, gradient, seed=0, **over):
    torch.manual_seed(seed)
    if kind == "conv":
        layer = torch.nn.Conv2d(**dict(CONV, **over))
        x = torch.randn(3, CONV["in_channels"], 7, 7, dtype=torch.float64)
    else:
        layer = torch.nn.Linear(10, 5)
        x = torch.randn(4, 10, dtype=torch.float64)
    net = torch.nn.Sequential(layer)
    approx = approximate(net, spec, calibration=[x.float()], gradient=gradient)
    return approx, x


def _grads(approx, x, seed=1):
    x = x.clone().requires_grad_(True)
    y = approx(x)
    r = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed), dtype=y.dtype)
    (y * r).sum().backward()
    layer = approx[0]
    return x.grad.clone(), layer.weight.grad.clone(), layer.bias.grad.clone(), r


@pytest.mark.parametrize("kind", ["conv", "linear"])
@pytest.mark.parametrize("spec", ["drum:k=3", "drum:k=4,signed=1", "drum:bits=12,k=5"])
def test_ste_equals_the_dequantized_float_layer(kind, spec):
    approx, x = _layer(kind, spec, "ste")
    gx, gw, gb, r = _grads(approx, x)
    m = approx[0]
    q = m.quantized(bool(m.q_multiplier.signed))
    x_dq = (q["s_x"] * (m.integer_forward(x)[1].double() - q["z_x"])).requires_grad_(True)
    w_dq = q["w_dq"].clone().requires_grad_(True)
    b = m.bias.detach().double().clone().requires_grad_(True)
    if kind == "conv":
        y = F.conv2d(x_dq, w_dq, b, stride=CONV["stride"], padding=CONV["padding"], groups=CONV["groups"])
    else:
        y = F.linear(x_dq, w_dq, b)
    (y * r).sum().backward()
    torch.testing.assert_close(gx, x_dq.grad, rtol=0, atol=1e-6)
    torch.testing.assert_close(gw.double(), w_dq.grad, rtol=0, atol=1e-6)
    torch.testing.assert_close(gb.double(), b.grad, rtol=0, atol=1e-6)


def _numpy_reference(approx, x, r, gradient):
    m = approx[0]
    mult = m.q_multiplier
    q = m.quantized(bool(mult.signed))
    codes = m.integer_forward(x)[1].numpy().astype(np.int64)
    w = q["w_codes"].numpy().astype(np.int64)
    s_w, s_x, zx, zw = q["s_w"].numpy(), q["s_x"], q["z_x"], q["z_w"]
    mask = 2**mult.bits - 1  # a code's bit pattern indexes the tables
    if gradient == "table":
        sa, sb = numpy_slopes(mult, "a"), numpy_slopes(mult, "b")
        da = lambda xc, wc: np.broadcast_to(sa[wc & mask], np.broadcast_shapes(xc.shape, wc.shape))  # noqa: E731
        db = lambda xc, wc: np.broadcast_to(sb[xc & mask], np.broadcast_shapes(xc.shape, wc.shape))  # noqa: E731
    else:
        ta, tb = numpy_table(mult, "a", DEFAULT_HALF_WINDOW), numpy_table(mult, "b", DEFAULT_HALF_WINDOW)
        da = lambda xc, wc: ta[xc & mask, wc & mask]  # noqa: E731
        db = lambda xc, wc: tb[xc & mask, wc & mask]  # noqa: E731
    g = r.numpy()
    if m.q_conv:
        return ref.conv2d_grads(g, codes, w, da, db, s_x, zx, s_w, zw, stride=m.q_stride,
                                padding=m.q_padding, dilation=m.q_dilation, groups=m.q_groups)
    gx = (g[:, :, None] * s_w[None, :, None] * (da(codes[:, None, :], w[None]) - zw)).sum(1)
    gw = (g[:, :, None] * s_x * (db(codes[:, None, :], w[None]) - zx)).sum(0)
    return gx, gw


@pytest.mark.parametrize("kind", ["conv", "linear"])
@pytest.mark.parametrize("gradient", ["table", "table2d"])
@pytest.mark.parametrize("spec", ["drum:k=3", "truncated:bits=8,cut=10", "drum:k=4,signed=1",
                                  "drum:bits=4,k=2,signed=1", "truncated:bits=6,cut=5"])
def test_table_gradients_match_numpy(kind, gradient, spec):
    approx, x = _layer(kind, spec, gradient)
    gx, gw, gb, r = _grads(approx, x)
    ex, ew = _numpy_reference(approx, x, r, gradient)
    np.testing.assert_allclose(gx.numpy(), ex, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gw.double().numpy(), ew, rtol=1e-5, atol=1e-6)
    assert torch.allclose(gb, r.sum(dim=(0, 2, 3) if kind == "conv" else 0).to(gb.dtype))


@pytest.mark.parametrize("kind", ["conv", "linear"])
@pytest.mark.parametrize("signed", [False, True])
def test_custom_backward_runs(kind, signed):
    """Exact multiplier: table == table2d == ste; DRUM: they differ (the formula is applied)."""
    suffix = ",signed=1" if signed else ""
    grads = {g: _grads(*_layer(kind, "exact:bits=8" + suffix, g))[:3] for g in ("ste", "table", "table2d")}
    for g in ("table", "table2d"):
        for a, b in zip(grads["ste"], grads[g]):
            torch.testing.assert_close(a.double(), b.double(), rtol=1e-6, atol=1e-6)
    drum = {g: _grads(*_layer(kind, "drum:k=3" + suffix, g))[:3] for g in ("ste", "table", "table2d")}
    for g in ("table", "table2d"):
        assert (drum["ste"][0] - drum[g][0]).abs().max() > 1e-3
        assert (drum["ste"][1] - drum[g][1]).abs().max() > 1e-3


def test_folded_batchnorm_gets_gradients():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU())
    with torch.no_grad():
        net[1].running_mean.uniform_(-0.5, 0.5)
        net[1].running_var.uniform_(0.5, 2)
        net[1].weight.uniform_(0.5, 1.5)
    net.eval()
    x = torch.randn(4, 2, 6, 6)
    approx = approximate(net, "exact", calibration=[x])
    assert type(approx[1]).__name__ == "FoldedBatchNorm2d"
    y = approx(x)
    y.sum().backward()
    for p in (approx[0].weight, approx[0].bias, approx[1].weight, approx[1].bias):
        assert p.grad is not None and p.grad.abs().sum() > 0


def test_none_keeps_no_graph_and_training_requantizes():
    approx, x = _layer("conv", "drum:k=4", "none")
    y = approx(x.requires_grad_(True))
    assert not y.requires_grad
    approx, x = _layer("conv", "drum:k=4", "ste")
    layer = approx[0]
    with torch.no_grad():
        before = approx(x)
    q1 = layer.quantized(False)
    assert layer.quantized(False) is q1                    # cached between calls
    opt = torch.optim.SGD(approx.parameters(), lr=0.5)
    approx(x).pow(2).sum().backward()
    opt.step()                                             # in-place: version counters move
    with torch.no_grad():
        after = approx(x)
    assert layer.quantized(False) is not q1
    assert not torch.equal(before, after)


def test_torch_compile_and_export():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 6 * 6, 3))
    x = torch.rand(8, 1, 8, 8)
    approx = approximate(net, "drum:k=4", calibration=[x])
    expected = approx(x)
    compiled = torch.compile(approx, backend="aot_eager", fullgraph=True)
    y = compiled(x)
    torch.testing.assert_close(y, expected, rtol=0, atol=0)
    y.sum().backward()
    assert approx[0].weight.grad is not None
    exported = torch.export.export(approx, (x,))
    ops = [n.target for n in exported.graph.nodes if n.op == "call_function"]
    assert sum(1 for op in ops if "approxmul" in str(op)) == 2
    with torch.no_grad():
        torch.testing.assert_close(exported.module()(x), expected.detach(), rtol=0, atol=0)
    # a batch dimension left dynamic (the conv's output shape once fixed it)
    batch = torch.export.Dim("batch")
    dynamic = torch.export.export(approx, (x,), dynamic_shapes=({0: batch},))
    with torch.no_grad():
        for n in (3, 17):
            xi = torch.rand(n, 1, 8, 8)
            torch.testing.assert_close(dynamic.module()(xi), approx(xi), rtol=0, atol=0)


@pytest.mark.parametrize("gradient", ["ste", "table"])
def test_compiled_training_step_equals_eager(gradient):
    # AOT autograd traces the backward too: it must stay one opaque operator
    # (it read the layer's real parameters under fake tensors before)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 6 * 6, 3))
    x = torch.rand(8, 1, 8, 8)
    approx = approximate(net, "drum:k=4", calibration=[x], gradient=gradient)
    twin = copy.deepcopy(approx)
    xe = x.clone().requires_grad_()
    twin(xe).pow(2).sum().backward()
    compiled = torch.compile(approx, backend="aot_eager", fullgraph=True)
    xc = x.clone().requires_grad_()
    compiled(xc).pow(2).sum().backward()
    torch.testing.assert_close(xc.grad, xe.grad, rtol=0, atol=0)
    for (name, p), q in zip(approx.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=0, msg=name)


def test_state_dict_round_trip():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3)).eval()
    x = torch.rand(8, 1, 8, 8)
    approx = approximate(net, "drum:k=4", calibration=[x])
    with torch.no_grad():
        approx[0].weight.mul_(1.1)
    state = approx.state_dict()
    assert list(state) == list(net.state_dict())
    fresh = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3)).eval()
    fresh.load_state_dict(state)
    again = approximate(fresh, "drum:k=4", calibration=[x])
    recalibrate(approx, [x])   # calibrated on the changed weights, as `again` is
    with torch.no_grad():
        torch.testing.assert_close(again(x), approx(x), rtol=0, atol=0)


def test_deepcopy_is_an_independent_layer():
    import copy
    approx, x = _layer("conv", "drum:k=4", "ste")
    twin = copy.deepcopy(approx)
    assert twin[0].q_key != approx[0].q_key and twin[0].q_multiplier is approx[0].q_multiplier
    with torch.no_grad():
        torch.testing.assert_close(twin(x), approx(x), rtol=0, atol=0)
        twin[0].weight.mul_(0.5)
        assert not torch.equal(twin(x), approx(x))
