"""conv2d: bit-exact against an independent integer convolution and PyTorch; bad input."""

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import approxmul_cffi as am
import reference
from kernel_cases import drum_table, truncated_table


def reference_conv(table, x, w, bits, stride, padding, dilation, groups, zx, zw):
    """Direct loops over output positions (NumPy per position), every product from the table."""
    table = np.asarray(table, np.int64)
    mask = (1 << bits) - 1
    n, c, h, width = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (width + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    padded = np.full((n, c, h + 2 * ph, width + 2 * pw), zx, np.int64)
    padded[:, :, ph:ph + h, pw:pw + width] = x
    out = np.zeros((n, o, oh, ow), np.int64)
    og = o // groups
    w64 = w.astype(np.int64)
    for oc in range(o):
        g = oc // og
        for y in range(oh):
            for xx in range(ow):
                patch = padded[:, g * cg:(g + 1) * cg,
                               y * sh:y * sh + dh * (kh - 1) + 1:dh,
                               xx * sw:xx * sw + dw * (kw - 1) + 1:dw]
                products = table[patch & mask, w64[oc] & mask]
                out[:, oc, y, xx] = (products.sum(axis=(1, 2, 3)) - zw * patch.sum(axis=(1, 2, 3))
                                     - zx * w64[oc].sum() + cg * kh * kw * zx * zw)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 2), groups=st.integers(1, 3), cg=st.integers(1, 3), og=st.integers(1, 3),
       h=st.integers(1, 8), w=st.integers(1, 8), kh=st.integers(1, 3), kw=st.integers(1, 3),
       stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       padding=st.tuples(st.integers(0, 2), st.integers(0, 2)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       kind=st.sampled_from(["exact-s8", "table-u8", "drum-u8"]), zero=st.booleans(),
       threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**32 - 1))
def test_conv2d_matches_reference(n, groups, cg, og, h, w, kh, kw, stride, padding, dilation,
                                  kind, zero, threads, seed):
    assume(h + 2 * padding[0] >= dilation[0] * (kh - 1) + 1)  # some output exists
    assume(w + 2 * padding[1] >= dilation[1] * (kw - 1) + 1)
    rng = np.random.default_rng(seed)
    signed = kind.endswith("s8")
    if kind == "exact-s8":
        table = reference.exact_table(8, signed=True)
        m = am.Multiplier.exact(8, signed=True)
    else:
        table = drum_table() if kind == "drum-u8" else rng.integers(0, 60000, (256, 256))
        m = am.Multiplier.from_table(table)
    low, high = (-128, 128) if signed else (0, 256)
    dtype = np.int8 if signed else np.uint8
    x = rng.integers(low, high, (n, groups * cg, h, w)).astype(dtype)
    wt = rng.integers(low, high, (groups * og, cg, kh, kw)).astype(dtype)
    zx, zw = (int(rng.integers(low, high)), int(rng.integers(low, high))) if zero else (0, 0)
    am.set_num_threads(threads)
    try:
        got = am.conv2d(x, wt, m, stride=stride, padding=padding, dilation=dilation,
                        groups=groups, x_zero_point=zx, w_zero_point=zw)
    finally:
        am.set_num_threads(0)
    expected = reference_conv(table, x, wt, 8, stride, padding, dilation, groups, zx, zw)
    assert got.dtype == reference.accumulator_dtype(np.abs(table).max(), 8, signed, cg * kh * kw,
                                                    zx, zw)
    np.testing.assert_array_equal(got, expected)


