"""Batched matmul and the linear helper: bit-exact, strided, broadcast, bad input."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import approxmul_cffi as am
import reference
from reference import table_matmul


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.integers(0, 5), rows=st.integers(0, 20), inner=st.integers(0, 70),
       cols=st.integers(0, 40), signed=st.booleans(), broadcast=st.booleans(),
       transposed=st.booleans(), zero=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_bmm_matches_reference(batch, rows, inner, cols, signed, broadcast, transposed, zero,
                               seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(-30000, 30000, (256, 256))
    m = am.Multiplier.from_table(table, signed=signed)
    low, high = (-128, 128) if signed else (0, 256)
    dtype = np.int8 if signed else np.uint8
    a = rng.integers(low, high, (batch, rows, inner)).astype(dtype)
    b = rng.integers(low, high, (1 if broadcast else batch, inner, cols)).astype(dtype)
    if broadcast:
        b = np.broadcast_to(b, (batch, inner, cols))
    if transposed:
        a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    za, zb = (3, -2) if zero and signed else ((3, 200) if zero else (0, 0))
    got = am.bmm(a, b, m, a_zero_point=za, b_zero_point=zb)
    assert got.shape == (batch, rows, cols)
    assert got.dtype == reference.accumulator_dtype(np.abs(table).max(), 8, signed, inner, za, zb)
    for t in range(batch):
        np.testing.assert_array_equal(got[t], table_matmul(table, a[t], b[t], 8, za, zb))


def test_bmm_many_small_matrices_threads():
    rng = np.random.default_rng(1)
    m = am.Multiplier.exact(8, signed=True)
    a = rng.integers(-128, 128, (40, 16, 24)).astype(np.int8)
    b = rng.integers(-128, 128, (40, 24, 16)).astype(np.int8)
    expected = a.astype(np.int64) @ b.astype(np.int64)
    for threads in (1, 2):
        am.set_num_threads(threads)
        try:
            np.testing.assert_array_equal(am.bmm(a, b, m), expected)
        finally:
            am.set_num_threads(0)


def test_bmm_bad_input_leaves_out_untouched():
    m = am.Multiplier.exact(8)
    a = np.ones((2, 3, 4), np.uint8)
    b = np.ones((2, 4, 5), np.uint8)
    out = np.full((2, 3, 5), -1, np.int32)
    with pytest.raises(am.ShapeError):
        am.bmm(a, np.ones((3, 4, 5), np.uint8), m, out=out)
    with pytest.raises(am.ShapeError):
        am.bmm(a, np.ones((2, 5, 5), np.uint8), m, out=out)
    with pytest.raises(am.ShapeError):
        am.bmm(a[0], b, m)
    with pytest.raises(am.DTypeError):
        am.bmm(a.astype(np.int8), b, m, out=out)
    with pytest.raises(am.AliasingError):
        am.bmm(a, b, m, out=np.lib.stride_tricks.as_strided(out, strides=(0, 20, 4)))
    with pytest.raises(am.ShapeError):
        am.bmm(a, b, m, out=np.zeros((2, 3, 4), np.int32))
    with pytest.raises(am.AccumulatorOverflowError):
        am.bmm(np.ones((1, 1, 40000), np.uint8), np.ones((1, 40000, 1), np.uint8), m,
               out=np.zeros((1, 1, 1), np.int32))
    assert (out == -1).all()


def test_linear_matches_matmul_with_leading_dims():
    rng = np.random.default_rng(2)
    table = rng.integers(-3000, 3000, (256, 256))
    m = am.Multiplier.from_table(table, signed=True)
    x = rng.integers(-128, 128, (2, 3, 10)).astype(np.int8)
    w = rng.integers(-128, 128, (6, 10)).astype(np.int8)
    got = am.linear(x, w, m, x_zero_point=4, w_zero_point=-1)
    assert got.shape == (2, 3, 6)
    expected = table_matmul(table, x.reshape(6, 10), w.T, 8, 4, -1).reshape(2, 3, 6)
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(am.ShapeError):
        am.linear(x, w[:, :9], m)


def test_linear_and_bmm_without_numpy_buffers():
    import array
    m = am.Multiplier.exact(8)
    x = memoryview(array.array("B", [1, 2, 3, 4, 5, 6])).cast("B", shape=[2, 3])
    w = memoryview(array.array("B", [1, 0, 1, 2, 2, 2])).cast("B", shape=[2, 3])
    assert am.linear(x, w, m).tolist() == [[4, 12], [10, 30]]
    a = memoryview(array.array("B", [1, 2, 3, 4])).cast("B", shape=[2, 1, 2])
    b = memoryview(array.array("B", [1, 1, 2, 2])).cast("B", shape=[2, 2, 1])
    assert am.bmm(a, b, m).tolist() == [[[3]], [[14]]]
