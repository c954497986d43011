"""Depthwise conv2d (one input and one output channel per group) under exact
and rank-1 factorized multipliers: each output row adds its taps as vectors
over the image plane mapped through u (conv.cpp, multiply_depthwise), with
every cross term and the padding's products, or on planes of up to 1024
outputs 16 channels at once as vector lanes (multiply_lanes); under arbitrary 8-bit tables
the plane's codes are looked up per kernel row by the table kernel.
Bit-exact against the direct per-product reference of test_conv2d, for
every geometry, layout, zero point and sum width that path takes, and for
the layers it leaves to the GEMMs."""

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import approxmul_cffi as am
from approxmul_cffi import quant
from test_conv2d import reference_conv

# factors u(a) v(b) near int16's limits: sums past int32 (the int64 rows)
_U = np.random.default_rng(3).integers(-32000, 32000, 256)
_V = np.random.default_rng(4).integers(-32000, 32000, 256)
# signed factors within int8 (u looked up as signed bytes)
_US = np.random.default_rng(5).integers(-120, 121, 256)
_VS = np.random.default_rng(6).integers(-120, 121, 256)

MULTIPLIERS = {  # name: (factory, code dtype)
    "exact-u8": (lambda: am.Multiplier.exact(8), np.uint8),
    "exact-s8": (lambda: am.Multiplier.exact(8, signed=True), np.int8),
    "drum-u8": (lambda: am.multiplier("drum:k=4"), np.uint8),  # u fits bytes: vector lookups
    "drum-s8": (lambda: am.multiplier("drum:k=4,signed=1"), np.int8),  # u(-128) = -144
    "wide-factors": (lambda: am.Multiplier.from_table(np.outer(_U, _V)), np.uint8),
    "factors-s8": (lambda: am.Multiplier.from_table(np.outer(_US, _VS), signed=True), np.int8),
    # the table kernel's lookups: products over 16 bits' span from their
    # offset, signed ones below zero (sums of M - offset, then K offset)
    "table-u8": (lambda: am.Multiplier.from_table(
        np.random.default_rng(7).integers(0, 60000, (256, 256))), np.uint8),
    "table-s8": (lambda: am.Multiplier.from_table(
        np.random.default_rng(8).integers(-32768, 32768, (256, 256)), signed=True), np.int8),
}
TABLES = ["table-u8", "table-s8"]

# (n, c, h, w, kh, kw, stride, padding, dilation)
GEOMETRIES = [
    (2, 3, 9, 11, 3, 3, (1, 1), (1, 1), (1, 1)),     # MobileNet's 3x3
    (2, 4, 12, 10, 3, 3, (2, 2), (1, 1), (1, 1)),    # and its stride-2 layers
    (1, 2, 7, 7, 5, 5, (1, 1), (2, 2), (1, 1)),
    (3, 3, 8, 9, 3, 3, (1, 1), (2, 2), (2, 2)),      # dilated
    (1, 2, 5, 6, 3, 1, (2, 1), (1, 0), (1, 1)),      # strided rows only
    (2, 2, 9, 8, 1, 3, (1, 3), (0, 1), (1, 1)),      # strided columns only
    (1, 3, 2, 2, 3, 3, (1, 1), (3, 3), (1, 1)),      # padding wider than the image
    (2, 2, 1, 1, 3, 3, (1, 1), (1, 1), (1, 1)),      # 1x1 images
    (2, 3, 6, 6, 2, 2, (2, 2), (0, 0), (1, 1)),      # no padding
    (2, 19, 6, 5, 3, 3, (1, 1), (1, 1), (1, 1)),     # 16 channels as lanes, then 3
    (1, 3, 34, 33, 3, 3, (1, 1), (1, 1), (1, 1)),    # 1122 outputs: a plane at a time
]