def test_conv2d_exact_equals_torch_float64():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    m = am.Multiplier.exact(8, signed=True)
    cases = [dict(stride=1, padding=1, dilation=1, groups=1, shape=(2, 6, 11, 9), o=4, k=3),
             dict(stride=2, padding=(0, 2), dilation=(2, 1), groups=3, shape=(1, 6, 12, 10), o=9, k=3),
             dict(stride=1, padding=1, dilation=1, groups=8, shape=(3, 8, 7, 7), o=8, k=3)]
    for case in cases:
        n, c, h, w = case["shape"]
        x = rng.integers(-128, 128, case["shape"]).astype(np.int8)
        wt = rng.integers(-128, 128, (case["o"], c // case["groups"], case["k"], case["k"])) \
            .astype(np.int8)
        zx, zw = 5, -3
        got = am.conv2d(x, wt, m, stride=case["stride"], padding=case["padding"],
                        dilation=case["dilation"], groups=case["groups"], x_zero_point=zx,
                        w_zero_point=zw)
        # padded taps hold zx, so (x - zx) is zero-padded: PyTorch's convention
        expected = torch.nn.functional.conv2d(
            torch.tensor(x, dtype=torch.float64) - zx, torch.tensor(wt, dtype=torch.float64) - zw,
            stride=case["stride"], padding=case["padding"], dilation=case["dilation"],
            groups=case["groups"]).numpy()
        np.testing.assert_array_equal(got, expected.astype(np.int64))


def test_conv2d_strided_inputs_and_output():
    rng = np.random.default_rng(5)
    table = rng.integers(0, 60000, (256, 256))
    m = am.Multiplier.from_table(table)
    x = rng.integers(0, 256, (2, 3, 10, 12)).astype(np.uint8)
    wt = rng.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)
    expected = reference_conv(table, x, wt, 8, (1, 1), (1, 1), (1, 1), 1, 0, 0)
    xs = np.zeros((2, 6, 10, 24), np.uint8)[:, ::2, :, ::2]
    xs[...] = x
    out = np.zeros((2, 3, 4, 10, 12), expected.dtype).transpose(0, 2, 3, 4, 1)[..., 0]
    got = am.conv2d(xs, np.asfortranarray(wt), m, padding=1, out=out)
    assert got is out
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("flip", [(2,), (3,), (1, 3), (0, 2, 3)])
@pytest.mark.parametrize("size", [5, 40])  # reversed axes: negative strides into x
def test_conv2d_reversed_axes(flip, size):
    # negative strides make negative element offsets ordinary; a reversed
    # width once read as padding in the tap table (found by fuzz_conv2d)
    rng = np.random.default_rng(size)
    table = rng.integers(0, 60000, (256, 256))
    m = am.Multiplier.from_table(table)
    x = rng.integers(0, 256, (2, 4, size, size)).astype(np.uint8)
    w = rng.integers(0, 256, (6, 2, 3, 3)).astype(np.uint8)
    view = np.ascontiguousarray(np.flip(x, flip))
    view = np.flip(view, flip)  # the same values through negative strides
    kw = dict(stride=(2, 1), padding=(2, 1), dilation=(1, 2), groups=2, x_zero_point=5,
              w_zero_point=9)
    got = am.conv2d(view, w, m, **kw)
    want = reference_conv(table, x, w, 8, (2, 1), (2, 1), (1, 2), 2, 5, 9)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("spec", ["exact", "drum:k=4"])
def test_conv2d_weights_in_any_layout(spec):
    # contiguous weights are regrouped by one copy, others element by element
    rng = np.random.default_rng(31)
    m = am.multiplier(spec)
    x = rng.integers(0, 256, (3, 6, 9, 9)).astype(np.uint8)
    w = rng.integers(0, 256, (4, 3, 3, 2)).astype(np.uint8)
    kw = dict(padding=1, groups=2, x_zero_point=7, w_zero_point=130)
    want = reference_conv(m.table(), x, w, 8, (1, 1), (1, 1), (1, 1), 2, 7, 130)
    layouts = {"contiguous": w,
               "channels last": np.ascontiguousarray(w.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2),
               "reversed kernel": np.flip(np.ascontiguousarray(np.flip(w, (2, 3))), (2, 3)),
               "inside a larger array": np.pad(w, ((0, 1), (0, 0), (1, 0), (0, 2)))[:4, :, 1:, :2]}
    for name, view in layouts.items():
        assert np.array_equal(view, w)
        np.testing.assert_array_equal(am.conv2d(x, view, m, **kw), want, err_msg=name)


@pytest.mark.parametrize("dtype, threads", [(np.uint8, 1), (np.uint16, 2)])
def test_conv2d_pixel_blocks_cross_images(dtype, threads):
    # conv2d streams batch*pixels in blocks of up to 4096: 50 images of 12 x 8
    # outputs put block edges mid-image; strides, dilation, uneven padding
    rng = np.random.default_rng(21)
    table = rng.integers(0, 60000, (256, 256))
    m = am.Multiplier.from_table(table)
    x = rng.integers(0, 256, (50, 2, 12, 13)).astype(dtype)
    wt = rng.integers(0, 256, (3, 2, 3, 2)).astype(dtype)
    params = dict(stride=(1, 2), padding=(1, 2), dilation=(1, 2))
    am.set_num_threads(threads)
    try:
        got = am.conv2d(x, wt, m, x_zero_point=7, w_zero_point=200, **params)
    finally:
        am.set_num_threads(0)
    expected = reference_conv(table, x, wt, 8, (1, 2), (1, 2), (1, 2), 1, 7, 200)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("threads", [2, 3, 4])
@pytest.mark.parametrize("kind", ["exact", "drum", "table"])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("batch, size", [(2, (20, 21)), (12, (11, 13))])
def test_conv2d_small_batches_split_across_threads(threads, kind, stride, batch, size):
    # at least two blocks per thread, a multiple of the threads: 2 images
    # are cut mid-image and mid-row (stride 1, 2 and 3 threads), 12 go
    # whole, 3 or 2 or 1 per block; the sums do not depend on the cuts
    rng = np.random.default_rng(threads * 10 + stride)
    table = {"exact": reference.exact_table(8, signed=False), "drum": drum_table(),
             "table": rng.integers(0, 60000, (256, 256))}[kind]
    m = am.Multiplier.exact(8) if kind == "exact" else am.Multiplier.from_table(table)
    x = rng.integers(0, 256, (batch, 4, *size)).astype(np.uint8)
    wt = rng.integers(0, 256, (5, 4, 3, 3)).astype(np.uint8)
    expected = reference_conv(table, x, wt, 8, (stride, stride), (1, 1), (1, 1), 1, 3, 128)
    am.set_num_threads(threads)
    try:
        got = am.conv2d(x, wt, m, stride=stride, padding=1, x_zero_point=3, w_zero_point=128)
    finally:
        am.set_num_threads(0)
    np.testing.assert_array_equal(got, expected)


def test_conv2d_large_batch_uses_bounded_blocks():
    # a batch whose full im2col would be N*OH*OW*C*9 bytes; only blocks are gathered
    rng = np.random.default_rng(9)
    m = am.Multiplier.exact(8)
    x = rng.integers(0, 256, (64, 3, 32, 32)).astype(np.uint8)
    wt = rng.integers(0, 256, (8, 3, 3, 3)).astype(np.uint8)
    got = am.conv2d(x, wt, m, padding=1)
    expected = reference_conv(reference.exact_table(8, signed=False), x, wt, 8, (1, 1), (1, 1),
                              (1, 1), 1, 0, 0)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("kwargs, error, text", [
    (dict(groups=2), am.ShapeError, "groups"),
    (dict(groups=0), am.InvalidArgumentError, "groups"),
    (dict(stride=0), am.InvalidArgumentError, "stride"),
    (dict(padding=-1), am.InvalidArgumentError, "padding"),
    (dict(dilation=0), am.InvalidArgumentError, "dilation"),
    (dict(dilation=5), am.ShapeError, "no output"),
    (dict(x_zero_point=300), am.OperandRangeError, "x_zero_point"),
    (dict(stride=(1, 2, 3)), am.InvalidArgumentError, "stride"),
])
def test_conv2d_bad_parameters(kwargs, error, text):
    m = am.Multiplier.exact(8)
    x = np.ones((1, 3, 5, 5), np.uint8)
    w = np.ones((4, 3, 3, 3), np.uint8)
    with pytest.raises(error, match=text):
        am.conv2d(x, w, m, **kwargs)


def test_conv2d_bad_operands_and_untouched_output():
    m = am.Multiplier.exact(8)
    x = np.ones((1, 3, 5, 5), np.uint8)
    w = np.ones((4, 3, 3, 3), np.uint8)
    with pytest.raises(am.DTypeError):
        am.conv2d(x.astype(np.int8), w, m)
    with pytest.raises(am.ShapeError):
        am.conv2d(x[0], w, m)
    with pytest.raises(am.ShapeError, match="input channels"):
        am.conv2d(x, np.ones((4, 2, 3, 3), np.uint8), m)
    out = np.full((1, 4, 3, 3), -7, np.int64)
    with pytest.raises(am.ShapeError):
        am.conv2d(x, w, m, out=np.full((1, 4, 4, 3), -7, np.int64))
    with pytest.raises(am.AliasingError):
        am.conv2d(x, w, m, out=np.lib.stride_tricks.as_strided(out, strides=(0, 0, 0, 8)))
    with pytest.raises(am.OperandRangeError):
        am.conv2d(x.astype(np.uint16) * 300, w, m, out=out)
    assert (out == -7).all()


@pytest.mark.parametrize("spec", ["table", "drum:bits=16,k=4", "truncated:bits=16,cut=8",
                                  "truncated:bits=16,cut=9"])
def test_conv2d_large_images_and_staged_outputs(spec):
    # large images and small ones through the wide-pixel path (stride 1); 16-bit
    # DRUM runs byte-split GEMMs of its factors, truncation with cut 8 the
    # exact GEMM plus a table GEMM of its low bytes, and a 16-bit function
    # plan (cut 9) stages its sums. All write into a strided output.
    rng = np.random.default_rng(33)
    if spec == "table":
        table = rng.integers(0, 60000, (256, 256))
        m = am.Multiplier.from_table(table)
        x = rng.integers(0, 256, (1, 2, 90, 90)).astype(np.uint8)
        dtype = np.uint8
    else:
        m = am.Multiplier.from_spec(spec)
        # codes below 2^8 need no more bits of either model
        table = drum_table(bits=8, k=4) if spec.startswith("drum") else truncated_table(int(spec[-1]))
        x = rng.integers(0, 256, (2, 2, 9, 7)).astype(np.uint16)
        dtype = np.uint16
    wt = rng.integers(0, 256, (1, 2, 3, 3)).astype(dtype)
    shape = (x.shape[0], 1, x.shape[2], x.shape[3])
    expected = reference_conv(table, x, wt, 8, (1, 1), (1, 1), (1, 1), 1, 5, 9)
    out = np.zeros(shape[:3] + (2 * shape[3],), np.int64)[..., ::2]
    got = am.conv2d(x, wt, m, padding=1, x_zero_point=5, w_zero_point=9, out=out)
    assert got is out
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("spec", ["mitchell:bits=16", "mitchell:bits=16,signed=1",
                                  "ilm:bits=16,iterations=2,signed=1", "roba:bits=16,signed=1"])
@pytest.mark.parametrize("threads", [1, 2])
def test_conv2d_wide_families_without_tables(spec, threads):
    # 16-bit codes over their whole range: Mitchell's and ILM's GEMM blocks in
    # vector lanes (function plan), RoBA as byte-split GEMMs of its rank-2
    # factors; groups, stride, padding and zero points against products of
    # the families' own definitions
    from kernel_cases import ilm_values, mitchell_values, roba_rounded
    m = am.Multiplier.from_spec(spec)
    if spec.startswith("mitchell"):
        product = mitchell_values
    elif spec.startswith("ilm"):
        def product(a, b):
            return ilm_values(a, b, 2)
    else:
        def product(a, b):
            return roba_rounded(a) * b + a * roba_rounded(b) - roba_rounded(a) * roba_rounded(b)
    rng = np.random.default_rng(len(spec) + threads)
    lo, hi = m.operand_range
    dtype = np.int16 if m.signed else np.uint16
    x = rng.integers(lo, hi + 1, (2, 4, 7, 6)).astype(dtype)
    wt = rng.integers(lo, hi + 1, (6, 2, 3, 3)).astype(dtype)
    x.flat[::13], wt.flat[::7] = lo, hi
    zx, zw = int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))
    stride, padding, groups = (2, 1), (1, 2), 2
    am.set_num_threads(threads)
    try:
        got = am.conv2d(x, wt, m, stride=stride, padding=padding, groups=groups,
                        x_zero_point=zx, w_zero_point=zw)
    finally:
        am.set_num_threads(0)
    padded = np.full((2, 4, 7 + 2 * padding[0], 6 + 2 * padding[1]), zx, np.int64)
    padded[:, :, padding[0]:padding[0] + 7, padding[1]:padding[1] + 6] = x
    oh, ow = got.shape[2:]
    assert (oh, ow) == ((7 + 2 - 3) // 2 + 1, (6 + 4 - 3) // 1 + 1)
    want = np.empty(got.shape, np.int64)
    w64 = wt.astype(np.int64)
    for oc in range(6):
        g = oc // 3
        for y in range(oh):
            for xx in range(ow):
                patch = padded[:, 2 * g:2 * g + 2, y * stride[0]:y * stride[0] + 3,
                               xx * stride[1]:xx * stride[1] + 3]
                # sum of M(x, w) - zw x - zx w + zx zw over the taps
                want[:, oc, y, xx] = (product(patch, w64[oc]).sum(axis=(1, 2, 3))
                                      - zw * patch.sum(axis=(1, 2, 3)) - zx * w64[oc].sum()
                                      + 2 * 9 * zx * zw)
    np.testing.assert_array_equal(got, want)


def test_conv2d_per_row_gather_of_images_too_large_to_pad():
    # the per-row path copies taps from each image padded once, up to 4 MiB
    # per image (conv.cpp, kPaddedRowBytes); beyond that the clamped gather
    # reads the image itself: 2 x 1502 x 1503 padded codes here
    rng = np.random.default_rng(71)
    x = rng.integers(0, 256, (1, 2, 1500, 1501)).astype(np.uint8)
    w = rng.integers(0, 256, (3, 2, 3, 3)).astype(np.uint8)
    got = am.conv2d(x, w, am.Multiplier.exact(8), stride=2, padding=1, x_zero_point=5,
                    w_zero_point=9)
    # padded taps hold the zero point: 0 once it is taken off
    padded = np.pad(x.astype(np.int64) - 5, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    want = np.einsum("ncyxij,ocij->noyx", windows, w.astype(np.int64) - 9)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kwargs", [
    dict(groups=2), dict(groups=0), dict(stride=0), dict(padding=-1), dict(dilation=0),
    dict(dilation=5), dict(stride=(0, 1)), dict(padding=(0, -3)),
])
def test_output_shape_reports_what_conv2d_reports(kwargs):
    # one check in C serves both entry points: same class, same message
    m = am.Multiplier.exact(8)
    x = np.ones((1, 3, 5, 5), np.uint8)
    w = np.ones((4, 3, 3, 3), np.uint8)
    with pytest.raises(am.ApproxmulError) as conv:
        am.conv2d(x, w, m, **kwargs)
    with pytest.raises(am.ApproxmulError) as shape:
        am.conv2d_output_shape(x.shape, w.shape, **kwargs)
    assert type(shape.value) is type(conv.value) and str(shape.value) == str(conv.value)


