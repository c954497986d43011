"""conv2d from real input to real output (approxmul_conv2d_real): the same
bits as approxmul_quantize_finite followed by
approxmul_conv2d_requantize_dequantize, for every input layout the call
takes, and its refusals (NaN, infinity, layouts, code ranges) write nothing."""

import zlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import approxmul_cffi as am
from approxmul_cffi import nn, quant
from approxmul_cffi._library import ffi, lib
from approxmul_cffi.affine import quantize
from approxmul_cffi.errors import DTypeError, InvalidArgumentError
from approxmul_cffi.layer_calls import Conv2dRequantizer

MULTIPLIERS = {
    "exact-u8": lambda: am.Multiplier.exact(8),
    "drum-s8": lambda: am.multiplier("drum:k=3,signed=1"),
    "trunc-u8": lambda: am.multiplier("truncated:cut=4"),
    "table-u8": lambda: am.Multiplier.from_table(
        np.random.default_rng(5).integers(0, 60000, (256, 256))),
    "exact-u4": lambda: am.Multiplier.exact(4),
    "exact-s12": lambda: am.Multiplier.exact(12, signed=True),
}


def grid(m, rng):
    """(scale, zero point, qmin, qmax, codes dtype) of an input grid the multiplier takes."""
    signed, bits = bool(m.signed), int(m.bits)
    lo, hi = quant.code_range(signed, bits=bits)
    # x ~ N(0, 2): a few standard deviations over the code range, about its middle
    middle, spread = (lo + hi) // 2, (hi - lo) // 8
    return (float(np.exp2(rng.uniform(-1, 1)) * 12 / (hi - lo)),
            int(rng.integers(middle - spread, middle + spread + 1)),
            lo + int(rng.integers(0, 2)), hi, quant.code_dtype(signed, bits))


def stage(m, w, rng, real, **geometry):
    lo, hi = quant.code_range(bool(m.signed), bits=int(m.bits))
    o = w.shape[0]
    # accumulators of 27-36 products back onto the code range
    factor = np.exp2(rng.uniform(-2, 1, o)) * 4 / (36 * (hi - lo))
    mantissa, shift = quant.quantize_multiplier(factor)
    zero = (lo + hi) // 2
    return Conv2dRequantizer(w, m, rng.integers(-500, 500, o), mantissa, shift, zero, lo, hi,
                             bits=int(m.bits), real=(0.125, real), **geometry)


def case(name, rng, n=2, c=4, o=6, size=7, groups=1):
    m = MULTIPLIERS[name]()
    lo, hi = quant.code_range(bool(m.signed), bits=int(m.bits))
    w = rng.integers(lo, hi + 1, (o, c // groups, 3, 3)).astype(quant.code_dtype(bool(m.signed),
                                                                                 int(m.bits)))
    x = rng.normal(0, 2, (n, c, size, size))
    return m, w, x


def two_calls(call, x, scale, zero, qmin, qmax, dtype):
    codes = quantize(x, scale, zero, qmin, qmax, dtype=dtype, finite=True)
    return call(codes)


@pytest.mark.parametrize("name", sorted(MULTIPLIERS))
@pytest.mark.parametrize("layout", ["nchw", "channels-last", "strided"])
@pytest.mark.parametrize("real", [np.float32, np.float64])
def test_real_input_equals_quantize_then_conv(name, layout, real):
    rng = np.random.default_rng(zlib.crc32(f"{name} {layout}".encode()))
    m, w, x = case(name, rng)
    x = x.astype(real)
    if layout == "channels-last":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    elif layout == "strided":  # not dense: made contiguous on the way in
        x = np.repeat(x, 2, axis=3)[:, :, :, ::2]
    scale, zero, qmin, qmax, dtype = grid(m, rng)
    call = stage(m, w, rng, real, padding=1, x_zero_point=zero)
    got = call.run_real(x, scale, qmin, qmax, dtype)
    want = two_calls(call, x, scale, zero, qmin, qmax, dtype)
    assert got.dtype == real and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) > 5  # a real spread of outputs, not one saturated value


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(MULTIPLIERS)),
       stride=st.integers(1, 2), padding=st.integers(0, 2), dilation=st.integers(1, 2),
       groups=st.sampled_from([1, 2]), n=st.integers(1, 3), size=st.integers(5, 9))
