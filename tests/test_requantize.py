"""The C requantization and the package's NumPy statement of it agree bit for bit
with the plain-integer reference in tests/requantize_reference.py."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import requantize_reference as plain
from approxmul_cffi import quant


def plain_requantize(acc, bias, mantissa, shift, zero_point, qmin, qmax, *, signed=True,
                     rounding="double", bits=8):
    """The plain reference on NumPy arguments, returned as an array of out's dtype."""
    def arg(v):
        return np.asarray(v).tolist()
    want = plain.requantize(arg(acc), arg(bias), arg(mantissa), arg(shift), zero_point, qmin,
                            qmax, rounding)
    return np.array(want, dtype=quant.code_dtype(signed, bits)).reshape(np.shape(acc))


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rounding=st.sampled_from(quant.ROUNDINGS),
       signed=st.booleans(), per_channel=st.booleans(), acc_dtype=st.sampled_from(["int32",
                                                                                   "int64"]),
       # rows of >= 64 run channel by channel in C, shorter ones with per-element
       # parameters; 70 and 99 leave vector remainders
       shape=st.sampled_from([(3, 4), (2, 5, 3, 3), (1, 1, 1), (4, 2, 7), (2, 3, 70),
                              (3, 1, 99)]))
def test_c_requantize_matches_reference(seed, rounding, signed, per_channel, acc_dtype, shape):
    rng = np.random.default_rng(seed)
    channels = shape[1]
    span = 2**40 if acc_dtype == "int64" else 2**31
    acc = rng.integers(-span, span, size=shape).astype(acc_dtype)
    # realistic and extreme factors: tiny, around 1, up to 2^29
    reals = np.exp2(rng.uniform(-35, 29, size=channels if per_channel else 1))
    mantissa, shift = quant.quantize_multiplier(reals if per_channel else reals[0])
    bias = rng.integers(-2**31, 2**31, size=channels) if per_channel else \
        int(rng.integers(-1000, 1000))
    lo, hi = (-128, 127) if signed else (0, 255)
    qmin = int(rng.integers(lo, hi + 1))
    qmax = int(rng.integers(qmin, hi + 1))
    zero_point = int(rng.integers(-300, 300))
    args = (acc, bias, mantissa, shift, zero_point, qmin, qmax)
    got = quant.requantize(*args, signed=signed, rounding=rounding)
    want = plain_requantize(*args, signed=signed, rounding=rounding)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(quant.requantize_reference(*args, signed=signed,
                                                             rounding=rounding), want)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), signed=st.booleans(), bits=st.integers(9, 16),
       per_channel=st.booleans(), shape=st.sampled_from([(3, 4), (2, 5, 3, 3), (3, 1, 99),
                                                         (2, 3, 70)]))
def test_wide_codes_match_the_reference(seed, signed, bits, per_channel, shape):
    # 9- to 16-bit codes (int16/uint16 outputs), on both C paths (rows of >= 64
    # by channel, shorter ones per element), with codes inside and beyond the range
    rng = np.random.default_rng(seed)
    channels = shape[1]
    real = np.exp2(rng.uniform(-20, -2, size=channels if per_channel else 1))
    mantissa, shift = quant.quantize_multiplier(real if per_channel else real[0])
    acc = rng.integers(-2**22, 2**22, size=shape).astype(np.int32)
    qmin, qmax = quant.code_range(signed, bits=bits)
    zero_point = int(rng.integers(qmin, qmax + 1))
    args = (acc, 7, mantissa, shift, zero_point, qmin, qmax)
    for rounding in quant.ROUNDINGS:
        got = quant.requantize(*args, signed=signed, rounding=rounding, bits=bits)
        want = plain_requantize(*args, signed=signed, rounding=rounding, bits=bits)
        assert got.dtype == want.dtype == quant.code_dtype(signed, bits)
        np.testing.assert_array_equal(got, want)


def test_twelve_bit_codes_worked_example():
    # 0.5 * acc + 2048 on the unsigned 12-bit grid 0..4095 (beyond a byte), and signed
    m, s = quant.quantize_multiplier(0.5)
    acc = np.array([[1000, -1000, 10**7, -10**7, 3]])
    assert quant.requantize(acc, 0, m, s, 2048, 0, 4095, signed=False, bits=12).tolist() == \
        [[2548, 1548, 4095, 0, 2050]]
    assert quant.requantize(acc, 0, m, s, 0, -2048, 2047, bits=12).tolist() == \
        [[500, -500, 2047, -2048, 2]]


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), signed=st.booleans(), length=st.integers(64, 200),
       log_real=st.floats(-35, 29))
