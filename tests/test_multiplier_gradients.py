"""Gradient tables of multipliers (C library) against an independent NumPy implementation."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import approxmul_cffi as am
from approxmul_cffi.errors import InvalidArgumentError
from approxmul_cffi.gradients import gradient_slopes, gradient_table

SPECS = ["exact", "exact:signed=1", "drum:k=3", "drum:k=4,signed=1", "truncated:bits=8,cut=10",
         "mitchell:bits=8"]


def value_order(m):
    """Product table as M[value_a, value_b] over values min..max, and the values."""
    bits, signed = m.bits, bool(m.signed)
    values = np.arange(-(1 << (bits - 1)), 1 << (bits - 1)) if signed else np.arange(1 << bits)
    raw = np.asarray(m.table(), dtype=np.int64).reshape(1 << bits, 1 << bits)
    idx = values & ((1 << bits) - 1)
    return raw[np.ix_(idx, idx)].astype(np.float64), values, idx


def numpy_table(m, operand, h):
    t, values, idx = value_order(m)
    if operand == "b":
        t = t.T
    n = len(values)
    pos = np.arange(n)
    lo, hi = np.maximum(pos - h, 0), np.minimum(pos + h, n - 1)
    g = (t[hi] - t[lo]) / (hi - lo)[:, None]        # along axis 0 = the operand
    if operand == "b":
        g = g.T
    out = np.empty_like(g)
    out[np.ix_(idx, idx)] = g                        # back to raw bit patterns
    return out


def numpy_slopes(m, operand):
    t, values, idx = value_order(m)
    if operand == "b":
        t = t.T
    v = values.astype(np.float64)
    slopes = np.polyfit(v, t, 1)[0]                  # least squares, per column
    out = np.empty_like(slopes)
    out[idx] = slopes
    return out


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("operand", ["a", "b"])
@pytest.mark.parametrize("h", [1, 2, 5])
def test_table_matches_numpy(spec, operand, h):
    m = am.multiplier(spec)
    np.testing.assert_allclose(gradient_table(m, operand, h), numpy_table(m, operand, h),
                               rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("operand", ["a", "b"])
def test_slopes_match_numpy(spec, operand):
    m = am.multiplier(spec)
    np.testing.assert_allclose(gradient_slopes(m, operand), numpy_slopes(m, operand),
                               rtol=1e-9, atol=1e-7)


def test_exact_multiplier_gives_the_other_operand():
    for signed in (False, True):
        m = am.Multiplier.exact(bits=8, signed=signed)
        vals = np.arange(256)
        if signed:
            vals = np.where(vals > 127, vals - 256, vals)
        np.testing.assert_array_equal(gradient_table(m, "a", 3), np.broadcast_to(vals, (256, 256)))
        np.testing.assert_array_equal(gradient_table(m, "b", 3), np.broadcast_to(vals[:, None], (256, 256)))
        np.testing.assert_allclose(gradient_slopes(m, "b"), vals, atol=1e-9)


def test_approximate_multiplier_differs_from_exact():
    g = gradient_table("drum:k=3", "a", 2)
    assert np.abs(g - np.arange(256)[None, :]).max() > 1


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 4), st.booleans(), st.integers(1, 6), st.data())
def test_random_tables(bits, signed, h, data):
    side = 1 << bits
    lim = 1 << (2 * bits - 1) if signed else 1 << (2 * bits)
    flat = data.draw(st.lists(st.integers(-lim if signed else 0, lim - 1), min_size=side * side,
                              max_size=side * side))
    m = am.Multiplier.from_table(np.array(flat, dtype=np.int32).reshape(side, side), signed=signed)
    for operand in "ab":
        np.testing.assert_allclose(gradient_table(m, operand, h), numpy_table(m, operand, h),
                                   rtol=1e-12, atol=1e-9)
        if side > 1:
            np.testing.assert_allclose(gradient_slopes(m, operand), numpy_slopes(m, operand),
                                       rtol=1e-9, atol=1e-6)


def test_bad_arguments():
    m = am.multiplier("drum:k=3")
    with pytest.raises(InvalidArgumentError, match="operand"):
        gradient_table(m, "c")
    with pytest.raises(InvalidArgumentError, match="half_window"):
        gradient_table(m, "a", 0)
    with pytest.raises(am.UnsupportedError, match="12 bits"):
        gradient_slopes(am.Multiplier.exact(bits=16), "a")
