"""conv2d with its output stage (approxmul_conv2d_requantize[_dequantize]):
the same bits as approxmul_conv2d followed by approxmul_requantize (and the
dequantization), on every path the stage takes through conv2d's blocks."""

import zlib

import numpy as np
import pytest

import approxmul_cffi as am
from approxmul_cffi import quant
from approxmul_cffi._library import ffi, lib
from approxmul_cffi.errors import ApproxmulError
from kernel_cases import drum_table
import requantize_reference as plain

TABLE = np.random.default_rng(3).integers(-3000, 60000, (256, 256))

# (name, multiplier factory, input dtype)
MULTIPLIERS = {
    "exact-u8": (lambda: am.Multiplier.exact(8), np.uint8),
    "exact-s8": (lambda: am.Multiplier.exact(8, signed=True), np.int8),
    "drum": (lambda: am.Multiplier.from_table(drum_table()), np.uint8),
    "table": (lambda: am.Multiplier.from_table(TABLE), np.uint8),
    # 16-bit: int64 accumulators over long sums; truncation with cut 8 adds a
    # table GEMM of its low bytes, and a function plan (cut 9) stages its sums
    "exact-u16": (lambda: am.Multiplier.exact(16), np.uint16),
    "trunc8-u16": (lambda: am.multiplier("truncated:bits=16,cut=8"), np.uint16),
    "trunc9-u16": (lambda: am.multiplier("truncated:bits=16,cut=9"), np.uint16),
}

# geometry: stride 1 takes the wide-pixel gather, others the per-row gather
GEOMETRIES = [
    dict(stride=1, padding=1),
    dict(stride=2, padding=1, dilation=2),
    dict(stride=1, padding=0, groups=2),
    dict(stride=(2, 1), padding=(0, 2), groups=4),  # depthwise
]