def test_property_real_input_equals_two_calls(seed, name, stride, padding, dilation, groups, n,
                                              size):
    rng = np.random.default_rng(seed)
    m, w, x = case(name, rng, n=n, size=size, groups=groups)
    x[rng.random(x.shape) < 0.05] *= 1e6  # clamped codes at both ends
    scale, zero, qmin, qmax, dtype = grid(m, rng)
    call = stage(m, w, rng, np.float32, stride=stride, padding=padding, dilation=dilation,
                 groups=groups, x_zero_point=zero)
    np.testing.assert_array_equal(call.run_real(x, scale, qmin, qmax, dtype),
                                  two_calls(call, x, scale, zero, qmin, qmax, dtype))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("real", [np.float32, np.float64])
@pytest.mark.parametrize("where", ["lanes", "tail"])
def test_nonfinite_input_is_refused_and_nothing_written(bad, real, where):
    rng = np.random.default_rng(1)
    # 24336 values: two of the quantization's blocks, the second ending in a
    # tail of 16 that the vector lanes leave to the scalar loop
    m, w, x = case("exact-u8", rng, n=4, size=39)
    x = x.astype(real)
    at = 20_000 if where == "lanes" else x.size - 3
    x.flat[at] = bad
    scale, zero, qmin, qmax, dtype = grid(m, rng)
    call = stage(m, w, rng, real, padding=1, x_zero_point=zero)
    with pytest.raises(InvalidArgumentError, match=rf"x\[{at}\] is (NaN|infinite)"):
        call.run_real(x, scale, qmin, qmax, dtype)
    # the C call itself: out keeps its contents
    out = np.full((4, 6, 39, 39), 7.5, np.float32)
    x_type = lib.APPROXMUL_FLOAT32 if real == np.float32 else lib.APPROXMUL_FLOAT64
    status = c_call(call, x, scale, qmin, qmax, lib.APPROXMUL_UINT8, out, x_type=x_type)
    assert status == lib.APPROXMUL_ERR_INVALID_ARGUMENT and (out == 7.5).all()


