"""Pointwise (1x1, stride 1, no padding) conv2d: the GEMM reads x's pixels
where they lie and, without an output stage, writes its sums straight into
out (conv.cpp, pixel_chain). Every layout that path takes or declines,
bit-exact against a plain per-product reference."""

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import approxmul_cffi as am
from approxmul_cffi import quant

TABLE = np.random.default_rng(7).integers(0, 60000, (256, 256))

MULTIPLIERS = {  # name: (factory, code dtype)
    "exact-u8": (lambda: am.Multiplier.exact(8), np.uint8),
    "exact-s8": (lambda: am.Multiplier.exact(8, signed=True), np.int8),
    "drum-u8": (lambda: am.multiplier("drum:k=4"), np.uint8),  # rank-1: codes mapped
    "drum-s8": (lambda: am.multiplier("drum:k=3,signed=1"), np.int8),
    "table-u8": (lambda: am.Multiplier.from_table(TABLE), np.uint8),
    "exact-u16": (lambda: am.Multiplier.exact(16), np.uint16),
}


def products(m, a, b):
    """Every product of code arrays a and b (broadcast), from the multiplier's table."""
    if m.bits > 8:  # the exact 16-bit model: the integer product
        return a.astype(np.int64) * b.astype(np.int64)
    mask = (1 << m.bits) - 1
    return np.asarray(m.table(), np.int64)[a.astype(np.int64) & mask, b.astype(np.int64) & mask]


def reference(m, x, w, groups, zx, zw):
    """out[n, o, y, x] = sum_c M(x[n, g*cg + c, y, x], w[o, c]) - zw sum_c x - zx sum_c w + cg zx zw."""
    n, c, h, width = x.shape
    o, cg = w.shape[:2]
    og = o // groups
    out = np.zeros((n, o, h, width), np.int64)
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg].astype(np.int64)            # n cg h w
        ws = w[g * og:(g + 1) * og, :, 0, 0].astype(np.int64)      # og cg
        prod = products(m, xs[:, None], ws[None, :, :, None, None])  # n og cg h w
        out[:, g * og:(g + 1) * og] = (prod.sum(2) - zw * xs.sum(1)[:, None]
                                       - zx * ws.sum(1)[None, :, None, None] + cg * zx * zw)
    return out


def codes(rng, dtype, shape):
    info = np.iinfo(dtype)
    hi = min(info.max, 4095) if dtype == np.uint16 else info.max
    return rng.integers(info.min, hi + 1, shape).astype(dtype)


def zero_points(m, pair):
    return tuple(-z for z in pair) if m.signed else pair


# x's layouts: (name, make) with make(contiguous NCHW codes) -> a view of them
def nchw(x):
    return x


def channels_last(x):
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def every_other_channel(x):  # channels_last with channels two apart
    n, c, h, w = x.shape
    big = np.zeros((n, h, w, 2 * c), x.dtype)
    big[..., ::2] = x.transpose(0, 2, 3, 1)
    return big[..., ::2].transpose(0, 3, 1, 2)


def cropped_rows(x):  # rows a column longer than the image: no single step within an image
    n, c, h, w = x.shape
    big = np.zeros((n, c, h, w + 1), x.dtype)
    big[..., :w] = x
    return big[..., :w]


def images_apart(x):  # NCHW images with a gap between them: one step within each, not across
    n, c, h, w = x.shape
    big = np.zeros((n, c + 1, h, w), x.dtype)
    big[:, :c] = x
    return big[:, :c]


def reversed_rows(x):  # a negative step
    return np.ascontiguousarray(x[:, :, :, ::-1])[:, :, :, ::-1]


LAYOUTS = [nchw, channels_last, every_other_channel, cropped_rows, images_apart, reversed_rows]

# (batch, channels, out channels, height, width, groups)
SHAPES = [(3, 8, 5, 6, 7, 1), (2, 6, 6, 5, 4, 3), (1, 12, 7, 9, 9, 1),
          (37, 16, 9, 1, 1, 1),   # 1x1 images: the batch is the matrix
          (5, 4, 4, 1, 6, 4),     # depthwise, one-row images
          (4, 5, 3, 7, 1, 1)]     # one-column images


