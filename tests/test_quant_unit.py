"""approxmul_cffi.quant: quantization, calibration, BN folding, requantization."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nn_reference as ref
import approxmul_cffi as am
from approxmul_cffi import nn, quant

finite = st.floats(-1e3, 1e3, allow_nan=False)


@given(lo=finite, hi=finite, signed=st.booleans(), symmetric=st.booleans(),
       values=st.lists(st.floats(0, 1), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_round_trip_error_is_at_most_half_a_step(lo, hi, signed, symmetric, values):
    lo, hi = min(lo, hi), max(lo, hi)
    qp = quant.choose_qparams(lo, hi, signed=signed, symmetric=symmetric)
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    x = lo + np.array(values) * (hi - lo)
    codes = qp.quantize(x)
    assert codes.dtype == (np.int8 if signed else np.uint8)
    assert np.all(np.abs(qp.dequantize(codes) - x) <= qp.scale * 0.5 * (1 + 1e-9))
    assert qp.dequantize(qp.quantize(0.0)) == 0.0  # real zero is exact (padding, ReLU)


@given(codes=st.lists(st.integers(0, 255), min_size=1, max_size=50), zp=st.integers(0, 255),
       scale=st.floats(1e-4, 10))
def test_domain_conversion_is_exact(codes, zp, scale):
    u = np.array(codes, dtype=np.uint8)
    qu = quant.QParams(scale, zp, signed=False)
    s = quant.convert_codes(u, signed=True)
    qs = qu.to_domain(signed=True)
    assert s.dtype == np.int8 and int(qs.zero_point) == zp - 128
    np.testing.assert_array_equal(s.astype(int), u.astype(int) - 128)
    np.testing.assert_array_equal(qs.dequantize(s), qu.dequantize(u))
    np.testing.assert_array_equal(quant.convert_codes(s, signed=False), u)


def test_per_channel_symmetric_weights_use_each_channels_range():
    w = np.array([[0.5, -1.0, 0.25], [4.0, 2.0, -3.0]])
    codes, qp = quant.quantize_weight(w, signed=True, per_channel=True)
    np.testing.assert_allclose(qp.scale, [1.0 / 127, 4.0 / 127])
    assert qp.axis == 0 and qp.zero_point.tolist() == [0, 0]
    assert codes.tolist() == [[64, -127, 32], [127, 64, -95]]
    codes, qp = quant.quantize_weight(w, signed=False, per_channel=True)
    assert qp.zero_point.tolist() == [128, 128] and codes.min() >= 1  # narrow 1..255
    codes, qp = quant.quantize_weight(w, signed=False, per_channel=False, symmetric=False)
    assert qp.axis is None and codes.min() == 0 and codes.max() == 255


def test_a_minimum_scale_bounds_each_channel_from_below():
    """min_scale raises only the scales below it; per tensor, its largest value."""
    w = np.array([[0.5, -1.0], [4.0, 2.0], [1e-35, -1e-36]])
    floor = np.array([0.5 / 127, 0.0, 1e-3])
    codes, qp = quant.quantize_weight(w, signed=True, per_channel=True, min_scale=floor)
    np.testing.assert_allclose(qp.scale, [1.0 / 127, 4.0 / 127, 1e-3])
    assert codes.tolist() == [[64, -127], [127, 64], [0, 0]]
    _, qp = quant.quantize_weight(w, signed=True, per_channel=False, min_scale=floor)
    assert float(qp.scale) == 4.0 / 127  # the whole tensor's range is wider
    _, qp = quant.quantize_weight(w, signed=False, per_channel=False, symmetric=False,
                                  min_scale=[0.1, 0.0, 0.0])
    assert float(qp.scale) == 0.1 and int(qp.zero_point) == 10  # -1.0 at code 0


def test_a_channel_of_near_zero_weights_keeps_its_bias_in_int32():
    """A channel whose weights are 1e-35 (a dead unit of a trained network):
    per channel its weight scale alone would put the bias at about 1e33
    accumulator units. The scale is raised until the bias fits int32; the
    channel's weights take code 0 and its outputs are its bias, the other
    channels keep their own scales."""
    layer = nn.Linear(3, 2)
    weight = np.array([[1e-35, -2e-35, 1e-35], [0.5, -0.25, 1.0]])
    bias = np.array([0.3, 0.1])
    in_qp = quant.choose_qparams(-1.0, 1.0, signed=False)
    out_qp = quant.choose_qparams(-2.0, 2.0, signed=False)
    with pytest.raises(quant.AccumulatorOverflowError):  # what the weights' own scale gives
        quant.quantize_bias(bias, in_qp.scale,
                            quant.quantize_weight(weight, signed=True)[1].scale)
    node = nn.QuantizedLayer(layer, weight, bias, in_qp, out_qp)
    prepared = node.prepare(True)
    assert prepared.codes[0].tolist() == [0, 0, 0]
    np.testing.assert_allclose(prepared.qparams.scale[1], 1.0 / 127)
    x = np.array([[0.5, -1.0, 0.25], [-0.75, 0.5, 1.0]])
    codes = in_qp.to_domain(True).quantize(x)
    got = out_qp.to_domain(True).dequantize(node.forward_codes(codes, am.Multiplier.exact(8, True)))
    want = x @ weight.T + bias
    np.testing.assert_allclose(got, want, atol=2 * float(out_qp.scale) + 2 * float(in_qp.scale))
    assert np.all(np.abs(got[:, 0] - 0.3) <= float(out_qp.scale))


def test_asymmetric_per_channel_weights_are_refused_by_the_config():
    with pytest.raises(ValueError, match="symmetric"):
        quant.QuantConfig(unsigned_per_channel=True, unsigned_symmetric=False)


def test_percentile_calibration_clips_outliers():
    x = np.concatenate([np.linspace(-1, 1, 10001), [100.0]])
    assert quant.observe_range(x) == (-1.0, 100.0)
    lo, hi = quant.observe_range(x, method="percentile", percentile=99.9)
    assert -1.0 < lo < -0.99 and 0.99 < hi < 1.0
    with pytest.raises(ValueError, match="unknown calibration"):
        quant.observe_range(x, method="mse")
    with pytest.raises(ValueError, match="NaN"):
        quant.observe_range(np.array([1.0, np.nan]))


def test_batchnorm_folding_equals_unfolded_conv():
    rng = np.random.default_rng(0)
    conv = nn.Conv2d(3, 4, 3, stride=2, padding=1, weight=rng.normal(size=(4, 3, 3, 3)),
                     bias_value=rng.normal(size=4))
    bn = nn.BatchNorm2d(4, eps=1e-3, weight=rng.uniform(0.5, 2, 4), bias=rng.normal(size=4),
                        running_mean=rng.normal(size=4), running_var=rng.uniform(0.1, 3, 4))
    x = rng.normal(size=(2, 3, 9, 9))
    w, b = quant.fold_batchnorm(conv.weight, conv.bias, bn.weight, bn.bias,
                                bn.running_mean, bn.running_var, bn.eps)
    folded = nn.Conv2d(3, 4, 3, stride=2, padding=1, weight=w, bias_value=b)
    np.testing.assert_allclose(folded.forward(x), bn.forward(conv.forward(x)), atol=1e-5)
    with pytest.raises(ValueError, match="channels"):
        quant.fold_batchnorm(conv.weight, None, *(np.ones(3),) * 4)


@given(real=st.floats(1e-9, 2.0**29))
def test_quantized_multiplier_represents_the_factor(real):
    m, s = quant.quantize_multiplier(real)
    assert 2**30 <= int(m) < 2**31
    assert abs(int(m) * 2.0 ** (int(s) - 31) - real) <= real * 2.0**-30
    assert (int(m), int(s)) == ref.quantize_multiplier(real)


@given(x=st.integers(-2**31, 2**31 - 1), real=st.floats(1e-7, 0.999))
@settings(max_examples=300)
def test_requantization_matches_gemmlowp_and_float_within_one(x, real):
    m, s = quant.quantize_multiplier(real)
    got = int(quant.multiply_by_quantized_multiplier(np.array([x]), m, s)[0])
    assert got == ref.gemmlowp_scale(x, int(m), int(s))
    assert abs(got - x * real) <= 1 + abs(x * real) * 2.0**-29
    single = int(quant.multiply_by_quantized_multiplier(np.array([x]), m, s, "single")[0])
    assert abs(single - x * real) <= 1 + abs(x * real) * 2.0**-29


def test_gemmlowp_rounding_cases():
    m, s = quant.quantize_multiplier(0.25)
    x = np.array([-7, -6, -2, 2, 6, 7])
    # -1.5 -> -2 and 1.5 -> 2 (ties away from zero), -0.5 -> -1, 0.5 -> 1
    assert quant.multiply_by_quantized_multiplier(x, m, s).tolist() == [-2, -2, -1, 1, 2, 2]
    # single rounding rounds ties up: -1.5 -> -1, -0.5 -> 0
    assert quant.multiply_by_quantized_multiplier(x, m, s, "single").tolist() == [-2, -1, 0, 1, 2, 2]


@given(acc=st.lists(st.integers(-2**24, 2**24), min_size=2, max_size=2),
       bias=st.integers(-2**20, 2**20), real=st.floats(1e-6, 0.5),
       zp=st.integers(-128, 127))
def test_requantize_close_to_float_reference(acc, bias, real, zp):
    m, s = quant.quantize_multiplier(real)
    acc = np.array([acc])
    got = quant.requantize(acc, np.array([bias, bias]), m, s, zp, -128, 127, signed=True)
    want = np.clip(np.round((acc + bias) * real) + zp, -128, 127)
    assert got.dtype == np.int8
    assert np.all(np.abs(got.astype(int) - want) <= 1)


def test_requantize_per_channel_and_fused_activations():
    acc = np.array([[[100], [100]], [[-300], [900]]])  # (N=2, C=2, 1)
    m, s = quant.quantize_multiplier(np.array([0.1, 0.01]))
    out = quant.requantize(acc, np.array([0, 50]), m, s, 10, 0, 255, signed=False)
    assert out[..., 0].tolist() == [[20, 12], [0, 20]]
    qp = quant.choose_qparams(-1.0, 6.5, signed=False)
    lo, hi = quant.activation_bounds(qp, "relu6")
    assert qp.dequantize(lo) == 0.0 and abs(qp.dequantize(hi) - 6.0) <= qp.scale / 2


def test_accumulators_saturate_to_int32():
    m, s = quant.quantize_multiplier(0.5)
    big = np.array([2**40, -2**40])
    assert quant.multiply_by_quantized_multiplier(big, m, s).tolist() == [2**30, -2**30]


def test_invalid_parameters_are_reported():
    with pytest.raises(ValueError, match="positive"):
        quant.QParams(0.0, 0, signed=True)
    with pytest.raises(ValueError, match="outside"):
        quant.QParams(1.0, 200, signed=True)
    with pytest.raises(ValueError, match="int32"):
        quant.quantize_bias(np.array([1e12]), 1e-3, 1e-3)
    with pytest.raises(ValueError, match="rounding"):
        quant.multiply_by_quantized_multiplier(1, 2**30, 0, "banker")
