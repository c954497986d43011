"""approxmul_cffi.torch refuses what it cannot approximate, with errors that say what to do."""

import pytest
import torch

from approxmul_cffi.torch import ApproximationError, approximate


def _net(**conv):
    side = 4 + 2 * conv.get("padding", 0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, **conv), torch.nn.Flatten(),
                               torch.nn.Linear(2 * side * side, 3))


CAL = [torch.rand(4, 1, 6, 6)]


def test_device_is_named():
    approx = approximate(_net(), "drum:k=4", calibration=CAL)
    with pytest.raises(ApproximationError, match=r"device meta.*CPU.*model.cpu\(\)"):
        approx(torch.rand(2, 1, 6, 6, device="meta"))
    with pytest.raises(ApproximationError, match="device meta"):
        approximate(_net(), "drum:k=4", calibration=[torch.rand(2, 1, 6, 6, device="meta")])


def test_unsupported_layer_is_named():
    with pytest.raises(ApproximationError, match=r"layer '0'.*padding_mode='reflect'"):
        approximate(_net(padding=1, padding_mode="reflect"), "drum:k=4", calibration=CAL)
    # leaving it out of the mapping works
    approx = approximate(_net(padding=1, padding_mode="reflect"), {"2": "drum:k=4"}, calibration=CAL)
    assert type(approx[0]) is torch.nn.Conv2d
    approx = approximate(_net(), "drum:k=4", calibration=CAL)
    with pytest.raises(ApproximationError, match="layer '0'.*dtype torch.int32"):
        approx(torch.zeros(2, 1, 6, 6, dtype=torch.int32))


def test_wide_multiplier_and_unknown_names():
    # one model, one width: the multipliers' own, or the scheme's
    with pytest.raises(ApproximationError, match=r"layer '0'.*8-bit codes.*16-bit"):
        approximate(_net(), {"0": "exact:bits=16", "2": "drum:k=4"}, calibration=CAL)
    with pytest.raises(ApproximationError, match=r"layer '0'.*4-bit codes.*8-bit"):
        approximate(_net(), "drum:k=4", calibration=CAL, scheme={"bits": 4})
    with pytest.raises(ApproximationError, match=r"at most 12 bits, the layers have 16"):
        approximate(_net(), "exact:bits=16", calibration=CAL, gradient="table")
    wide = approximate(_net(), "exact:bits=16", calibration=CAL)   # "ste": any width
    assert wide[0].q_node.in_qparams.qmax == 65535 and wide[0].code_dtype == torch.uint16
    with pytest.raises(ApproximationError, match=r"'features\.\*'.*layers: 0, 2"):
        approximate(_net(), {"features.*": "drum:k=4"}, calibration=CAL)
    with pytest.raises(ApproximationError, match="gradient"):
        approximate(_net(), "exact", calibration=CAL, gradient="magic")


def test_nan_and_inf_are_refused():
    bad = torch.rand(4, 1, 6, 6)
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ApproximationError, match="calibration batch contains NaN"):
        approximate(_net(), "exact", calibration=[bad])
    approx = approximate(_net(), "exact", calibration=CAL)
    bad[0, 0, 0, 0] = float("inf")
    with pytest.raises(ApproximationError, match="layer '0'.*NaN or infinity"):
        approx(bad)
    with pytest.raises(ApproximationError, match="empty"):
        approximate(_net(), "exact", calibration=[])


def test_shape_change_after_calibration():
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(2, 3))
    approx = approximate(net, "drum:k=4", calibration=CAL)
    with pytest.raises(ApproximationError, match=r"layer '0'.*\(1, 6, 6\).*\(1, 9, 9\)"):
        approx(torch.rand(2, 1, 9, 9))


def test_no_approximable_layer():
    with pytest.raises(ApproximationError, match="no Conv1d, Conv2d or Linear"):
        approximate(torch.nn.Sequential(torch.nn.ReLU()), "exact", calibration=CAL)


class _ScaledLinear(torch.nn.Linear):
    def forward(self, x):
        return super().forward(x) * 3 + 1


class _StandardizedConv(torch.nn.Conv2d):
    def _conv_forward(self, x, weight, bias):
        w = (weight - weight.mean()) / weight.std()
        return super()._conv_forward(x, w, bias)


class _NamedConv(torch.nn.Conv2d):
    """A subclass that changes no computation: approximated as its base."""