def operands(rng, name, n, c, o, size, groups, x_zero):
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    info = np.iinfo(dtype)
    hi = min(info.max, 2**12) if dtype == np.uint16 else info.max
    x = rng.integers(info.min, hi + 1, (n, c, size, size)).astype(dtype)
    w = rng.integers(info.min, min(info.max, 255) + 1, (o, c // groups, 3, 3)).astype(dtype)
    return m, x, w


def stage_arguments(rng, m, channels, per_channel, bits):
    signed = bool(m.signed)
    lo, hi = quant.code_range(signed, bits=bits)
    factors = np.exp2(rng.uniform(-22, -6, size=channels if per_channel else 1))
    mantissa, shift = quant.quantize_multiplier(factors if per_channel else factors[0])
    bias = rng.integers(-5000, 5000, size=channels) if per_channel else None
    qmin = int(rng.integers(lo, (lo + hi) // 2))
    return dict(bias=0 if bias is None else bias, mantissa=mantissa, shift=shift,
                zero_point=int(rng.integers(lo, hi + 1)), qmin=qmin, qmax=hi)


@pytest.mark.parametrize("name", sorted(MULTIPLIERS))
@pytest.mark.parametrize("geometry", range(len(GEOMETRIES)))
@pytest.mark.parametrize("zero_points", [(0, 0), (3, 0), (5, 9)])
def test_stage_equals_conv2d_then_requantize(name, geometry, zero_points):
    rng = np.random.default_rng(zlib.crc32(repr((name, geometry, zero_points)).encode()))
    geom = dict(GEOMETRIES[geometry])
    groups = geom.get("groups", 1)
    c = o = 4
    m, x, w = operands(rng, name, 3, c, o, 11, groups, zero_points[0])
    zx, zw = zero_points
    if m.signed:
        zx, zw = -zx, -zw
    bits = 16 if m.bits > 8 else 8
    conv = dict(geom, x_zero_point=zx, w_zero_point=zw)
    for per_channel, rounding in ((True, "double"), (False, "single")):
        st = stage_arguments(rng, m, o, per_channel, bits)
        acc = am.conv2d(x, w, m, **conv)
        args = (st["bias"], st["mantissa"], st["shift"], st["zero_point"], st["qmin"], st["qmax"])
        want = quant.requantize(acc, *args, signed=bool(m.signed), rounding=rounding, bits=bits)
        got = quant.conv2d_requantize(x, w, m, *args, **conv, rounding=rounding, bits=bits)
        assert got.dtype == want.dtype and got.shape == acc.shape
        np.testing.assert_array_equal(got, want)
        # and the plain NumPy statement of the requantization
        np.testing.assert_array_equal(got, quant.requantize_reference(
            acc, *args, signed=bool(m.signed), rounding=rounding, bits=bits))
        scale = float(np.exp2(rng.uniform(-10, 3)))
        for real in (np.float32, np.float64):
            want_real = quant.requantize(acc, *args, signed=bool(m.signed), rounding=rounding,
                                         bits=bits, real=(scale, real))
            got_real = quant.conv2d_requantize(x, w, m, *args, **conv, rounding=rounding,
                                               bits=bits, real=(scale, real))
            assert got_real.dtype == real
            np.testing.assert_array_equal(got_real.view(f"u{got_real.itemsize}"),
                                          want_real.view(f"u{want_real.itemsize}"))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["exact-u8", "drum", "table"])
@pytest.mark.parametrize("batch, size", [(16, 16), (3, 40)])
def test_stage_over_many_pixel_blocks(name, threads, batch, size):
    # ResNet-20's 32->32 layer: many pixel blocks, run by workers, with
    # inputs that are not contiguous (channels_last); output rows shorter
    # and longer than the 32 from which real values go straight to out
    rng = np.random.default_rng(11)
    m, x, w = operands(rng, name, batch, 32, 32, size, 1, 0)
    x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    st = stage_arguments(rng, m, 32, True, 8)
    args = (st["bias"], st["mantissa"], st["shift"], st["zero_point"], st["qmin"], st["qmax"])
    previous = am.get_num_threads()
    am.set_num_threads(threads)
    try:
        acc = am.conv2d(x, w, m, padding=1, x_zero_point=7, w_zero_point=2)
        got = quant.conv2d_requantize(x, w, m, *args, padding=1, x_zero_point=7,
                                      w_zero_point=2, real=(0.125, np.float32))
    finally:
        am.set_num_threads(previous)
    want = quant.requantize(acc, *args, signed=False, real=(0.125, np.float32))
    np.testing.assert_array_equal(got, want)


def test_empty_batch_and_int32_saturation():
    m = am.Multiplier.exact(8)
    w = np.full((2, 1, 1, 1), 255, np.uint8)
    one = quant.quantize_multiplier(1.0)
    empty = quant.conv2d_requantize(np.zeros((0, 1, 4, 4), np.uint8), w, m, 0, *one, 0, 0, 255)
    assert empty.shape == (0, 2, 4, 4)
    # sums near the int32 limit: the bias saturates the way approxmul_requantize's does
    x = np.full((1, 1, 2, 2), 255, np.uint8)
    got = quant.conv2d_requantize(x, w, m, [2**31 - 1, -2**31], *one, 0, 0, 255)
    want = quant.requantize(am.conv2d(x, w, m), [2**31 - 1, -2**31], *one, 0, 0, 255,
                            signed=False)
    np.testing.assert_array_equal(got, want)
    assert (got[0, 0] == 255).all() and (got[0, 1] == 0).all()


@pytest.mark.parametrize("width", [16, 21])  # whole vector lanes, and lanes plus a tail
@pytest.mark.parametrize("real", [None, np.float32])
def test_bias_that_overflows_int32_saturates_in_the_vector_lanes(width, real):
    """Output rows long enough for the stage's vector lanes, which saturate
    acc + bias only for channels whose bias the sums' bound says can leave
    int32: biases at and near both ends of int32, and a small one."""
    m = am.Multiplier.exact(8)
    rng = np.random.default_rng(8)
    x = rng.integers(200, 256, (2, 3, 4, width)).astype(np.uint8)
    w = rng.integers(0, 256, (5, 3, 1, 1)).astype(np.uint8)
    bias = np.array([2**31 - 1, -2**31, 2**31 - 1000, -2**31 + 1000, 5], np.int64)
    mantissa, shift = quant.quantize_multiplier(np.full(5, 2.0 ** -22))
    kwargs = dict(x_zero_point=7, w_zero_point=100, bits=8)
    options = {} if real is None else dict(real=(0.5, real))
    got = quant.conv2d_requantize(x, w, m, bias, mantissa, shift, 3, 0, 255, **kwargs, **options)
    # the reference: an int64 1x1 convolution and the plain-integer requantization
    acc = np.einsum("nchw,oc->nohw", x.astype(np.int64) - 7, w[:, :, 0, 0].astype(np.int64) - 100)
    codes = np.array(plain.requantize(acc.tolist(), bias.tolist(), mantissa.tolist(),
                                      shift.tolist(), 3, 0, 255), np.uint8)
    assert {0, 255} <= set(np.unique(codes[:, :4]))  # the ends saturate
    want = codes if real is None else (0.5 * (codes.astype(np.float64) - 3)).astype(real)
    np.testing.assert_array_equal(got, want)


def test_bad_arguments_leave_out_untouched():
    m = am.Multiplier.exact(8)
    x = np.arange(2 * 9, dtype=np.uint8).reshape(1, 2, 3, 3)
    w = np.ones((3, 2, 1, 1), np.uint8)
    out = np.full((1, 3, 3, 3), 7.5, np.float32)
    ones, unit = np.ones(3, np.int32), np.full(3, 1 << 30, np.int32)  # factor 2^30 2^(1-31)

    def call(scale=0.5, out_type=lib.APPROXMUL_FLOAT32, code=lib.APPROXMUL_UINT8, qmax=255,
             shape=(1, 3, 3, 3), mantissa=unit, target=out, rounding=lib.APPROXMUL_ROUND_DOUBLE):
        return lib.approxmul_conv2d_requantize_dequantize(
            m.handle, lib.APPROXMUL_UINT8, ffi.from_buffer(x), list(x.shape),
            [18, 9, 3, 1], lib.APPROXMUL_UINT8, ffi.from_buffer(w), list(w.shape),
            [2, 1, 1, 1], [1, 1], [0, 0], [1, 1], 1, 0, 0, ffi.NULL,
            ffi.from_buffer("int32_t[]", mantissa), ffi.from_buffer("int32_t[]", ones), 0, 0,
            qmax, rounding, code, scale, out_type, ffi.from_buffer(target), list(shape))

    for scale in (0.0, -1.0, float("nan")):
        assert call(scale=scale) == lib.APPROXMUL_ERR_INVALID_ARGUMENT
        assert b"out_scale" in ffi.string(lib.approxmul_last_error())
    assert call(out_type=9) == lib.APPROXMUL_ERR_DTYPE
    assert call(code=lib.APPROXMUL_INT32) == lib.APPROXMUL_ERR_DTYPE
    assert call(qmax=300) == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert call(mantissa=-unit) == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert call(rounding=7) == lib.APPROXMUL_ERR_INVALID_ARGUMENT
    assert call(shape=(1, 3, 3, 2)) == lib.APPROXMUL_ERR_SHAPE
    assert b"out_shape" in ffi.string(lib.approxmul_last_error())
    assert call(target=x) == lib.APPROXMUL_ERR_ALIASING
    assert (out == 7.5).all()
    assert call() == lib.APPROXMUL_OK
    # factor 1: the codes are the accumulators, their real values half of them
    np.testing.assert_array_equal(out, 0.5 * am.conv2d(x, w, m))


def test_python_errors_name_the_argument():
    m = am.Multiplier.exact(8)
    x, w = np.zeros((1, 2, 3, 3), np.uint8), np.zeros((3, 2, 1, 1), np.uint8)
    one = quant.quantize_multiplier(1.0)
    with pytest.raises(ApproxmulError, match="mantissa: 2 values for 3 channels"):
        quant.conv2d_requantize(x, w, m, 0, [1, 2], one[1], 0, 0, 255)
    with pytest.raises(ApproxmulError, match="rounding"):
        quant.conv2d_requantize(x, w, m, 0, *one, 0, 0, 255, rounding="up")
    with pytest.raises(ApproxmulError, match="qmin"):
        quant.conv2d_requantize(x, w, m, 0, *one, 0, 200, 100)
    with pytest.raises(ApproxmulError, match="groups"):
        quant.conv2d_requantize(x, w, m, 0, *one, 0, 0, 255, groups=3)