def test_unsaturated_rows_match_the_reference(seed, signed, length, log_real):
    # Accumulators scaled so that most codes land inside the range (the
    # uniform ones above mostly clamp), near half-way points, on rows long
    # enough for the vectorised per-channel path, with any factor's shift.
    rng = np.random.default_rng(seed)
    real = float(np.exp2(log_real))
    mantissa, shift = quant.quantize_multiplier(real)
    target = rng.integers(-300, 300, size=length) + rng.choice([0.0, 0.5, -0.5, 0.25], size=length)
    acc = np.clip(np.round(target / real), -2**31, 2**31 - 1).astype(np.int32)
    acc[:3] = [-2**31, 2**31 - 1, 0]
    bias = int(rng.integers(-2**31, 2**31)) if seed % 5 == 0 else int(rng.integers(-50, 50))
    lo, hi = (-128, 127) if signed else (0, 255)
    zero_point = int(rng.integers(-20, 20)) + (0 if signed else 128)
    args = (acc.reshape(1, 1, length), bias, mantissa, shift, zero_point, lo, hi)
    for rounding in quant.ROUNDINGS:
        np.testing.assert_array_equal(quant.requantize(*args, signed=signed, rounding=rounding),
                                      plain_requantize(*args, signed=signed, rounding=rounding))


def test_requantize_cases_match_the_plain_reference():
    # the cases the instruction-set battery runs: ties, saturation, factors 2^-35..2^29
    from kernel_cases import requantize_cases
    for name, args, kw in requantize_cases():
        want = plain_requantize(*args, **kw)
        np.testing.assert_array_equal(quant.requantize(*args, **kw), want, err_msg=name)
        np.testing.assert_array_equal(quant.requantize_reference(*args, **kw), want,
                                      err_msg=name)


@pytest.mark.parametrize("rounding, want", [
    # factor 2^29: mantissa 2^30, shift 30; x << 30 saturates in the double
    # rounding (to 2^31 - 1, then * 2^30 / 2^31 -> 2^30), single rounding does not
    ("double", [[-128, -128, 0, 127, 127]]),
    ("single", [[-128, -128, 0, 127, 127]]),
])
def test_large_factor_saturates(rounding, want):
    x = np.array([[-5, -1, 0, 1, 5]], np.int64)
    assert quant.requantize(x, 0, 2**30, 30, 0, -128, 127, rounding=rounding).tolist() == want


def test_int64_accumulators_at_the_ends_saturate_with_any_bias():
    # acc + bias once wrapped in int64 (found by fuzz_requantize): -2^63 + 10
    # plus -100 came out as the largest code
    acc = np.array([[-2**63 + 10, 2**63 - 10, -2**63, 2**63 - 1]], np.int64)
    bias = [-100, 100, -2**31, 2**31 - 1]
    m, s = quant.quantize_multiplier(0.5)
    for rounding in quant.ROUNDINGS:
        args = (acc, bias, [m] * 4, [s] * 4, 0, -128, 127)
        want = [[-128, 127, -128, 127]]
        assert plain_requantize(*args, rounding=rounding).tolist() == want
        assert quant.requantize(*args, rounding=rounding).tolist() == want
        assert quant.requantize_reference(*args, rounding=rounding).tolist() == want


def test_left_shift_worked_example():
    # factor 1.5 = (3 * 2^29) * 2^(1 - 31): x = 7 -> 10.5. With a left shift
    # the double rounding's division is by 2^0, so both round ties up
    for x, double, single in [(7, 11, 11), (-7, -10, -10), (3, 5, 5), (-3, -4, -4)]:
        acc = np.array([[x]], np.int64)
        assert quant.requantize(acc, 0, 3 * 2**29, 1, 0, -128, 127).tolist() == [[double]]
        assert quant.requantize(acc, 0, 3 * 2**29, 1, 0, -128, 127,
                                rounding="single").tolist() == [[single]]
        assert plain.requantize_value(x, 0, 3 * 2**29, 1, 0, -128, 127) == double
        assert plain.requantize_value(x, 0, 3 * 2**29, 1, 0, -128, 127, "single") == single


def test_rounding_ties_worked_example():
    # x * 0.25 for x = -6, -2, 2, 6: gemmlowp's double rounding takes -1.5 to
    # -2 and -0.5 to -1 (its final divide rounds ties away from zero);
    # single rounding rounds every tie up.
    mantissa, shift = quant.quantize_multiplier(0.25)
    x = np.array([[-6, -2, 2, 6]])
    assert quant.requantize(x, 0, mantissa, shift, 0, -128, 127).tolist() == [[-2, -1, 1, 2]]
    assert quant.requantize(x, 0, mantissa, shift, 0, -128, 127, rounding="single").tolist() == \
        [[-1, 0, 1, 2]]


def test_bad_requantize_arguments_leave_out_untouched():
    from approxmul_cffi._library import ffi, lib

    acc = np.zeros((2, 3), np.int32)
    out = np.full((2, 3), 77, np.int8)
    ones = np.ones(3, np.int32)
    bad_shift = np.array([0, 31, 0], np.int32)

    def call(shift=ones, qmin=-128, qmax=127, rounding=lib.APPROXMUL_ROUND_DOUBLE,
             out_dtype=lib.APPROXMUL_INT8, target=out):
        return lib.approxmul_requantize(
            2, 3, 1, lib.APPROXMUL_INT32, ffi.from_buffer(acc), ffi.NULL,
            ffi.from_buffer("int32_t[]", ones), ffi.from_buffer("int32_t[]", shift), 0, qmin,
            qmax, rounding, out_dtype, ffi.from_buffer(target))

    assert call(shift=bad_shift) == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert b"shift[1]" in ffi.string(lib.approxmul_last_error())
    assert call(qmin=5, qmax=4) == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert call(qmax=200) == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert call(rounding=7) == lib.APPROXMUL_ERR_INVALID_ARGUMENT
    assert call(out_dtype=lib.APPROXMUL_INT32) == lib.APPROXMUL_ERR_DTYPE
    assert call(target=acc) == lib.APPROXMUL_ERR_ALIASING
    assert (out == 77).all()
    assert call() == lib.APPROXMUL_OK and (out == 0).all()
    with pytest.raises(ValueError, match="bias: 2 values for 3 channels"):
        quant.requantize(acc, np.ones(2), 1 << 30, 0, 0, -128, 127)


