"""approxmul_conv2d_output_shape: PyTorch's output shape for every valid geometry, conv2d's
own status and message for every invalid one, through the C symbol and the Python wrapper."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import approxmul_cffi as am
from approxmul_cffi._library import ffi, lib


def c_output_shape(x_shape, w_shape, stride, padding, dilation, groups, multiplier=None,
                   zx=0, zw=0):
    """(status, shape, message) straight from the C function; shape None on error."""
    out = ffi.new("int64_t[4]", [-7] * 4)
    handle = ffi.NULL if multiplier is None else multiplier.handle
    status = lib.approxmul_conv2d_output_shape(
        handle, ffi.new("int64_t[4]", list(x_shape)), ffi.new("int64_t[4]", list(w_shape)),
        ffi.new("int64_t[2]", list(stride)), ffi.new("int64_t[2]", list(padding)),
        ffi.new("int64_t[2]", list(dilation)), groups, zx, zw, out,
        ffi.NULL if multiplier is None else ffi.new("approxmul_dtype *"))
    message = ffi.string(lib.approxmul_last_error()).decode()
    if status != lib.APPROXMUL_OK:
        assert list(out) == [-7] * 4  # nothing written on error
        return status, None, message
    return status, tuple(out), message


def c_conv2d_status(x_shape, w_shape, stride, padding, dilation, groups, multiplier, zx=0, zw=0):
    """(status, message) of approxmul_conv2d itself on zero-filled operands."""
    x = np.zeros(x_shape, np.uint8)
    w = np.zeros(w_shape, np.uint8)
    out = np.zeros(16, np.int64)
    arrays = [ffi.new("int64_t[4]", list(v)) for v in
              (x_shape, x.strides, w_shape, w.strides, [1, 1, 1, 1], [1, 1, 1, 1])]
    status = lib.approxmul_conv2d(
        multiplier.handle, lib.APPROXMUL_UINT8, ffi.from_buffer(x), arrays[0], arrays[1],
        lib.APPROXMUL_UINT8, ffi.from_buffer(w), arrays[2], arrays[3],
        ffi.new("int64_t[2]", list(stride)), ffi.new("int64_t[2]", list(padding)),
        ffi.new("int64_t[2]", list(dilation)), groups, zx, zw, lib.APPROXMUL_INT64,
        ffi.from_buffer(out), arrays[4], arrays[5])
    return status, ffi.string(lib.approxmul_last_error()).decode()


def torch_shape(torch, x_shape, w_shape, stride, padding, dilation, groups):
    """PyTorch's conv2d output shape (meta tensors: no data), or None where it refuses."""
    x = torch.empty(x_shape, device="meta")
    w = torch.empty(w_shape, device="meta")
    try:
        return tuple(torch.nn.functional.conv2d(x, w, stride=stride, padding=padding,
                                                dilation=dilation, groups=groups).shape)
    except RuntimeError:
        return None


geometry = dict(n=st.integers(1, 3), groups=st.integers(1, 3), cg=st.integers(1, 3),
                og=st.integers(1, 3), h=st.integers(1, 12), w=st.integers(1, 12),
                kh=st.integers(1, 5), kw=st.integers(1, 5), sh=st.integers(1, 4),
                sw=st.integers(1, 4), ph=st.integers(0, 3), pw=st.integers(0, 3),
                dh=st.integers(1, 3), dw=st.integers(1, 3))


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")  # CI installs it (docs/testing.md)


@settings(max_examples=300, deadline=None)
@given(**geometry)
def test_shape_equals_torch(torch, n, groups, cg, og, h, w, kh, kw, sh, sw, ph, pw, dh, dw):
    x_shape, w_shape = (n, groups * cg, h, w), (groups * og, cg, kh, kw)
    stride, padding, dilation = (sh, sw), (ph, pw), (dh, dw)
    status, shape, message = c_output_shape(x_shape, w_shape, stride, padding, dilation, groups)
    want = torch_shape(torch, x_shape, w_shape, stride, padding, dilation, groups)
    if want is None:  # torch: kernel larger than the padded input
        assert status == lib.APPROXMUL_ERR_SHAPE and "leaves no output" in message
    else:
        assert status == lib.APPROXMUL_OK and shape == want
        assert am.conv2d_output_shape(x_shape, w_shape, stride=stride, padding=padding,
                                      dilation=dilation, groups=groups) == want


