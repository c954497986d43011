"""Multipliers whose error is a sum of functions of digit pairs: the bytes of
9-16-bit models (column truncation with any cut, broken arrays: each dropped
cell is a function of one bit of a and one of b), the low nibbles of 5-8-bit
ones (cut <= 4). They run as the exact GEMM plus a table GEMM of each error
part (plan "exact-plus-table"; the nibble case where the kernel set has a
nibble kernel), checked against independent references."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import approxmul_cffi as am
from kernel_cases import baugh_wooley_values, truncated_values
from reference import table_matmul
from test_matmul import LAYOUTS, random_operands, threaded_matmul


def reference_products(m, bits, cut, signed, hbl=0):
    """M(a, b) elementwise from the array definitions, plus the model's
    correction constant (checked on its own in test_families)."""
    def values(a, b):
        if signed:
            return baugh_wooley_values(a, b, bits, cut, hbl)
        return truncated_values(a, b, cut, bits, hbl)
    constant = m.product(0, 0) - int(values(0, 0))
    return lambda a, b: values(a, b) + constant


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(["truncated", "truncated-correct", "bam"]),
       bits=st.sampled_from([5, 7, 8, 9, 10, 12, 16]), cut=st.integers(2, 30),
       hbl=st.integers(0, 12), signed=st.booleans(),
       shape=st.tuples(st.integers(1, 40), st.integers(1, 70), st.integers(1, 90)),
       a_layout=st.sampled_from(LAYOUTS), b_layout=st.sampled_from(LAYOUTS),
       threads=st.sampled_from([1, 2]), zero_points=st.booleans(),
       out=st.sampled_from([None, "rows", "columns", "sliced", "int32"]),
       seed=st.integers(0, 2**32 - 1))
def test_digit_pair_errors_as_exact_plus_table(family, bits, cut, hbl, signed, shape, a_layout,
                                               b_layout, threads, zero_points, out, seed):
    """Every layout, both signs, extreme codes, zero points, int32 and int64
    outputs (in place or not), one and two threads; wide models with dropped
    cells in one, two, three or all four byte pairs."""
    if bits <= 8:
        cut, hbl = min(cut, 4), 0  # the low nibbles
    else:
        cut, hbl = min(cut, 2 * bits - 2), min(hbl, bits - 1)
    if family != "bam":
        hbl = 0
    spec = {"truncated": f"truncated:cut={cut}", "truncated-correct": f"truncated:cut={cut},correct=1",
            "bam": f"bam:hbl={hbl},vbl={cut}"}[family]
    m = am.multiplier(f"{spec},bits={bits},signed={int(signed)}")
    # factors that fit int16 (unsigned, below 16 bits, rank <= 2 on AVX2) and
    # byte-split factors of broken arrays with their error in more than one
    # byte pair keep that plan; 8-bit tables run as tables where the kernel
    # set has no nibble kernel; a signed array whose sum can wrap stays a function
    nibble = am.info()["kernel.nibble-table"].startswith("16-byte")
    assert m.plan in ("exact-plus-table", "factorized-gemm") or (bits <= 8 and not nibble) \
        or (signed and m.plan == "function" and hbl + cut > bits)
    product = reference_products(m, bits, cut, signed, hbl)
    rng = np.random.default_rng(seed)
    rows, cols, inner = shape
    lo, hi = m.operand_range
    a = random_operands(rng, (rows, inner), bits, signed)
    b = random_operands(rng, (inner, cols), bits, signed)
    a.flat[::7], b.flat[::5] = lo, hi  # both ends: the low bytes 0x00 and 0xff
    za, zb = (int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))) if zero_points \
        else (0, 0)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    want = (product(a64[:, :, None], b64[None, :, :]).sum(axis=1)
            - zb * a64.sum(1, keepdims=True) - za * b64.sum(0, keepdims=True) + inner * za * zb)
    if out == "int32" and am.accumulator_dtype(m, inner, za, zb) != "int32":
        out = "rows"  # the library refuses int32 where some operands could overflow it
    target = {None: None, "rows": np.empty((rows, cols), np.int64),
              "columns": np.empty((cols, rows), np.int64).T,
              "sliced": np.empty((rows, 2 * cols), np.int64)[:, ::2],
              "int32": np.empty((rows, cols), np.int32)}[out]
    got = threaded_matmul(threads, rng, a, a_layout, b, b_layout, m, a_zero_point=za,
                          b_zero_point=zb, out=target)
    np.testing.assert_array_equal(got, want)
    assert target is None or got is target


def test_large_problem_on_two_threads():
    """Big enough for both GEMMs and the fold to run on two threads."""
    m = am.multiplier("truncated:bits=16,cut=8,signed=1")
    rng = np.random.default_rng(5)
    a = random_operands(rng, (96, 300), 16, True)
    b = random_operands(rng, (300, 130), 16, True)
    want = baugh_wooley_values(a.astype(np.int64)[:, :, None], b.astype(np.int64)[None], 16,
                               8).sum(axis=1)
    before = am.get_num_threads()
    am.set_num_threads(2)
    try:
        np.testing.assert_array_equal(am.matmul(a, b, m, a_zero_point=-7, b_zero_point=300),
                                      want - 300 * a.sum(1, dtype=np.int64)[:, None]
                                      + 7 * b.sum(0, dtype=np.int64) - 300 * 7 * 300)
    finally:
        am.set_num_threads(before)


def test_tables_with_low_byte_errors_are_found_and_others_are_not():
    """A 12-bit table is checked on every pair: truncation given as a table
    takes the plan; the same table with one product changed where only the
    high bytes differ does not, and both compute their own products."""
    rng = np.random.default_rng(8)
    codes = np.arange(4096)
    table = truncated_values(codes[:, None], codes[None, :], 6, 12)
    m = am.Multiplier.from_table(table)
    assert (m.bits, m.plan) == (12, "exact-plus-table")
    changed = table.copy()
    changed[0x7A3, 0x5C1] += 1  # low bytes (0xA3, 0xC1) keep their error elsewhere
    other = am.Multiplier.from_table(changed)
    assert other.plan == "table"
    a = rng.integers(0, 4096, (9, 40)).astype(np.uint16)
    b = rng.integers(0, 4096, (40, 11)).astype(np.uint16)
    a[0, 0], b[0, 0] = 0x7A3, 0x5C1
    np.testing.assert_array_equal(am.matmul(a, b, m, a_zero_point=3),
                                  table_matmul(table, a, b, 12, a_zero_point=3))
    np.testing.assert_array_equal(am.matmul(a, b, other), table_matmul(changed, a, b, 12))


def test_8_bit_tables_with_low_nibble_errors_are_found_and_others_are_not():
    """An 8-bit signed table equal to the exact products plus an arbitrary
    function of the low nibbles (not a truncation: every error value from -60
    to 60) takes the plan where the set has a nibble kernel; one product
    changed where only the high nibbles differ does not; both compute their
    own products, with zero points."""
    rng = np.random.default_rng(9)
    values = np.arange(256) - 256 * (np.arange(256) >= 128)
    error = rng.integers(-60, 61, (16, 16))
    table = values[:, None] * values[None, :] + error[(values & 15)[:, None], (values & 15)[None]]
    m = am.Multiplier.from_table(table, signed=True)
    nibble = am.info()["kernel.nibble-table"].startswith("16-byte")
    assert m.plan == ("exact-plus-table" if nibble else "table")
    changed = table.copy()
    changed[0x73, 0x5C] += 1  # low nibbles (0x3, 0xC) keep their error elsewhere
    other = am.Multiplier.from_table(changed, signed=True)
    assert other.plan == "table"
    a = rng.integers(-128, 128, (37, 300)).astype(np.int8)
    b = rng.integers(-128, 128, (300, 141)).astype(np.int8)
    a[0, 0], b[0, 0] = 0x73, 0x5C
    for model, t in [(m, table), (other, changed)]:
        np.testing.assert_array_equal(am.matmul(a, b, model, a_zero_point=-3, b_zero_point=5),
                                      table_matmul(t, a, b, 8, a_zero_point=-3, b_zero_point=5))


def test_empty_operands():
    m = am.multiplier("truncated:bits=16,cut=8")
    for rows, inner, cols in [(0, 4, 3), (3, 0, 4), (4, 3, 0)]:
        a = np.ones((rows, inner), np.uint16)
        b = np.ones((inner, cols), np.uint16)
        got = am.matmul(a, b, m, a_zero_point=2, b_zero_point=1)
        np.testing.assert_array_equal(got, np.full((rows, cols), 2 * inner, np.int64))