@pytest.mark.parametrize("name", sorted(MULTIPLIERS))
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_pointwise_matches_reference(name, layout, shape):
    n, c, o, h, width, groups = SHAPES[shape]
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(zlib.crc32(repr((name, layout.__name__, shape)).encode()))
    x = codes(rng, dtype, (n, c, h, width))
    w = codes(rng, dtype, (o, c // groups, 1, 1))
    xv = layout(x)
    np.testing.assert_array_equal(xv, x)
    for pair in ((0, 0), (3, 0), (5, 9)):
        zx, zw = zero_points(m, pair)
        got = am.conv2d(xv, w, m, groups=groups, x_zero_point=zx, w_zero_point=zw)
        np.testing.assert_array_equal(got, reference(m, x, w, groups, zx, zw), err_msg=str(pair))


@pytest.mark.parametrize("name", ["exact-u8", "drum-u8", "table-u8", "exact-u16"])
@pytest.mark.parametrize("out_layout", ["nchw", "channels_last", "padded", "images_apart"])
@pytest.mark.parametrize("size", [1, 5])
def test_sums_written_into_any_out(name, out_layout, size):
    # without an output stage the GEMM writes into out itself where out's
    # pixels lie at one step; elsewhere the sums go through the scatter
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(zlib.crc32(repr((name, out_layout, size)).encode()))
    n, c, o = 19, 10, 6
    x = channels_last(codes(rng, dtype, (n, c, size, size)))
    w = codes(rng, dtype, (o, c, 1, 1))
    zx, zw = zero_points(m, (4, 2))
    want = reference(m, x, w, 1, zx, zw)
    dt = am.conv2d(x, w, m, x_zero_point=zx, w_zero_point=zw).dtype
    if out_layout == "nchw":
        out = np.full((n, o, size, size), -1, dt)
    elif out_layout == "channels_last":
        out = np.full((n, size, size, o), -1, dt).transpose(0, 3, 1, 2)
    elif out_layout == "padded":  # rows a column longer: no step within an image
        out = np.full((n, o, size, size + 1), -1, dt)[..., :size]
    else:
        out = np.full((n, o + 2, size, size), -1, dt)[:, 1:o + 1]
    got = am.conv2d(x, w, m, x_zero_point=zx, w_zero_point=zw, out=out)
    assert got is out
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["exact-s8", "drum-u8", "table-u8"])
@pytest.mark.parametrize("n, size", [(700, 1), (9, 23)])
def test_many_pixel_blocks(name, threads, n, size):
    # enough pixels for several blocks, run by workers: 1x1 images (blocks
    # of many images) and NCHW images (blocks cut inside images)
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(zlib.crc32(repr((name, threads, n)).encode()))
    x = codes(rng, dtype, (n, 40, size, size))
    w = codes(rng, dtype, (24, 40, 1, 1))
    zx, zw = zero_points(m, (6, 1))
    previous = am.get_num_threads()
    am.set_num_threads(threads)
    try:
        got = am.conv2d(x, w, m, x_zero_point=zx, w_zero_point=zw)
    finally:
        am.set_num_threads(previous)
    np.testing.assert_array_equal(got, reference(m, x, w, 1, zx, zw))


def stage_arguments(rng, m, o, bias=True):
    bits = 16 if m.bits > 8 else 8
    lo, hi = quant.code_range(bool(m.signed), bits=bits)
    mantissa, shift = quant.quantize_multiplier(np.exp2(rng.uniform(-14, -8, o)))
    return bits, (rng.integers(-500, 500, o) if bias else 0, mantissa, shift,
                  int((lo + hi) // 2), lo, hi)


@pytest.mark.parametrize("name", ["exact-u8", "exact-s8", "drum-u8", "table-u8", "exact-u16"])
@pytest.mark.parametrize("size, groups", [(1, 1), (1, 2), (6, 1), (6, 2)])
@pytest.mark.parametrize("real", [None, np.float32])
def test_output_stage_of_pointwise_layers(name, size, groups, real):
    # the torch layer's call: requantized (and dequantized) in the same
    # call; 1x1 images' sums pixel-major, each image's channels in one call
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(zlib.crc32(repr((name, size, groups, real)).encode()))
    n, c, o = 45, 12, 14
    x = channels_last(codes(rng, dtype, (n, c, size, size)))
    w = codes(rng, dtype, (o, c // groups, 1, 1))
    zx, zw = zero_points(m, (5, 3))
    bits, args = stage_arguments(rng, m, o, bias=groups == 1)
    sums = reference(m, x, w, groups, zx, zw)
    kwargs = {} if real is None else {"real": (0.25, real)}
    want = quant.requantize(sums, *args, signed=bool(m.signed), bits=bits, **kwargs)
    got = quant.conv2d_requantize(x, w, m, *args, x_zero_point=zx, w_zero_point=zw, bits=bits,
                                  groups=groups, **kwargs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["exact-s8", "drum-u8", "table-u8"])
@pytest.mark.parametrize("real", [None, np.float64])
def test_one_pixel_outputs_of_wider_kernels(name, real):
    # a 3x3 kernel over 3x3 images (not pointwise): one output pixel per
    # image through the gathers, the scatter's tiles and the stage's rows
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    n, c, o = 50, 5, 20
    x = codes(rng, dtype, (n, c, 3, 3))
    w = codes(rng, dtype, (o, c, 3, 3))
    zx, zw = zero_points(m, (2, 7))
    # one output pixel: the pointwise sum over c * 9 channels
    sums = reference(m, x.reshape(n, c * 9, 1, 1), w.reshape(o, c * 9, 1, 1), 1, zx, zw)
    np.testing.assert_array_equal(am.conv2d(x, w, m, x_zero_point=zx, w_zero_point=zw), sums)
    bits, args = stage_arguments(rng, m, o)
    kwargs = {} if real is None else {"real": (0.5, real)}
    want = quant.requantize(sums, *args, signed=bool(m.signed), bits=bits, **kwargs)
    got = quant.conv2d_requantize(x, w, m, *args, x_zero_point=zx, w_zero_point=zw, bits=bits,
                                  **kwargs)
    np.testing.assert_array_equal(got, want)


def test_broadcast_input():
    # a zero step (np.broadcast_to) takes the gathers, with the same sums
    m = am.multiplier("drum:k=4")
    rng = np.random.default_rng(2)
    row = codes(rng, np.uint8, (1, 6, 1, 5))
    x = np.broadcast_to(row, (4, 6, 3, 5))
    w = codes(rng, np.uint8, (3, 6, 1, 1))
    np.testing.assert_array_equal(am.conv2d(x, w, m, x_zero_point=2),
                                  reference(m, np.ascontiguousarray(x), w, 1, 2, 0))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 40), c=st.integers(1, 20), o=st.integers(1, 12),
       h=st.integers(1, 6), w=st.integers(1, 6), groups=st.sampled_from([1, 2]),
       name=st.sampled_from(["exact-u8", "drum-u8", "table-u8"]),
       layout=st.sampled_from(LAYOUTS), zx=st.integers(0, 255), zw=st.integers(0, 255),
       threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**32 - 1))
def test_pointwise_geometries(n, c, o, h, w, groups, name, layout, zx, zw, threads, seed):
    factory, dtype = MULTIPLIERS[name]
    m = factory()
    rng = np.random.default_rng(seed)
    x = codes(rng, dtype, (n, c * groups, h, w))
    wt = codes(rng, dtype, (o * groups, c, 1, 1))
    previous = am.get_num_threads()
    am.set_num_threads(threads)
    try:
        got = am.conv2d(layout(x), wt, m, groups=groups, x_zero_point=zx, w_zero_point=zw)
    finally:
        am.set_num_threads(previous)
    np.testing.assert_array_equal(got, reference(m, x, wt, groups, zx, zw))