@pytest.mark.parametrize("stride, padding, dilation, groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), ((2, 3), (0, 2), (2, 1), 2), (3, 4, 3, 4)])
def test_output_shape_is_the_shape_conv2d_gives(stride, padding, dilation, groups):
    m = am.Multiplier.exact(8)
    x = np.ones((2, 4, 11, 9), np.uint8)
    w = np.ones((8, 4 // groups, 3, 2), np.uint8)
    geom = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    shape = am.conv2d_output_shape(x.shape, w.shape, **geom)
    assert am.conv2d(x, w, m, **geom).shape == shape
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.conv2d(torch.ones(x.shape), torch.ones(w.shape), **geom).shape
    assert shape == tuple(want)


def im2col_reference(table, x, w, padding, zx, zw, stride=(1, 1), groups=1):
    """The same sum as reference_conv, vectorised over pixels (one output channel at a time)."""
    table = np.asarray(table, np.int64)
    n, c, h, width = x.shape
    o, cg, kh, kw = w.shape
    (ph, pw), (sh, sw) = padding, stride
    padded = np.full((n, c, h + 2 * ph, width + 2 * pw), zx, np.int64)
    padded[:, :, ph:ph + h, pw:pw + width] = x
    win = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
    win = win[:, :, ::sh, ::sw]  # n c oh ow kh kw
    oh, ow = win.shape[2:4]
    og = o // groups
    out = np.zeros((n, o, oh, ow), np.int64)
    w64 = w.astype(np.int64)
    for oc in range(o):
        g = oc // og
        cols = win[:, g * cg:(g + 1) * cg].transpose(0, 2, 3, 1, 4, 5).reshape(n, oh, ow, -1)
        wv = w64[oc].reshape(-1)
        out[:, oc] = (table[cols & 0xff, wv & 0xff].sum(-1) - zw * cols.sum(-1)
                      - zx * wv.sum() + wv.size * zx * zw)
    return out


RESNET20 = [(3, 16, 32), (16, 16, 32), (32, 32, 16), (64, 64, 8)]


@pytest.mark.parametrize("cin, cout, size", RESNET20)
@pytest.mark.parametrize("kind", ["exact-u8", "exact-s8", "drum-u8", "table-u8"])
def test_conv2d_resnet20_shapes(cin, cout, size, kind):
    # ResNet-20's CIFAR-10 layers take the wide-pixel path (stride 1, padding
    # 1): padded planes, pixels over the padded width, dropped columns
    rng = np.random.default_rng(cin * 100 + size)
    signed = kind.endswith("s8")
    if kind.startswith("exact"):
        table = reference.exact_table(8, signed=signed)
        m = am.Multiplier.exact(8, signed=signed)
    else:
        table = drum_table(k=4) if kind == "drum-u8" else rng.integers(0, 60000, (256, 256))
        m = am.Multiplier.from_table(table)
    low, high = (-128, 128) if signed else (0, 256)
    dtype = np.int8 if signed else np.uint8
    n = 3  # images split across pixel blocks
    x = rng.integers(low, high, (n, cin, size, size)).astype(dtype)
    wt = rng.integers(low, high, (cout, cin, 3, 3)).astype(dtype)
    zx, zw = int(rng.integers(low, high)), int(rng.integers(low, high))
    expected = im2col_reference(table, x, wt, (1, 1), zx, zw)
    for threads in (1, 2):
        am.set_num_threads(threads)
        try:
            got = am.conv2d(x, wt, m, padding=1, x_zero_point=zx, w_zero_point=zw)
            got64 = am.conv2d(x, wt, m, padding=1, x_zero_point=zx, w_zero_point=zw,
                              out=np.zeros(expected.shape, np.int64))
            first = am.conv2d(x[:1], wt, m, padding=1, x_zero_point=zx, w_zero_point=zw)
        finally:
            am.set_num_threads(0)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(got64, expected)
        np.testing.assert_array_equal(first, expected[:1])


@pytest.mark.parametrize("stride, groups, zero", [((2, 2), 1, True), ((1, 1), 4, True),
                                                  ((1, 1), 1, False), ((2, 1), 2, True)])
def test_conv2d_resnet20_batch64_variants(stride, groups, zero):
    # batch 64 of 16 x 32 x 32 (exact, so the reference is a table lookup
    # that stays small): stride 2 and grouped layers, with and without zero points
    rng = np.random.default_rng(64)
    m = am.Multiplier.exact(8)
    x = rng.integers(0, 256, (64, 16, 32, 32)).astype(np.uint8)
    wt = rng.integers(0, 256, (16, 16 // groups, 3, 3)).astype(np.uint8)
    zx, zw = (5, 131) if zero else (0, 0)
    got = am.conv2d(x, wt, m, stride=stride, padding=1, groups=groups, x_zero_point=zx,
                    w_zero_point=zw)
    expected = im2col_reference(reference.exact_table(8, signed=False), x, wt, (1, 1), zx, zw,
                                stride=stride, groups=groups)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_conv2d_batch64_small_images_balanced_blocks(threads):
    # 64 images of 64 x 8 x 8 under a random table: on 2 threads the blocks
    # are 4 whole images (16 jobs), not 9 blocks of 7 and one of 1; the
    # sums do not depend on the split (4 output channels keep the
    # reference's lookups few)
    rng = np.random.default_rng(88)
    table = rng.integers(0, 60000, (256, 256))
    m = am.Multiplier.from_table(table)
    x = rng.integers(0, 256, (64, 64, 8, 8)).astype(np.uint8)
    wt = rng.integers(0, 256, (4, 64, 3, 3)).astype(np.uint8)
    expected = im2col_reference(table, x, wt, (1, 1), 9, 140)
    am.set_num_threads(threads)
    try:
        got = am.conv2d(x, wt, m, padding=1, x_zero_point=9, w_zero_point=140)
    finally:
        am.set_num_threads(0)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("spec", ["drum:k=4", "drum:k=3,signed=1", "drum:bits=6,k=3", "dsm:m=4",
                                  "dsm:m=4,signed=1"])
@pytest.mark.parametrize("geometry", [
    dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1),   # padded images
    dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=1),   # per-row gathers
    dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=3)])
@pytest.mark.parametrize("zero_points", [(0, 0), (7, 0), (5, 3)])
def test_conv2d_rank1_models_on_mapped_codes(spec, geometry, zero_points):
    # rank-1 models whose factors are byte codes (DRUM, DSM) multiply codes
    # mapped once through their factors by exact GEMMs, with the cross
    # terms of the original codes (conv.cpp, choose_mapping)
    m = am.multiplier(spec)
    rng = np.random.default_rng(zlib.crc32(repr((spec, geometry, zero_points)).encode()))
    dtype = np.int8 if m.signed else np.uint8
    lo, hi = (-(1 << (m.bits - 1)), (1 << (m.bits - 1)) - 1) if m.signed else (0, (1 << m.bits) - 1)
    x = rng.integers(lo, hi + 1, (3, 6, 9, 10)).astype(dtype)
    w = rng.integers(lo, hi + 1, (6, 6 // geometry["groups"], 3, 2)).astype(dtype)
    zx, zw = (-z for z in zero_points) if m.signed else zero_points
    got = am.conv2d(x, w, m, **geometry, x_zero_point=zx, w_zero_point=zw)
    want = reference_conv(m.table(), x, w, m.bits, geometry["stride"], geometry["padding"],
                          geometry["dilation"], geometry["groups"], zx, zw)
    np.testing.assert_array_equal(got, want)
