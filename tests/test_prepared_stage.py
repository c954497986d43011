"""The prepared layer calls (layer_calls.Conv2dRequantizer, layer_calls.LinearRequantizer)
and the one a QuantizedLayer keeps, against other paths to the same bits."""

import copy
import pickle

import numpy as np
import pytest

import approxmul_cffi as am
from approxmul_cffi import layer_calls, nn, quant
from approxmul_cffi.errors import ApproxmulError
from kernel_cases import drum_table


def stage_arguments(rng, channels):
    mantissa, shift = quant.quantize_multiplier(np.exp2(rng.uniform(-14, -8, channels)))
    return (rng.integers(-3000, 3000, channels).astype(np.int32), mantissa, shift, 7, 0, 255)


@pytest.mark.parametrize("real", [None, (0.05, np.float32), (0.05, np.float64)])
def test_prepared_call_equals_the_one_shot_call_on_every_input_shape(real):
    rng = np.random.default_rng(5)
    m = am.Multiplier.from_table(drum_table())
    w = rng.integers(0, 256, (6, 4, 3, 3)).astype(np.uint8)
    stage = stage_arguments(rng, 6)
    geometry = dict(stride=(1, 2), padding=1, x_zero_point=3, w_zero_point=1)
    prepared = layer_calls.Conv2dRequantizer(w, m, *stage, **geometry, real=real)

    def two_calls(x):  # conv2d's accumulators, then the requantization: another C path
        return quant.requantize(am.conv2d(x, w, m, **geometry), *stage, signed=False, real=real)

    for shape in [(2, 4, 9, 9), (1, 4, 5, 12), (2, 4, 9, 9), (3, 4, 1, 1)]:
        x = rng.integers(0, 256, shape).astype(np.uint8)
        want = two_calls(x)
        got = prepared(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(quant.conv2d_requantize(x, w, m, *stage, **geometry,
                                                              real=real), want)
    # a strided view of x goes in without a copy
    x = rng.integers(0, 256, (2, 8, 9, 9)).astype(np.uint8)[:, ::2]
    np.testing.assert_array_equal(prepared(x), two_calls(x))


def test_prepared_call_refuses_bad_input_and_bad_stage_arguments():
    rng = np.random.default_rng(6)
    w = rng.integers(0, 256, (2, 3, 1, 1)).astype(np.uint8)
    prepared = layer_calls.Conv2dRequantizer(w, am.Multiplier.exact(8), *stage_arguments(rng, 2))
    with pytest.raises(ApproxmulError, match="channel"):
        prepared(np.zeros((1, 4, 2, 2), np.uint8))
    assert prepared(np.zeros((1, 3, 2, 2), np.uint8)).shape == (1, 2, 2, 2)
    # bad stage arguments fail at construction, naming the argument
    with pytest.raises(ApproxmulError, match="bias"):
        layer_calls.Conv2dRequantizer(w, am.Multiplier.exact(8), [1, 2, 3], *stage_arguments(rng, 2)[1:])
    linear = layer_calls.LinearRequantizer(w[:, :, 0, 0], am.Multiplier.exact(8), *stage_arguments(rng, 2))
    with pytest.raises(ApproxmulError, match=r"\(\.\.\., 3\)"):
        linear(np.zeros((2, 4), np.uint8))
    with pytest.raises(ApproxmulError, match="dtype"):
        linear(np.zeros((2, 3), np.float32))


def test_prepared_calls_copy_pickle_and_check_their_geometry_in_the_library():
    rng = np.random.default_rng(8)
    m = am.Multiplier.from_spec("drum:k=4")
    w = rng.integers(0, 256, (3, 2, 3, 3)).astype(np.uint8)
    stage = stage_arguments(rng, 3)
    conv = layer_calls.Conv2dRequantizer(w, m, *stage, padding=1, real=(0.05, np.float32))
    # weights of other strides (which a deep copy or pickle makes dense)
    strided = layer_calls.Conv2dRequantizer(w[:, ::-1], m, *stage, padding=1)
    linear = layer_calls.LinearRequantizer(w[:, :, 0, 0], m, *stage)
    x = rng.integers(0, 256, (2, 2, 5, 5)).astype(np.uint8)
    for prepared, xs in ((conv, x), (strided, x), (linear, x[:, :, 0, 0])):
        want = prepared(xs)  # its C arrays made: copies and pickles make their own
        for twin in (copy.copy(prepared), copy.deepcopy(prepared),
                     pickle.loads(pickle.dumps(prepared))):
            np.testing.assert_array_equal(twin(xs), want)
    # the stage's arrays are the layer's own: changing the caller's later changes nothing
    bias = stage[0].copy()
    own = layer_calls.Conv2dRequantizer(w, m, bias, *stage[1:], padding=1)
    before = own(x)
    bias += 1000
    np.testing.assert_array_equal(own(x), before)
    # a stride no int64 holds is the library's argument error, not Python's OverflowError
    for bad in (dict(stride=2**63), dict(padding=(0, -2**63 - 1)), dict(dilation=2**70)):
        with pytest.raises(ApproxmulError):
            layer_calls.conv2d_requantize(x, w, m, *stage, **bad)


@pytest.mark.parametrize("real", [None, (0.05, np.float32), (0.05, np.float64)])
@pytest.mark.parametrize("signed", [False, True])
def test_prepared_linear_equals_linear_then_requantize(real, signed):
    rng = np.random.default_rng(8)
    m = am.multiplier("drum:k=4") if not signed else am.Multiplier.exact(8, signed=True)
    lo, hi = quant.code_range(signed)
    dtype = np.int8 if signed else np.uint8
    w = rng.integers(lo, hi + 1, (5, 37)).astype(dtype)
    bias, mantissa, shift, _, _, _ = stage_arguments(rng, 5)
    stage = (bias, mantissa, shift, -3 if signed else 9, lo + 2, hi)
    zx, zw = (-4, 2) if signed else (4, 2)
    prepared = layer_calls.LinearRequantizer(w, m, *stage, x_zero_point=zx, w_zero_point=zw, real=real)
    for shape in [(6, 37), (37,), (2, 3, 37), (0, 37)]:
        x = rng.integers(lo, hi + 1, shape).astype(dtype)
        acc = am.linear(x, w, m, x_zero_point=zx, w_zero_point=zw)
        want = quant.requantize(acc, *stage, axis=-1, signed=signed, real=real)
        got = prepared(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("real", [np.float32, np.float64])
@pytest.mark.parametrize("signed", [False, True])
def test_bound_linear_equals_quantize_then_the_stage(real, signed):
    """LinearRequantizer.bind_real: quantize, matmul and output stage as three C calls on
    arguments converted once, the bits of quantizing first; a refused input writes nothing."""
    from approxmul_cffi._library import ffi
    from approxmul_cffi.errors import InvalidArgumentError, ShapeError
    rng = np.random.default_rng(9)
    m = am.multiplier("drum:k=4,signed=1" if signed else "drum:k=4")
    lo, hi = quant.code_range(signed)
    w = rng.integers(lo, hi + 1, (5, 37)).astype(np.int8 if signed else np.uint8)
    bias, mantissa, shift, _, _, _ = stage_arguments(rng, 5)
    zx = -4 if signed else 124
    prepared = layer_calls.LinearRequantizer(w, m, bias, mantissa, shift, 7, lo + 2, hi,
                                             x_zero_point=zx, w_zero_point=2, real=(0.05, real))
    grid = quant.QParams(0.03, zx, signed)
    for shape in [(6, 37), (37,), (2, 3, 37), (0, 37)]:
        x = rng.normal(0, 2, shape).astype(real)
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        out_shape, call = prepared.bind_real(real, shape, strides, 0.03, lo, hi, grid.dtype)
        out = np.full(out_shape, 7.5, real)
        call(ffi.from_buffer(x), ffi.from_buffer(out, require_writable=True))
        want = prepared(grid.quantize(x, finite=True))
        assert out.shape == want.shape
        np.testing.assert_array_equal(out, want)
        assert out.size <= 5 or len(np.unique(out)) > 5
    x = rng.normal(0, 2, (6, 37)).astype(real)
    x[4, 30] = np.inf
    out = np.full((6, 5), 7.5, real)
    _, call = prepared.bind_real(real, x.shape, (37, 1), 0.03, lo, hi, grid.dtype)
    with pytest.raises(InvalidArgumentError, match=r"x\[178\] is infinite"):
        call(ffi.from_buffer(x), ffi.from_buffer(out, require_writable=True))
    assert (out == 7.5).all()
    with pytest.raises(InvalidArgumentError, match="C order"):
        prepared.bind_real(real, (6, 37), (1, 6), 0.03, lo, hi, grid.dtype)
    with pytest.raises(ShapeError, match=r"\(\.\.\., 37\)"):
        prepared.bind_real(real, (6, 36), (36, 1), 0.03, lo, hi, grid.dtype)


def small_layer(rng, kind):
    layer = nn.Conv2d(3, 4, 3, padding=1) if kind == "conv" else nn.Linear(3, 4)
    shape = (4, 3, 3, 3) if kind == "conv" else (4, 3)
    return nn.QuantizedLayer(layer, rng.normal(size=shape), rng.normal(size=4),
                             quant.QParams(0.02, 128, False), quant.QParams(0.05, 100, False))


def fresh_output(layer, codes, multiplier, real=None):
    """The same layer rebuilt: nothing prepared before this call."""
    return pickle.loads(pickle.dumps(layer)).forward_codes(codes, multiplier, real=real)


@pytest.mark.parametrize("kind", ["conv", "linear"])
def test_quantized_layer_redoes_its_prepared_call_when_anything_changes(kind):
    rng = np.random.default_rng(7)
    layer = small_layer(rng, kind)
    codes = rng.integers(0, 256, (2, 3, 6, 6) if kind == "conv" else (5, 3)).astype(np.uint8)
    drum, exact = am.multiplier("drum:k=4"), am.multiplier("exact")
    outputs = {}
    for m, real in [(drum, None), (exact, None), (drum, np.float32), (drum, None)]:
        got = layer.forward_codes(codes, m, real=real)
        np.testing.assert_array_equal(got, fresh_output(layer, codes, m, real))
        outputs.setdefault(id(m), got if real is None else outputs.get(id(m)))
    assert not np.array_equal(outputs[id(drum)], outputs[id(exact)])
    # new parameters (retraining) and a bias correction change the output
    before = layer.forward_codes(codes, drum)
    layer.set_parameters(layer.weight * 0.5, layer.bias)
    halved = layer.forward_codes(codes, drum)
    assert not np.array_equal(before, halved)
    np.testing.assert_array_equal(halved, fresh_output(layer, codes, drum))
    layer.set_correction(drum, np.full(4, 2000))
    corrected = layer.forward_codes(codes, drum)
    assert not np.array_equal(corrected, halved)
    np.testing.assert_array_equal(corrected, fresh_output(layer, codes, drum))
    # copies made after use prepare their own call and agree
    np.testing.assert_array_equal(copy.deepcopy(layer).forward_codes(codes, drum), corrected)