def codes(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def zero_points(m, pair):
    return tuple(-z for z in pair) if m.signed else pair


def expected(m, x, w, stride, padding, dilation, zx, zw):
    return reference_conv(m.table(), x, w, 8, stride, padding, dilation, x.shape[1], zx, zw)


def test_the_multipliers_take_the_paths_they_are_named_for():
    # the wide factors must be a rank-1 plan whose sums leave int32
    m = MULTIPLIERS["wide-factors"][0]()
    assert m.plan == "factorized-gemm"
    assert am.accumulator_dtype(m, 9) == "int64"
    assert MULTIPLIERS["factors-s8"][0]().plan == "factorized-gemm"
    assert MULTIPLIERS["table-u8"][0]().plan == "table"


@pytest.mark.parametrize("name", list(MULTIPLIERS))
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("zero", [(0, 0), (5, 3), (0, 7)])
def test_depthwise_layers_match_the_reference(name, geometry, zero):
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    n, c, h, width, kh, kw, stride, padding, dilation = geometry
    rng = np.random.default_rng(zlib.crc32(repr((name, geometry, zero)).encode()))
    x = codes(rng, dtype, (n, c, h, width))
    w = codes(rng, dtype, (c, 1, kh, kw))
    zx, zw = zero_points(m, zero)
    got = am.conv2d(x, w, m, stride=stride, padding=padding, dilation=dilation, groups=c,
                    x_zero_point=zx, w_zero_point=zw)
    want = expected(m, x, w, stride, padding, dilation, zx, zw)
    assert got.dtype == am.accumulator_dtype(m, kh * kw, zx, zw)
    np.testing.assert_array_equal(got, want)


def channels_last(x):
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("name", ["exact-u8", "drum-u8", "drum-s8", "wide-factors", *TABLES])
@pytest.mark.parametrize("layout", ["channels_last", "cropped", "reversed rows",
                                    "weights transposed", "out channels_last"])
@pytest.mark.parametrize("threads", [1, 2])
def test_depthwise_layouts(name, layout, threads):
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(zlib.crc32(repr((name, layout, threads)).encode()))
    # 20 channels: the lanes path's blocks of 16 and 4 channels
    x = codes(rng, dtype, (3, 20, 13, 12))
    w = codes(rng, dtype, (20, 1, 3, 3))
    kwargs = {"padding": 1, "groups": 20}
    out = None
    if layout == "channels_last":
        x = channels_last(x)
    elif layout == "cropped":
        x = codes(rng, dtype, (3, 23, 17, 15))[:, 1:21, 2:15, 1:13]
    elif layout == "reversed rows":
        x = x[:, :, ::-1]
    elif layout == "weights transposed":
        w = np.ascontiguousarray(w.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    else:
        dtype_out = am.accumulator_dtype(m, 9, 4, 2)
        out = np.full((3, 13, 12, 20), -1, dtype_out).transpose(0, 3, 1, 2)
    zx, zw = zero_points(m, (4, 2))
    am.set_num_threads(threads)
    try:
        got = am.conv2d(x, w, m, x_zero_point=zx, w_zero_point=zw, out=out, **kwargs)
    finally:
        am.set_num_threads(0)
    np.testing.assert_array_equal(got, expected(m, x, w, (1, 1), (1, 1), (1, 1), zx, zw))


@pytest.mark.parametrize("name", ["exact-s8", "drum-u8", "table-s8"])
@pytest.mark.parametrize("threads", [1, 2])
def test_depthwise_blocks_across_many_images(name, threads):
    # more pixels than one block: blocks start and end inside images and
    # rows, and a worker's plane is reused only for its own image and channel
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    x = codes(rng, dtype, (19, 5, 23, 23))
    w = codes(rng, dtype, (5, 1, 3, 3))
    zx, zw = zero_points(m, (6, 1))
    am.set_num_threads(threads)
    try:
        for stride in [(1, 1), (2, 2)]:
            got = am.conv2d(x, w, m, stride=stride, padding=1, groups=5, x_zero_point=zx,
                            w_zero_point=zw)
            np.testing.assert_array_equal(
                got, expected(m, x, w, stride, (1, 1), (1, 1), zx, zw))
    finally:
        am.set_num_threads(0)


@pytest.mark.parametrize("name", ["exact-u8", "exact-s8", "drum-u8", "drum-s8", *TABLES])
@pytest.mark.parametrize("real", [None, np.float32])
def test_output_stage_of_depthwise_layers(name, real):
    # the torch layer's call: the sums requantized (and dequantized) in it
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(zlib.crc32(repr((name, real)).encode()))
    x = codes(rng, dtype, (4, 19, 10, 9))  # lanes of 16 and 3 channels
    w = codes(rng, dtype, (19, 1, 3, 3))
    zx, zw = zero_points(m, (5, 3))
    lo, hi = quant.code_range(bool(m.signed), bits=8)
    mantissa, shift = quant.quantize_multiplier(np.exp2(rng.uniform(-12, -6, 19)))
    args = (rng.integers(-500, 500, 19), mantissa, shift, int((lo + hi) // 2), lo, hi)
    kwargs = {} if real is None else {"real": (0.25, real)}
    sums = expected(m, x, w, (2, 2), (1, 1), (1, 1), zx, zw)
    want = quant.requantize(sums, *args, signed=bool(m.signed), bits=8, **kwargs)
    got = quant.conv2d_requantize(x, w, m, *args, stride=2, padding=1, groups=19,
                                  x_zero_point=zx, w_zero_point=zw, bits=8, **kwargs)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(["exact-u8", "exact-s8", "drum-u8", "drum-s8", "wide-factors",
                             "factors-s8", *TABLES]),
       n=st.integers(1, 3), c=st.integers(1, 35), h=st.integers(0, 9), w=st.integers(0, 9),
       kh=st.integers(1, 4), kw=st.integers(1, 4),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       padding=st.tuples(st.integers(0, 3), st.integers(0, 3)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       zero=st.booleans(), threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**32 - 1))
def test_depthwise_geometries(name, n, c, h, w, kh, kw, stride, padding, dilation, zero,
                              threads, seed):
    if (h + 2 * padding[0] < dilation[0] * (kh - 1) + 1
            or w + 2 * padding[1] < dilation[1] * (kw - 1) + 1):
        return  # no output pixel
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(seed)
    x = codes(rng, dtype, (n, c, h, w))
    wt = codes(rng, dtype, (c, 1, kh, kw))
    zx, zw = zero_points(m, (int(rng.integers(0, 100)), int(rng.integers(0, 100)))) if zero \
        else (0, 0)
    am.set_num_threads(threads)
    try:
        got = am.conv2d(x, wt, m, stride=stride, padding=padding, dilation=dilation, groups=c,
                        x_zero_point=zx, w_zero_point=zw)
    finally:
        am.set_num_threads(0)
    np.testing.assert_array_equal(got, expected(m, x, wt, stride, padding, dilation, zx, zw))


def test_depthwise_planes_past_the_cap_keep_the_gemm_path():
    # a padded plane past 4 MiB of int32 (1201 x 1201 around one pixel) is
    # not built per worker: the layer runs through the GEMMs' clamped
    # gathers, with the same sums
    m = am.Multiplier.exact(8)
    rng = np.random.default_rng(11)
    x = codes(rng, np.uint8, (2, 3, 1, 1))
    w = codes(rng, np.uint8, (3, 1, 3, 3))
    got = am.conv2d(x, w, m, stride=600, padding=600, groups=3, x_zero_point=7, w_zero_point=2)
    assert got.shape == (2, 3, 2, 2)
    np.testing.assert_array_equal(
        got, expected(m, x, w, (600, 600), (600, 600), (1, 1), 7, 2))


@pytest.mark.parametrize("name", TABLES)
def test_table_kernels_wider_than_a_lookup_call(name):
    # a table-kernel call takes up to 256 stationary codes: a kernel row of
    # 300 taps runs on the GEMM path, with the same sums; 1 x 256 taps are
    # one lookup call, 2 x 150 a call per kernel row
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for kh, kw in ((1, 300), (1, 256), (2, 150)):
        x = codes(rng, dtype, (2, 3, kh + 1, kw + 5))
        w = codes(rng, dtype, (3, 1, kh, kw))
        zx, zw = zero_points(m, (9, 4))
        got = am.conv2d(x, w, m, padding=(0, 1), groups=3, x_zero_point=zx, w_zero_point=zw)
        np.testing.assert_array_equal(
            got, expected(m, x, w, (1, 1), (0, 1), (1, 1), zx, zw))
