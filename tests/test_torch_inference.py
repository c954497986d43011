"""Eager inference through an approximate layer's bound C call: the same bits
as the general path (integer_forward), one binding per input layout, and a
new binding whenever the parameters, the layout or the model copy change."""

import copy

import numpy as np
import pytest
import torch

from approxmul_cffi.torch import ApproximationError, approximate


def conv_model(spec="drum:k=4,signed=1", seed=0):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 5, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(5, 4, 3, stride=2)).eval()
    calibration = [torch.randn(4, 3, 10, 10) * 2 for _ in range(2)]
    return approximate(net, spec, calibration=calibration, gradient="none")


def bound_conv_layer():
    """conv_model's first layer, bound to a (4, 3, 10, 10) float32 input; and that input."""
    layer = conv_model()[0]
    x = torch.randn(4, 3, 10, 10)
    with torch.no_grad():
        layer(x)
    assert layer._q_bound is not None
    return layer, x


def general_path(layer, x):
    """The layer's output through integer_forward (quantize, then the codes' call)."""
    return layer.integer_forward(x, with_codes=True)[0]


@pytest.mark.parametrize("spec", ["exact", "drum:k=4,signed=1", "truncated:bits=8,cut=6"])
def test_bound_call_equals_the_general_path_and_is_made_once_per_layout(spec):
    model = conv_model(spec)
    layer = model[0]
    x = torch.randn(4, 3, 10, 10) * 2
    with torch.no_grad():
        y = layer(x)
        bound = layer._q_bound
        assert bound is not None and y.dtype == torch.float32
        torch.testing.assert_close(y, general_path(layer, x), rtol=0, atol=0)
        for seed in range(3):  # the same layout: the same binding
            other = torch.randn(4, 3, 10, 10, generator=torch.Generator().manual_seed(seed))
            assert torch.equal(layer(other), general_path(layer, other))
            assert layer._q_bound is bound
        assert len(torch.unique(y)) > 20
        # another batch size, channels-last, float64: each binds anew, same bits
        for z in (x[:1].clone(), x.contiguous(memory_format=torch.channels_last), x.double()):
            out = layer(z)
            assert layer._q_bound is not bound and out.dtype == z.dtype
            assert torch.equal(out, general_path(layer, z))
            bound = layer._q_bound


@pytest.mark.parametrize("spec", ["exact", "drum:k=3,signed=1"])
def test_linear_and_conv1d_bind_their_calls_too(spec):
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Conv1d(3, 6, 5, padding=2, stride=2), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(6 * 8, 10)).eval()
    model = approximate(net, spec, calibration=[torch.randn(8, 3, 16) * 2],
                        gradient="none")
    x = torch.randn(5, 3, 16) * 2
    with torch.no_grad():
        for layer, z in ((model[0], x), (model[3], torch.randn(5, 48) * 3),
                         (model[3], torch.randn(2, 3, 48, dtype=torch.float64))):
            out = layer(z)
            assert layer._q_bound is not None and out.dtype == z.dtype
            want = general_path(layer, z)
            assert out.shape == want.shape and torch.equal(out, want)
            assert len(torch.unique(out)) > 10
        v = torch.randn(48, generator=torch.Generator().manual_seed(0)) * 3
        single = model[3](v)  # one sample, no batch axis: as torch's Linear takes it
        assert single.shape == (10,) and torch.equal(single, general_path(model[3], v))
        y = model(x)
        assert torch.equal(y, general_path(model[3], torch.relu(general_path(model[0], x)).flatten(1)))


def test_layouts_and_types_the_call_does_not_take_use_the_general_path():
    layer, x = bound_conv_layer()
    bound = layer._q_bound
    with torch.no_grad():
        for z in (torch.randn(4, 3, 10, 20)[:, :, :, ::2],  # strided: not dense
                  x.to(torch.bfloat16), x[:0]):
            out = layer(z)
            assert torch.equal(out, layer.integer_forward(z, with_codes=False)[0])
        assert layer._q_bound is bound  # left as it was


def test_parameter_changes_rebind_the_call():
    model = conv_model()
    layer = model[0]
    x = torch.randn(4, 3, 10, 10)
    with torch.no_grad():
        before = layer(x)
        bound = layer._q_bound
        layer.weight.mul_(0.5)  # in place: a new version of the same tensor
        after = layer(x)
        assert layer._q_bound is not bound
        assert not torch.equal(after, before)
        assert torch.equal(after, general_path(layer, x))
        layer.weight = torch.nn.Parameter(layer.weight * 2)  # another tensor
        assert torch.equal(layer(x), general_path(layer, x))
        torch.testing.assert_close(layer(x), before, rtol=0, atol=0)


def test_copies_bind_their_own_call():
    model = conv_model()
    x = torch.randn(4, 3, 10, 10)
    with torch.no_grad():
        want = model(x)
        twin, shallow = copy.deepcopy(model), copy.copy(model[0])
        assert twin[0]._q_bound is None and shallow._q_bound is None
        twin[0].weight.mul_(-1.0)
        assert torch.equal(model(x), want)
        assert not torch.equal(twin(x), want)
        assert torch.equal(twin[0](x), general_path(twin[0], x))


def test_nonfinite_input_and_wrong_shapes_are_refused_on_the_bound_path():
    layer, x = bound_conv_layer()
    with torch.no_grad():
        bad = x.clone()
        bad[2, 1, 3, 4] = float("nan")
        with pytest.raises(ApproximationError, match="NaN or infinity"):
            layer(bad)
        bad[2, 1, 3, 4] = float("inf")
        with pytest.raises(ApproximationError, match="NaN or infinity"):
            layer(bad)
        with pytest.raises(ApproximationError, match="calibrated on per-sample inputs"):
            layer(torch.randn(4, 3, 12, 10))
        with pytest.raises(ApproximationError, match="floating-point"):
            layer(torch.zeros(4, 3, 10, 10, dtype=torch.int32))
        assert torch.equal(layer(x), general_path(layer, x))  # still bound and right


def test_whole_model_output_equals_the_general_path_layer_by_layer():
    model = conv_model("drum:k=3")
    x = torch.randn(4, 3, 10, 10) * 2
    with torch.no_grad():
        got = model(x)
        h = general_path(model[0], x)
        want = general_path(model[2], torch.relu(h))
    assert torch.equal(got, want)
    assert np.isfinite(got.numpy()).all()
