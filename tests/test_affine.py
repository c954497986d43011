"""approxmul_quantize / approxmul_dequantize (approxmul_cffi.affine, QParams) agree bit
for bit with the NumPy statements quantize_reference / dequantize_reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from approxmul_cffi import affine, errors, quant
from approxmul_cffi._library import ffi, lib

CODE_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-2**15, 2**15 - 1),
               "uint16": (0, 2**16 - 1)}


def sample_values(rng, shape, scale, dtype):
    """Values around the grid: ties at exactly (k + 1/2) * scale, +-inf, huge, -0.0."""
    size = int(np.prod(shape))
    kind = rng.integers(0, 6, size=size)
    k = rng.integers(-300, 300, size=size).astype(np.float64)
    x = rng.normal(0, 200, size=size) * np.resize(scale, size)
    x = np.where(kind == 1, (k + 0.5) * np.resize(scale, size), x)  # ties when scale is 2^e
    x = np.where(kind == 2, rng.choice([np.inf, -np.inf, 1e300, -1e300, -0.0], size=size), x)
    x = np.where(kind == 3, k, x)
    with np.errstate(over="ignore"):  # 1e300 is inf in float32, on purpose
        return x.reshape(shape).astype(dtype)


@st.composite
def problems(draw):
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=ndim, max_size=ndim)))
    axis = draw(st.none() | st.integers(-ndim, ndim - 1)) if ndim else None
    code = draw(st.sampled_from(sorted(CODE_RANGES)))
    lo, hi = CODE_RANGES[code]
    qmin = draw(st.integers(lo, hi))
    qmax = draw(st.integers(qmin, hi))
    channels = shape[axis] if axis is not None else None
    count = 1 if channels is None else channels
    # powers of two make (k + 1/2) * scale exact ties; others test the division
    exponents = draw(st.lists(st.integers(-60, 60), min_size=count, max_size=count))
    mantissas = draw(st.lists(st.sampled_from([1.0, 0.1, 0.37, 1.5, 3.0]), min_size=count,
                              max_size=count))
    scale = np.ldexp(np.array(mantissas), np.array(exponents, dtype=np.int64))
    zero_point = np.array(draw(st.lists(st.integers(-2**24, 2**24) | st.integers(qmin, qmax),
                                        min_size=count, max_size=count)), dtype=np.int64)
    if channels is None:
        scale, zero_point = scale[0], zero_point[0]
    return shape, axis, code, qmin, qmax, scale, zero_point


@settings(max_examples=300, deadline=None)
@given(problem=problems(), real=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2**32 - 1))
def test_quantize_matches_the_reference(problem, real, seed):
    shape, axis, code, qmin, qmax, scale, zero_point = problem
    rng = np.random.default_rng(seed)
    scale_along = scale if axis is None else \
        np.broadcast_to(scale.reshape(quant._channel_shape(len(shape), axis)), shape).ravel()
    x = sample_values(rng, shape, scale_along, real)
    args = (x, scale, zero_point, qmin, qmax)
    with np.errstate(over="ignore"):  # x / tiny scale overflows to inf, then clamps
        want = affine.quantize_reference(*args, axis=axis, dtype=code)
    got = affine.quantize(*args, axis=axis, dtype=code)
    assert got.dtype == np.dtype(code) and got.shape == shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("scale", [0.1, 1 / 3, 7.3, 0.0123])
@pytest.mark.parametrize("step", [0, 1])
def test_values_next_to_ties_round_as_the_division_does(scale, step):
    """Values at, and one unit in the last place around, (k + 1/2) s: many
    round to another code by the reciprocal x * (1/s), a shortcut a kernel
    might take (and, on a Zen 4, measured slower than the division)."""
    k = np.random.default_rng(5).integers(-30000, 30000, size=2000).astype(np.float64)
    ties = (k + 0.5) * scale
    x = np.concatenate([ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
    by_reciprocal = affine.round_half_away(x * (1 / scale))
    assert (by_reciprocal != affine.round_half_away(x / scale)).sum() > 100  # the data bites
    # step 1: per-channel scales, the loop that always divides
    args = (x, scale, 0) if step == 0 else (x, np.full(len(x), scale), np.zeros(len(x), int))
    axis = None if step == 0 else 0
    got = affine.quantize(*args, -2**15, 2**15 - 1, axis=axis, dtype="int16")
    want = affine.quantize_reference(*args, -2**15, 2**15 - 1, axis=axis, dtype="int16")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("code, qmin, qmax, zero_point", [
    ("uint8", 0, 255, 128), ("int8", -128, 127, 0), ("uint8", 0, 255, 3),
    ("uint16", 0, 1023, 512),  # a 10-bit range: the widest the float32 lanes take
    ("int16", -600, 600, -400)])
def test_float32_values_next_to_ties_round_as_the_division_does(code, qmin, qmax, zero_point):
    """float32 activations with one scale take float32 lanes (x * fl32(1/s))
    and redo the blocks where a value lies close to a rounding point: values
    at, and one or two float32 units in the last place around, (k + 1/2) s,
    for scales of every kind, with a share of them per block of 32 that
    leaves most blocks clean, must round as the division does."""
    rng = np.random.default_rng(11)
    differ = 0
    for scale in np.concatenate([rng.uniform(0.5, 1, 12) * 2.0 ** rng.integers(-20, 20, 12),
                                 [1 / 3, 0.1, 6 / 255, 2.0 ** -7, 3e-36]]):
        k = rng.integers(-1100, 1100, size=4096).astype(np.float64)
        ties = ((k + 0.5) * scale).astype(np.float32)
        near = [ties]
        for step in (1, 2):
            near += [ties.view(np.int32) + step, ties.view(np.int32) - step]
        near = np.concatenate([n.view(np.float32) if n.dtype == np.int32 else n for n in near])
        x = rng.normal(0, 300 * scale, size=32 * len(near)).astype(np.float32)
        x[::32] = near  # one per block of 32
        with np.errstate(over="ignore"):
            rcp = np.float32(1 / scale)
            fast = np.trunc(np.minimum(np.abs(near) * rcp, np.float32(2e9)) + np.float32(0.5))
        differ += int((fast != np.trunc(np.abs(near.astype(np.float64) / scale) + 0.5)).sum())
        got = affine.quantize(x, scale, zero_point, qmin, qmax, dtype=code)
        want = affine.quantize_reference(x, scale, zero_point, qmin, qmax, dtype=code)
        np.testing.assert_array_equal(got, want)
    assert differ > 1000  # the data bites: the float32 lanes alone would round these wrong


@pytest.mark.parametrize("axes", [(0, 2, 3, 1), (3, 2, 1, 0), (0, 1, 3, 2)])
def test_per_tensor_codes_of_a_dense_permuted_layout_keep_it(axes):
    """A channels-last image (or any dense axis order) is quantized where it
    lies: its codes come back in the same layout, equal to those of a
    contiguous copy; a strided slice is still read correctly."""
    rng = np.random.default_rng(2)
    stored = rng.normal(0, 3, (2, 5, 6, 3)).astype(np.float32)
    x = stored.transpose(np.argsort(axes))  # memory order `axes`, shape permuted
    assert not x.flags.c_contiguous
    qp = quant.QParams(0.05, 100, signed=False)
    codes = qp.quantize(x)
    assert codes.strides == tuple(np.array(x.strides) // 4)  # the layout kept
    np.testing.assert_array_equal(codes, qp.quantize(np.ascontiguousarray(x)))
    np.testing.assert_array_equal(codes, qp.quantize_reference(x))
    sliced = x[:, ::2]
    np.testing.assert_array_equal(qp.quantize(sliced), qp.quantize_reference(sliced))


@settings(max_examples=300, deadline=None)
@given(problem=problems(), seed=st.integers(0, 2**32 - 1), wide=st.booleans())
def test_dequantize_matches_the_reference(problem, seed, wide):
    shape, axis, code, qmin, qmax, scale, zero_point = problem
    rng = np.random.default_rng(seed)
    code = "int32" if wide else code
    lo, hi = (-2**31, 2**31 - 1) if wide else (qmin, qmax)
    codes = rng.integers(lo, hi, size=shape, endpoint=True).astype(code)
    want = affine.dequantize_reference(codes, scale, zero_point, axis=axis)
    got = affine.dequantize(codes, scale, zero_point, axis=axis)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    single = affine.dequantize(codes, scale, zero_point, axis=axis, dtype=np.float32)
    assert single.dtype == np.float32
    np.testing.assert_array_equal(single, np.asarray(want).astype(np.float32))


@pytest.mark.parametrize("shape, axis", [
    ((3, 5, 6000), 1),       # rows of 6000: scalar parameters, blocks end inside rows
    ((2, 40000), None),      # per tensor over three blocks of 16384
    ((200, 7, 63), 1),       # rows of 63: per-element parameters
    ((100, 9, 64), 1),       # rows of 64: the first length with scalar parameters
    ((5000, 13), 1),         # per channel on the last axis (rows of one)
    ((13, 5000), 0),
])
def test_large_arrays_cross_block_and_row_boundaries(shape, axis):
    rng = np.random.default_rng(7)
    channels = 1 if axis is None else shape[axis]
    scale = np.exp2(rng.uniform(-8, 8, size=channels))
    zero_point = rng.integers(-20, 20, size=channels)
    if axis is None:
        scale, zero_point = scale[0], zero_point[0]
    for real in (np.float32, np.float64):
        x = (rng.normal(0, 100, size=shape) * np.max(scale)).astype(real)
        want = affine.quantize_reference(x, scale, zero_point, -128, 127, axis=axis)
        codes = affine.quantize(x, scale, zero_point, -128, 127, axis=axis)
        np.testing.assert_array_equal(codes, want)
        assert len(np.unique(codes)) > 100  # the values span the grid, not just its ends
        np.testing.assert_array_equal(
            affine.dequantize(codes, scale, zero_point, axis=axis),
            affine.dequantize_reference(codes, scale, zero_point, axis=axis))


def test_worked_values():
    # ties round away from zero; +-inf clamp; -0.0 and tiny values give the zero point
    x = np.array([-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, np.inf, -np.inf, 1e-300, 200.0])
    assert affine.quantize(x, 1.0, 0, -128, 127).tolist() == \
        [-3, -2, -1, 0, 1, 2, 3, 127, -128, 0, 127]
    assert affine.quantize(x, 0.5, 10, 0, 255, dtype=np.uint8).tolist() == \
        [5, 7, 9, 10, 11, 13, 15, 255, 0, 10, 255]
    # float32 0.45 is 0.4499999881..., below the tie; in float64 0.45 / 0.1 is the tie 4.5
    # (0.35 / 0.1 is 3.4999999999999996 in both)
    for real, want in ((np.float32, [3, 4]), (np.float64, [3, 5])):
        x = real([0.35, 0.45])
        assert affine.quantize(x, 0.1, 0, -128, 127).tolist() == want
        assert affine.quantize_reference(x, 0.1, 0, -128, 127).tolist() == want


def test_qparams_use_the_library_and_keep_their_types():
    qp = quant.QParams(np.array([0.5, 0.25]), np.array([0, 3]), signed=True, axis=1)
    x = np.array([[1.0, -1.0], [0.3, np.inf]], np.float32)
    codes = qp.quantize(x)
    assert codes.dtype == np.int8 and codes.tolist() == [[2, -1], [1, 127]]
    np.testing.assert_array_equal(codes, qp.quantize_reference(x))
    real = qp.dequantize(codes)
    assert real.dtype == np.float64 and real.tolist() == [[1.0, -1.0], [0.5, 31.0]]
    out = np.full((2, 2), -7.0, np.float32)
    assert qp.dequantize(codes, out=out) is out and out.tolist() == real.tolist()
    into = np.full((2, 2), 99, np.int8)
    assert qp.quantize(x, out=into) is into and into.tolist() == codes.tolist()
    # the wrong code type or shape is refused before anything is written
    for bad in (np.full((2, 2), 99, np.uint8), np.full((2, 2), 99, np.int8).T,
                np.full((4,), 99, np.int8)):
        with pytest.raises((errors.DTypeError, errors.ShapeError)):
            qp.quantize(x, out=bad)
        assert (bad == 99).all()
    # converting the domain in the same buffer: bit for bit the copying conversion
    shifted = quant.convert_codes(into, signed=False, in_place=True)
    assert np.shares_memory(shifted, into)
    assert shifted.tolist() == quant.convert_codes(codes, signed=False).tolist() == [[130, 127],
                                                                                    [129, 255]]
    assert qp.dequantize(codes, dtype=np.float32).dtype == np.float32
    # lists and integer arrays are read as float64 / int64 as before
    assert qp.quantize([[1, -1], [0, 0]]).tolist() == [[2, -1], [0, 3]]
    assert qp.dequantize(codes.astype(np.int64)).tolist() == real.tolist()


def test_qparams_pickle_copy_and_stay_read_only():
    import copy
    import pickle
    qp = quant.QParams(np.array([0.5, 0.25]), np.array([0, 3]), signed=True, axis=0)
    x = np.array([[1.0, -1.0], [0.3, 2.0]])
    for twin in (pickle.loads(pickle.dumps(qp)), copy.deepcopy(qp), copy.copy(qp)):
        assert twin.to_dict() == qp.to_dict()
        np.testing.assert_array_equal(twin.quantize(x), qp.quantize(x))
    # the C call and the NumPy statement read the same parameters: no writing them
    with pytest.raises(ValueError, match="read-only"):
        qp.scale[0] = 1.0
    scale = np.array([0.5, 0.25])
    quant.QParams(scale, np.array([0, 0]), signed=True, axis=0)
    scale[0] = 2.0  # the caller's own array stays writable


def test_wider_codes_take_the_numpy_statement():
    # int64, uint32 and bool codes are outside the C call's types: same values, same dtypes
    for codes in (np.array([1, 2, -3], np.int64), np.array([1, 2, 3], np.uint32),
                  np.array([True, False, True])):
        want = affine.dequantize_reference(codes, 0.5, 1)
        np.testing.assert_array_equal(affine.dequantize(codes, 0.5, 1), want)
        out = np.zeros(3, np.float32)
        assert affine.dequantize(codes, 0.5, 1, out=out) is out
        np.testing.assert_array_equal(out, want.astype(np.float32))


def test_empty_arrays():
    for shape, axis, scale, zp in [((0,), None, 1.0, 0), ((3, 0), 0, [1.0] * 3, [0] * 3),
                                   ((0, 4), 1, [1.0] * 4, [0] * 4)]:
        codes = affine.quantize(np.zeros(shape, np.float32), scale, zp, -128, 127, axis=axis)
        assert codes.shape == shape and codes.dtype == np.int8
        real = affine.dequantize(codes, scale, zp, axis=axis)
        assert real.shape == shape and real.dtype == np.float64


def test_bad_python_arguments():
    x = np.ones((2, 3))
    with pytest.raises(errors.InvalidArgumentError, match=r"x\[4\] is NaN"):
        affine.quantize(np.array([1, 2, 3, 4, np.nan, np.nan]), 1.0, 0, -128, 127)
    with pytest.raises(errors.ShapeError, match="2 scales for 3 channels"):
        affine.quantize(x, [1.0, 1.0], [0, 0], -128, 127, axis=1)
    with pytest.raises(errors.ShapeError, match="axis 2"):
        affine.quantize(x, [1.0, 1.0], [0, 0], -128, 127, axis=2)
    with pytest.raises(errors.InvalidArgumentError, match="need an axis"):
        affine.quantize(x, [1.0, 1.0, 1.0], [0, 0, 0], -128, 127)
    with pytest.raises(errors.DTypeError, match="int32"):
        affine.quantize(x, 1.0, 0, -128, 127, dtype=np.int32)
    with pytest.raises(errors.OperandRangeError, match="qmin..qmax"):
        affine.quantize(x, 1.0, 0, -128, 128)
    with pytest.raises(errors.OperandRangeError, match="zero_point"):
        affine.quantize(x, 1.0, 2**24 + 1, -128, 127)
    with pytest.raises(errors.InvalidArgumentError, match="scale"):
        affine.quantize(x, 0.0, 0, -128, 127)
    with pytest.raises(errors.InvalidArgumentError, match="scale"):
        affine.dequantize(np.ones(3, np.int8), np.inf, 0)
    with pytest.raises(errors.DTypeError, match="float16"):
        affine.dequantize(np.ones(3, np.int8), 1.0, 0, dtype=np.float16)
    with pytest.raises(errors.DTypeError, match="integer codes"):
        affine.dequantize(np.ones(3), 1.0, 0)
    with pytest.raises(errors.ShapeError, match="C-contiguous"):
        affine.dequantize(np.ones((2, 3), np.int8), 1.0, 0, out=np.empty((3, 2)))
    qp = quant.choose_qparams(-1.0, 1.0, signed=True)
    with pytest.raises(ValueError, match="NaN"):
        qp.quantize(np.array([np.nan], np.float32))


@pytest.mark.parametrize("real", ["float32", "float64"])
def test_finite_quantization_refuses_infinities_and_otherwise_agrees(real):
    # approxmul_quantize_finite: the adapters' input stage, whose read-only
    # pass refuses +-inf as well as NaN (approxmul_quantize clamps +-inf)
    x = np.linspace(-4, 4, 50000).astype(real).reshape(2, 25000)
    plain = affine.quantize(x, [0.05, 0.02], [3, -7], -128, 127, axis=0)
    np.testing.assert_array_equal(
        affine.quantize(x, [0.05, 0.02], [3, -7], -128, 127, axis=0, finite=True), plain)
    out = np.full(x.shape, 9, np.int8)
    for index, value in (((1, 24999), np.inf), ((0, 0), -np.inf), ((1, 3), np.nan)):
        bad = x.copy()
        bad[index] = value
        flat = np.ravel_multi_index(index, x.shape)
        kind = "NaN" if np.isnan(value) else "infinite"
        with pytest.raises(errors.InvalidArgumentError, match=rf"x\[{flat}\] is {kind}"):
            affine.quantize(bad, [0.05, 0.02], [3, -7], -128, 127, axis=0, out=out, finite=True)
        assert (out == 9).all()
        if kind == "infinite":  # the plain call clamps it
            clamped = affine.quantize(bad, [0.05, 0.02], [3, -7], -128, 127, axis=0)
            assert clamped[index] == (127 if value > 0 else -128)
    qp = quant.choose_qparams(-1.0, 1.0, signed=True)
    with pytest.raises(ValueError, match="infinite"):
        qp.quantize(np.array([0.5, np.inf], np.float32), finite=True)
    assert qp.quantize(np.array([0.5, np.inf], np.float32)).tolist() == [64, 127]


def c_quantize(x, out, *, scale=(1.0,), zero_point=(0,), qmin=-128, qmax=127, sizes=None,
               x_type=None, out_dtype=None, null=()):
    scale = np.asarray(scale, np.float64)
    zero_point = np.asarray(zero_point, np.int32)
    sizes = sizes or (1, scale.size, x.size // scale.size)
    pointer = {"x": ffi.from_buffer(x), "scale": ffi.from_buffer("double[]", scale),
               "zero_point": ffi.from_buffer("int32_t[]", zero_point),
               "out": ffi.from_buffer(out)}
    for name in null:
        pointer[name] = ffi.NULL
    return lib.approxmul_quantize(
        *sizes, lib.APPROXMUL_FLOAT64 if x_type is None else x_type, pointer["x"],
        pointer["scale"], pointer["zero_point"], qmin, qmax,
        lib.APPROXMUL_INT8 if out_dtype is None else out_dtype, pointer["out"])


def test_failing_c_calls_write_nothing():
    x = np.array([1.0, 2.0, -3.0, 4.0, 0.5, -0.5])
    out = np.full(6, 77, np.int8)
    message = lambda: ffi.string(lib.approxmul_last_error()).decode()  # noqa: E731
    nan = x.copy()
    nan[5] = np.nan
    assert c_quantize(nan, out) == lib.APPROXMUL_ERR_INVALID_ARGUMENT
    assert message() == "x[5] is NaN, which has no code"
    assert c_quantize(x, out, scale=[1.0, -1.0], zero_point=[0, 0]) == \
        lib.APPROXMUL_ERR_INVALID_ARGUMENT and "scale[1]" in message()
    assert c_quantize(x, out, scale=[np.nan]) == lib.APPROXMUL_ERR_INVALID_ARGUMENT
    assert c_quantize(x, out, zero_point=[-2**24 - 1]) == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert c_quantize(x, out, qmin=5, qmax=4) == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert c_quantize(x, out, qmin=0, qmax=255) == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert c_quantize(x, out, x_type=3) == lib.APPROXMUL_ERR_DTYPE
    assert "approxmul_real_type" in message()
    assert c_quantize(x, out, out_dtype=lib.APPROXMUL_INT32) == lib.APPROXMUL_ERR_DTYPE
    assert c_quantize(x, out, out_dtype=0) == lib.APPROXMUL_ERR_DTYPE
    for name in ("x", "scale", "zero_point", "out"):
        assert c_quantize(x, out, null=[name]) == lib.APPROXMUL_ERR_NULL_POINTER
        assert message() == f"{name}: NULL pointer"
    assert c_quantize(x, out, sizes=(1, 1, -6)) == lib.APPROXMUL_ERR_SHAPE
    assert c_quantize(x, out, sizes=(2**40, 1, 2**40)) == lib.APPROXMUL_ERR_OVERFLOW
    assert c_quantize(x, x.view(np.int8)[8:]) == lib.APPROXMUL_ERR_ALIASING
    assert (out == 77).all() and np.isnan(nan[5]) and x[1] == 2.0
    assert c_quantize(x, out) == lib.APPROXMUL_OK and message() == ""
    assert out.tolist() == [1, 2, -3, 4, 1, -1]


def test_failing_c_dequantize_writes_nothing():
    codes = np.array([1, -2, 3], np.int8)
    out = np.full(3, 5.0)
    scale, zp = np.array([0.5]), np.array([1], np.int32)

    def call(codes_dtype=lib.APPROXMUL_INT8, out_type=lib.APPROXMUL_FLOAT64, codes_p=None,
             scale_p=None, out_p=None, sizes=(1, 1, 3)):
        return lib.approxmul_dequantize(
            *sizes, codes_dtype, ffi.from_buffer(codes) if codes_p is None else codes_p,
            ffi.from_buffer("double[]", scale) if scale_p is None else scale_p,
            ffi.from_buffer("int32_t[]", zp), out_type,
            ffi.from_buffer(out) if out_p is None else out_p)

    assert call(codes_dtype=lib.APPROXMUL_INT64) == lib.APPROXMUL_ERR_DTYPE
    assert call(out_type=0) == lib.APPROXMUL_ERR_DTYPE
    assert call(codes_p=ffi.NULL) == lib.APPROXMUL_ERR_NULL_POINTER
    assert call(scale_p=ffi.NULL) == lib.APPROXMUL_ERR_NULL_POINTER
    assert call(out_p=ffi.NULL) == lib.APPROXMUL_ERR_NULL_POINTER
    assert call(scale_p=ffi.from_buffer("double[]", np.array([0.0]))) == \
        lib.APPROXMUL_ERR_INVALID_ARGUMENT
    assert call(sizes=(1, -1, 3)) == lib.APPROXMUL_ERR_SHAPE
    assert call(out_p=ffi.from_buffer(codes)) == lib.APPROXMUL_ERR_ALIASING
    assert out.tolist() == [5.0] * 3
    assert call(sizes=(0, 1, 3), codes_p=ffi.NULL, out_p=ffi.NULL) == lib.APPROXMUL_OK
    assert call() == lib.APPROXMUL_OK and out.tolist() == [0.0, -1.5, 1.0]