def c_call(call, x, scale, qmin, qmax, x_code, out, strides=None, x_type=lib.APPROXMUL_FLOAT64,
           out_shape=None):
    """approxmul_conv2d_real with the prepared call's weights and stage."""
    parameters, (w_code, w_shape, w_strides, _), geometry = call._c_arrays()
    x_strides = strides or [s // x.itemsize for s in x.strides]
    return lib.approxmul_conv2d_real(
        call._multiplier.handle, x_type, ffi.from_buffer(x), list(x.shape), x_strides, scale,
        qmin, qmax, x_code, w_code, ffi.from_buffer(call._w), w_shape, w_strides, *geometry,
        *call._zero_points, *parameters, *call._stage, 0.125, lib.APPROXMUL_FLOAT32,
        ffi.from_buffer(out), list(out_shape or out.shape))


def test_bad_arguments_leave_out_untouched():
    rng = np.random.default_rng(2)
    m, w, x = case("exact-u4", rng, n=1, size=5)
    call = stage(m, w, rng, np.float32, padding=1, x_zero_point=3)
    out = np.full((1, 6, 5, 5), 7.5, np.float32)

    def status(**kw):
        args = dict(scale=0.25, qmin=0, qmax=15, x_code=lib.APPROXMUL_UINT8, out=out)
        args.update(kw)
        return c_call(call, x, args.pop("scale"), args.pop("qmin"), args.pop("qmax"),
                      args.pop("x_code"), args.pop("out"), **args)

    def message():
        return ffi.string(lib.approxmul_last_error()).decode()

    # codes beyond the 4-bit multiplier's operands: refused, not scanned
    assert status(qmax=16) == lib.APPROXMUL_ERR_OUT_OF_RANGE and "x_qmin..x_qmax" in message()
    assert status(qmin=-1) == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert status(qmax=300) == lib.APPROXMUL_ERR_OUT_OF_RANGE  # beyond uint8 itself
    for scale in (0.0, -1.0, float("nan"), float("inf")):
        assert status(scale=scale) == lib.APPROXMUL_ERR_INVALID_ARGUMENT
    assert status(x_code=lib.APPROXMUL_INT32) == lib.APPROXMUL_ERR_DTYPE
    assert status(x_type=7) == lib.APPROXMUL_ERR_DTYPE
    # a layout with gaps (every second column of a wider buffer) is not dense
    assert status(strides=[250, 50, 10, 2]) == lib.APPROXMUL_ERR_INVALID_ARGUMENT
    assert "dense" in message()
    assert status(out_shape=(1, 6, 5, 4)) == lib.APPROXMUL_ERR_SHAPE
    assert status(out=w, out_shape=(1, 6, 5, 5)) == lib.APPROXMUL_ERR_ALIASING
    assert (out == 7.5).all()
    assert status() == lib.APPROXMUL_OK
    np.testing.assert_array_equal(out, two_calls(call, x, 0.25, 3, 0, 15, np.uint8))


def test_python_refusals():
    rng = np.random.default_rng(3)
    m, w, x = case("exact-u8", rng)
    call = stage(m, w, rng, np.float32, padding=1)
    with pytest.raises(DTypeError, match="float32 or float64"):
        call.run_real(x.astype(np.int16), 0.1, 0, 255, np.uint8)
    with pytest.raises(DTypeError, match="4-D"):
        call.run_real(x[0], 0.1, 0, 255, np.uint8)
    codes_only = Conv2dRequantizer(w, m, 0, *quant.quantize_multiplier(0.01), 0, 0, 255)
    with pytest.raises(InvalidArgumentError, match="real="):
        codes_only.run_real(x, 0.1, 0, 255, np.uint8)
    empty = call.run_real(np.zeros((0, 4, 7, 7)), 0.1, 0, 255, np.uint8)
    assert empty.shape == (0, 6, 7, 7)


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("kind", ["conv", "linear"])
def test_layer_forward_real_equals_forward_codes(signed, kind):
    """QuantizedLayer.forward_real: the fused call for a convolution, quantize
    then forward_codes for a linear layer, the same bits as quantizing first."""
    rng = np.random.default_rng(4)
    if kind == "conv":
        layer, weights = nn.Conv2d(3, 5, 3, padding=1), rng.normal(0, 0.3, (5, 3, 3, 3))
        x = rng.normal(0, 3, (2, 3, 8, 8)).astype(np.float32)
    else:
        layer, weights = nn.Linear(12, 5), rng.normal(0, 0.3, (5, 12))
        x = rng.normal(0, 3, (4, 12)).astype(np.float32)
    in_qp, out_qp = quant.QParams(0.05, 128, False), quant.QParams(0.2, 120, False)
    layer = nn.QuantizedLayer(layer, weights, rng.normal(0, 0.5, 5), in_qp, out_qp)
    m = am.multiplier("drum:k=4,signed=1" if signed else "drum:k=4")
    got = layer.forward_real(x, m, np.float32)
    want = layer.forward_codes(in_qp.quantize(x, finite=True), m, real=np.float32)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) > 10
    with pytest.raises(InvalidArgumentError, match="NaN"):
        layer.forward_real(np.where(x > 5, np.nan, x), m, np.float32)


def test_long_calls_are_interruptible():
    """A long approxmul_conv2d_real call takes the Ctrl-C route, its work counted
    as conv2d_requantize_dequantize's (output elements times weights per channel)."""
    from approxmul_cffi import _interrupt
    w_shape, out_shape = [64, 32, 3, 3], [16, 64, 56, 56]
    real = [None] * 10 + [w_shape] + [None] * 18 + [out_shape]  # the 30 arguments after m
    codes = [None] * 6 + [w_shape] + [None] * 18 + [out_shape]  # the 26 after m
    work = _interrupt._WORK
    assert work["approxmul_conv2d_real"](ffi, lib, None, *real) == \
        work["approxmul_conv2d_requantize_dequantize"](ffi, lib, None, *codes) == \
        16 * 64 * 56 * 56 * 32 * 9 > _interrupt.LONG_WORK