BAD = [  # (x_shape, w_shape, stride, padding, dilation, groups, zx, status, words)
    ((1, 4, 5, 5), (6, 2, 3, 3), (1, 1), (0, 0), (1, 1), 4, 0, "SHAPE", "does not divide"),
    ((1, 4, 5, 5), (6, 3, 3, 3), (1, 1), (0, 0), (1, 1), 2, 0, "SHAPE", "channels per group"),
    ((1, 4, 5, 5), (6, 2, 0, 3), (1, 1), (0, 0), (1, 1), 2, 0, "SHAPE", "is empty"),
    ((1, 4, 5, 5), (6, 2, 3, 3), (0, 1), (0, 0), (1, 1), 2, 0, "INVALID_ARGUMENT", "stride"),
    ((1, 4, 5, 5), (6, 2, 3, 3), (1, 1), (-1, 0), (1, 1), 2, 0, "INVALID_ARGUMENT", "padding"),
    ((1, 4, 5, 5), (6, 2, 3, 3), (1, 1), (0, 0), (1, 0), 2, 0, "INVALID_ARGUMENT", "dilation"),
    ((1, 4, 5, 5), (6, 2, 3, 3), (1, 1), (0, 0), (3, 1), 2, 0, "SHAPE", "height leaves no"),
    ((1, 4, 5, 5), (6, 2, 3, 3), (1, 1), (0, 0), (1, 1), 0, 0, "INVALID_ARGUMENT", "groups"),
    ((1, 4, -5, 5), (6, 2, 3, 3), (1, 1), (0, 0), (1, 1), 2, 0, "SHAPE", "negative size"),
    ((1, 4, 5, 5), (6, 2, 3, 3), (1, 1), (0, 0), (1, 1), 2, 256, "OUT_OF_RANGE", "x_zero_point"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[-1] for c in BAD])
def test_bad_arguments_fail_as_conv2d_does(case):
    *args, zx, status_name, words = case
    exact = am.Multiplier.exact(8)
    status, shape, message = c_output_shape(*args, multiplier=exact, zx=zx)
    assert status == getattr(lib, "APPROXMUL_ERR_" + status_name) and shape is None
    assert words in message
    if min(args[0]) >= 0:  # conv2d's own check, on real (empty-safe) operands
        assert c_conv2d_status(*args, exact, zx=zx) == (status, message)
    with pytest.raises(am.ApproxmulError, match=words):
        am.conv2d_output_shape(args[0], args[1], stride=args[2], padding=args[3],
                               dilation=args[4], groups=args[5], multiplier=exact, x_zero_point=zx)


def test_zero_points_checked_only_with_a_multiplier():
    geometry = ((1, 1, 4, 4), (1, 1, 2, 2), (1, 1), (0, 0), (1, 1), 1)
    assert c_output_shape(*geometry, zx=300)[1] == (1, 1, 3, 3)
    signed = am.Multiplier.exact(4, signed=True)
    status, _, message = c_output_shape(*geometry, multiplier=signed, zw=8)
    assert status == lib.APPROXMUL_ERR_OUT_OF_RANGE and "w_zero_point: 8" in message


def test_conv2d_returns_the_shape_it_reports():
    m = am.Multiplier.exact(8)
    x = np.ones((2, 6, 9, 7), np.uint8)
    w = np.ones((4, 3, 3, 2), np.uint8)
    kwargs = dict(stride=(2, 1), padding=(1, 2), dilation=(1, 3), groups=2)
    shape = am.conv2d_output_shape(x.shape, w.shape, multiplier=m, **kwargs)
    assert am.conv2d(x, w, m, **kwargs).shape == shape == (2, 4, 5, 8)