def test_codes_of_the_largest_accumulators_do_not_wrap_with_the_zero_point():
    # y reaches 2^31 - 2 here and the zero point 300 would carry it past
    # int32 (the fuzz harness found this in the AVX2 path): the code is qmax
    acc = np.full((1, 1, 70), 2**31 - 1, np.int32)
    acc[0, 0, 1::2] = -2**31
    mantissa, shift = np.int32(2**31 - 1), np.int32(0)
    for signed, zero_point, (lo, hi) in ((False, 300, (0, 255)), (True, -300, (-128, 127))):
        args = (acc, 0, mantissa, shift, zero_point, lo, hi)
        got = quant.requantize(*args, signed=signed)
        np.testing.assert_array_equal(got, plain_requantize(*args, signed=signed))
        assert got[0, 0, 0] == hi and got[0, 0, 1] == lo


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rounding=st.sampled_from(quant.ROUNDINGS),
       signed=st.booleans(), bits=st.sampled_from([4, 8, 12, 16]), per_channel=st.booleans(),
       real=st.sampled_from(["float32", "float64"]),
       # chunks of 2048 in C: 1, 4100 and 70-element rows; 3x5 rows run per element
       shape=st.sampled_from([(3, 5), (2, 3, 70), (1, 1, 4100), (2, 2, 2100), (5, 4, 1)]))
def test_requantize_to_real_values_equals_requantize_then_dequantize(
        seed, rounding, signed, bits, per_channel, real, shape):
    # approxmul_requantize_dequantize: the adapters' output stage in one pass
    rng = np.random.default_rng(seed)
    channels = shape[1]
    factors = np.exp2(rng.uniform(-20, 0, size=channels if per_channel else 1))
    mantissa, shift = quant.quantize_multiplier(factors if per_channel else factors[0])
    acc = rng.integers(-2**24, 2**24, size=shape).astype(np.int32)
    lo, hi = quant.code_range(signed, bits=bits)
    qmin = int(rng.integers(lo, hi + 1))
    qmax = int(rng.integers(qmin, hi + 1))
    zero_point = int(rng.integers(lo, hi + 1))
    scale = float(np.exp2(rng.uniform(-12, 4)))
    args = (acc, rng.integers(-500, 500, size=channels), mantissa, shift, zero_point, qmin, qmax)
    kw = dict(signed=signed, rounding=rounding, bits=bits)
    codes = quant.requantize(*args, **kw)
    grid = quant.QParams(np.float64(scale), np.int64(zero_point), signed=signed, bits=bits)
    want = grid.dequantize(codes, dtype=real)
    got = quant.requantize(*args, **kw, real=(scale, real))
    assert got.dtype == want.dtype and got.shape == shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_bad_requantize_dequantize_arguments_leave_out_untouched():
    from approxmul_cffi._library import ffi, lib

    acc = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = np.full((2, 3), 7.5, np.float32)
    ones, unit = np.ones(3, np.int32), np.full(3, 1 << 30, np.int32)  # factor 2^30 2^(1-31)

    def call(scale=0.5, out_type=lib.APPROXMUL_FLOAT32, code=lib.APPROXMUL_INT8, qmax=127,
             target=out):
        return lib.approxmul_requantize_dequantize(
            2, 3, 1, lib.APPROXMUL_INT32, ffi.from_buffer(acc), ffi.NULL,
            ffi.from_buffer("int32_t[]", unit), ffi.from_buffer("int32_t[]", ones), 0, -128,
            qmax, lib.APPROXMUL_ROUND_DOUBLE, code, scale, out_type, ffi.from_buffer(target))

    for scale in (0.0, -1.0, float("nan"), float("inf")):
        assert call(scale=scale) == lib.APPROXMUL_ERR_INVALID_ARGUMENT
        assert b"out_scale" in ffi.string(lib.approxmul_last_error())
    assert call(out_type=9) == lib.APPROXMUL_ERR_DTYPE
    assert call(code=lib.APPROXMUL_INT32) == lib.APPROXMUL_ERR_DTYPE
    assert call(qmax=200) == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert call(target=acc) == lib.APPROXMUL_ERR_ALIASING
    assert (out == 7.5).all()
    assert call() == lib.APPROXMUL_OK
    # factor 1: the codes are the accumulators, their real values half of them
    np.testing.assert_array_equal(out, 0.5 * acc)