@pytest.mark.parametrize("layout", ["nchw", "channels-last"])
def test_bound_call_equals_quantizing_first_on_every_input_of_its_layout(layout):
    """Conv2dRequantizer.bind_real: one C call prepared per input layout, made on
    pointers to x's memory, with the bits of quantizing first; its refusals write nothing."""
    rng = np.random.default_rng(zlib.crc32(layout.encode()))
    m, w, x = case("drum-s8", rng, n=3)
    scale, zero, qmin, qmax, dtype = grid(m, rng)
    call = stage(m, w, rng, np.float32, padding=1, x_zero_point=zero)
    n, c, h, wd = x.shape
    strides = (c * h * wd, h * wd, wd, 1) if layout == "nchw" else (h * wd * c, 1, wd * c, c)
    out_shape, bound = call.bind_real(np.float32, x.shape, strides, scale, qmin, qmax, dtype)
    assert out_shape == (3, 6, 7, 7)
    for seed in range(3):
        x = np.random.default_rng(seed).normal(0, 2, (n, c, h, wd)).astype(np.float32)
        if layout == "channels-last":
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        memory = x if layout == "nchw" else x.transpose(0, 2, 3, 1)  # x's memory in order
        out = np.empty(out_shape, np.float32)
        with ffi.from_buffer(memory) as x_p, ffi.from_buffer(out, require_writable=True) as out_p:
            bound(x_p, out_p)
        # against quantizing first (run_real itself is built on the bound call)
        np.testing.assert_array_equal(out, two_calls(call, x, scale, zero, qmin, qmax, dtype))
        # a raw address of memory another library holds (a framework's tensor)
        again = np.full(out_shape, 7.5, np.float32)
        bound(ffi.cast("void *", memory.ctypes.data), ffi.cast("void *", again.ctypes.data))
        np.testing.assert_array_equal(again, out)
    x.flat[40] = np.nan
    memory = x if layout == "nchw" else x.transpose(0, 2, 3, 1)
    out = np.full(out_shape, 7.5, np.float32)
    with pytest.raises(InvalidArgumentError, match=r"x\[\d+\] is NaN"):
        bound(ffi.cast("void *", memory.ctypes.data), ffi.cast("void *", out.ctypes.data))
    assert (out == 7.5).all()
    with pytest.raises(DTypeError, match="float32 or float64"):
        call.bind_real(np.int16, x.shape, strides, scale, qmin, qmax, dtype)
    empty_shape, empty = call.bind_real(np.float32, (0, c, h, wd), strides, scale, qmin, qmax,
                                        dtype)
    assert empty_shape == (0, 6, 7, 7)
    empty(ffi.NULL, ffi.NULL)  # nothing to read or write: no C call


def test_calls_of_known_work_take_the_interruptible_route_when_long():
    from approxmul_cffi import _interrupt
    short = lib.with_work("approxmul_conv2d_real", _interrupt.LONG_WORK)
    long = lib.with_work("approxmul_conv2d_real", _interrupt.LONG_WORK + 1)
    assert short is lib._library.approxmul_conv2d_real  # the function itself: no wrapper
    assert long is not short and callable(long)


def test_long_bound_call_takes_the_ctrl_c_route_and_keeps_the_bits(monkeypatch):
    from approxmul_cffi import _interrupt
    rng = np.random.default_rng(11)
    m, w, x = case("exact-u8", rng, n=8, c=16, o=16, size=32)
    x = x.astype(np.float32)
    scale, zero, qmin, qmax, dtype = grid(m, rng)
    call = stage(m, w, rng, np.float32, padding=1, x_zero_point=zero)
    routed = []
    real_route = _interrupt.run_interruptibly
    monkeypatch.setattr(_interrupt, "run_interruptibly",
                        lambda *a: routed.append(1) or real_route(*a))
    out_shape, bound = call.bind_real(np.float32, x.shape, (16 * 32 * 32, 32 * 32, 32, 1),
                                      scale, qmin, qmax, dtype)
    assert int(np.prod(out_shape)) * 16 * 9 > _interrupt.LONG_WORK
    out = np.empty(out_shape, np.float32)
    bound(ffi.cast("void *", x.ctypes.data), ffi.cast("void *", out.ctypes.data))
    assert routed == [1]
    np.testing.assert_array_equal(out, two_calls(call, x, scale, zero, qmin, qmax, dtype))