def test_subclasses_that_compute_otherwise_are_refused():
    x = torch.rand(4, 1, 6, 6)
    net = torch.nn.Sequential(_StandardizedConv(1, 2, 3), torch.nn.Flatten(), _ScaledLinear(32, 3))
    with pytest.raises(ApproximationError, match=r"layer '0' \(_StandardizedConv\) overrides "
                                                 r"Conv2d._conv_forward"):
        approximate(net, "exact", calibration=[x])
    with pytest.raises(ApproximationError, match=r"layer '2' \(_ScaledLinear\) overrides "
                                                 r"Linear.forward.*leave the layer out"):
        approximate(net, {"2": "exact"}, calibration=[x])
    net[0] = _NamedConv(1, 2, 3)
    approx = approximate(net, {"0": "exact"}, calibration=[x])
    assert isinstance(approx[0], _NamedConv) and type(approx[0]).__name__ == "Approx_NamedConv"
    assert type(approx[2]) is _ScaledLinear  # left float, as mapped


def test_an_approximated_model_is_refused_clearly():
    approx = approximate(_net(), "exact", calibration=CAL)
    with pytest.raises(ApproximationError, match="already has approximate layers.*float model"):
        approximate(approx, "drum:k=3", calibration=CAL)


def test_linear_takes_any_leading_sizes():
    # a sequence model: calibrated on lengths 7 and 3, used on 9 and trained on 3-D inputs
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 4))
    approx = approximate(net, "exact", calibration=[torch.randn(5, 7, 8), torch.randn(5, 3, 8)])
    x = torch.randn(5, 9, 8, requires_grad=True)
    y = approx(x)
    assert y.shape == (5, 9, 4)
    (y * torch.arange(4.0)).sum().backward()
    xf = x.detach().clone().requires_grad_()
    (net(xf) * torch.arange(4.0)).sum().backward()
    assert (x.grad - xf.grad).abs().max() < 0.05 * xf.grad.abs().max()
    bias_grad = approx[0].bias.grad
    np_expected = torch.arange(4.0) * 5 * 9  # every (batch, position) adds the output weight
    assert torch.allclose(bias_grad, np_expected)
    with pytest.raises(ApproximationError, match=r"layer '0' takes 8 input features.*\(5, 9, 6\)"):
        approx(torch.randn(5, 9, 6))


def test_calibration_and_mapping_mistakes_are_explained():
    x = torch.rand(4, 1, 6, 6)
    with pytest.raises(ApproximationError, match=r"mapping is empty.*layers: 0, 2"):
        approximate(_net(), {}, calibration=CAL)
    with pytest.raises(ApproximationError, match=r"batches are dicts \(keys 'image'\)"):
        approximate(_net(), "exact", calibration=[{"image": x}])
    # a second shape the model cannot take: its own error, named as calibration's
    with pytest.raises(ApproximationError, match=r"fails on the calibration data \(samples of "
                                                 r"shape \(1, 7, 7\)"):
        approximate(_net(), "exact", calibration=[x, torch.rand(4, 1, 7, 7)])
    # a list of unbatched samples: the model's own error, named as calibration's
    with pytest.raises(ApproximationError, match=r"fails on the calibration data.*\(6, 6\).*"
                                                 r"RuntimeError"):
        approximate(_net(), "exact", calibration=[[x[0], x[1]]])


def test_pickling_an_approximated_model_says_what_to_do():
    import io
    approx = approximate(_net(), "exact", calibration=CAL)
    with pytest.raises(ApproximationError, match="cannot be pickled.*state_dict"):
        torch.save(approx, io.BytesIO())
    buffer = io.BytesIO()
    torch.save(approx.state_dict(), buffer)  # what it says works
    buffer.seek(0)
    float_net = _net()
    float_net.load_state_dict(torch.load(buffer))  # the float model's keys
    fresh = approximate(float_net, "exact", calibration=CAL)
    with torch.no_grad():
        assert torch.equal(fresh(CAL[0]), approx(CAL[0]))


class _SharedConv(torch.nn.Module):
    """One conv called on the image and on a crop of it."""

    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x):
        whole, crop = self.c(x), self.c(x[:, :, :4, :4])
        return self.fc(whole.mean((2, 3)) + crop.mean((2, 3)))


def test_a_layer_called_at_several_shapes_takes_each():
    torch.manual_seed(0)
    net = _SharedConv()
    x = torch.randn(8, 2, 7, 7)
    approx = approximate(net, "exact", calibration=[x])
    assert approx.c.q_sample_shapes == ((2, 4, 4), (2, 7, 7))
    with torch.no_grad():
        assert (approx(x) - net(x)).abs().max() < 0.05 * net(x).abs().max()
    with pytest.raises(ApproximationError, match=r"shape \(2, 4, 4\) or \(2, 7, 7\), got "
                                                 r"\(2, 9, 9\)"):
        approx(torch.randn(2, 2, 9, 9))


def test_a_shallow_copy_is_a_layer_of_its_own():
    import copy
    approx = approximate(_net(), "exact", calibration=CAL)
    layer = copy.copy(approx[0])
    assert layer.q_key != approx[0].q_key and layer.weight is approx[0].weight
    with torch.no_grad():
        assert torch.equal(layer(CAL[0]), approx[0](CAL[0]))
