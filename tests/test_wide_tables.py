"""Product tables of 9 to 12 bits: built, run, measured, written and read.

Up to 8 bits the byte-plane kernels run a table; wider tables run on the
generic kernel, or on exact GEMMs when their entries have structure. Every
result here is checked against this file's own NumPy lookups.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import approxmul_cffi as am
from approxmul_cffi import formats
from approxmul_cffi.errors import InvalidArgumentError, ShapeError, UnsupportedError
from kernel_cases import drum_table, drum_values
from reference import codes, exact_table, table_matmul
from test_matmul import LAYOUTS, random_operands, threaded_matmul


def noisy_table(bits, signed, spread, seed=0):
    rng = np.random.default_rng(seed)
    return exact_table(bits, signed) + rng.integers(-spread, spread + 1, (1 << bits, 1 << bits))


def lookup_matmul(table, a, b, bits):
    return table[codes(a, bits)[:, :, None], codes(b, bits)[None, :, :]].sum(axis=1)


@pytest.mark.parametrize("bits,signed", [(9, False), (10, True), (12, True)])
def test_an_arbitrary_wide_table_runs_exactly(bits, signed):
    table = noisy_table(bits, signed, 300, seed=bits)
    m = am.Multiplier.from_table(table.astype(np.int32), signed=signed)
    assert (m.bits, bool(m.signed), m.plan) == (bits, signed, "table")
    np.testing.assert_array_equal(m.table(), table)  # stored, handed back as given
    rng = np.random.default_rng(1)
    low, high = m.operand_range
    dtype = np.int16 if signed else np.uint16
    a = rng.integers(low, high + 1, (23, 41)).astype(dtype)
    b = rng.integers(low, high + 1, (41, 19)).astype(dtype)
    got = np.asarray(am.matmul(a, b, m))
    np.testing.assert_array_equal(got, lookup_matmul(table, a, b, bits))
    assert not np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))  # the noise counts
    assert m.product(int(a[0, 0]), int(b[0, 0])) == table[codes(a[0, 0], bits), codes(b[0, 0], bits)]
    # zero points (exact cross terms) and the elementwise product
    za, zb = int(a[1, 1]), int(b[2, 2])
    np.testing.assert_array_equal(am.matmul(a, b, m, a_zero_point=za, b_zero_point=zb),
                                  table_matmul(table, a, b, bits, za, zb))
    np.testing.assert_array_equal(am.multiply(a[:, :19], b[:23], m),
                                  table[codes(a[:, :19], bits), codes(b[:23], bits)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bits=st.sampled_from([9, 10]), signed=st.booleans(),
       shape=st.tuples(st.integers(1, 300), st.integers(1, 1100), st.integers(1, 600)),
       a_layout=st.sampled_from(LAYOUTS), b_layout=st.sampled_from(LAYOUTS),
       threads=st.sampled_from([1, 2]), zero_points=st.booleans(),
       out=st.sampled_from([None, "columns", "int32"]), seed=st.integers(0, 2**32 - 1))
def test_wide_tables_in_blocks_sorted_by_code(bits, signed, shape, a_layout, b_layout, threads,
                                              zero_points, out, seed):
    """The wide-table kernel on any shape: extreme codes, every layout, zero
    points, int32 and strided outputs, one and two threads."""
    rows, inner, cols = shape
    if rows * inner * cols > 4_000_000:  # the NumPy lookup's memory
        inner = max(1, 4_000_000 // (rows * cols))
    table = noisy_table(bits, signed, 5000, seed=seed % 7)
    m = am.Multiplier.from_table(table.astype(np.int32), signed=signed)
    assert m.plan == "table"
    rng = np.random.default_rng(seed)
    low, high = m.operand_range
    a = random_operands(rng, (rows, inner), bits, signed)
    b = random_operands(rng, (inner, cols), bits, signed)
    a.flat[::5], b.flat[::3] = low, high
    za, zb = (int(rng.integers(low, high + 1)), int(rng.integers(low, high + 1))) if zero_points \
        else (0, 0)
    want = table_matmul(table, a, b, bits, za, zb)
    if out == "int32" and am.accumulator_dtype(m, inner, za, zb) != "int32":
        out = None
    target = {None: None, "columns": np.empty((cols, rows), np.int64).T,
              "int32": np.empty((rows, cols), np.int32)}[out]
    got = threaded_matmul(threads, rng, a, a_layout, b, b_layout, m, a_zero_point=za,
                          b_zero_point=zb, out=target)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bits,rows,inner,cols", [
    (12, 300, 1100, 260),  # row chunks of 256 and 44, inner blocks of 512, 3 column tiles
    (12, 64, 2100, 130),   # one 64-row chunk, inner blocks of 2048
    (11, 257, 513, 129),   # one past each edge
])
def test_a_wide_table_across_every_block_edge(bits, rows, inner, cols):
    """The wide-table kernel's row chunks (256 rows), column tiles (128) and
    inner blocks (131072 / rows steps, 512 to 2048), each sorted by A's code,
    on two threads with zero points."""
    table = noisy_table(bits, True, 100000, seed=3)
    m = am.Multiplier.from_table(table.astype(np.int32), signed=True)
    rng = np.random.default_rng(4)
    half = 1 << (bits - 1)
    a = rng.integers(-half, half, (rows, inner)).astype(np.int16)
    b = rng.integers(-half, half, (inner, cols)).astype(np.int16)
    before = am.get_num_threads()
    am.set_num_threads(2)
    try:
        got = am.matmul(a, b, m, a_zero_point=-5, b_zero_point=1000)
    finally:
        am.set_num_threads(before)
    step = max(1, 8_000_000 // (inner * cols))  # the NumPy lookup's memory
    want = np.concatenate([table_matmul(table, a[i:i + step], b, bits, -5, 1000)
                           for i in range(0, rows, step)])
    np.testing.assert_array_equal(got, want)


def test_structured_wide_tables_get_the_gemm_plans():
    """A 12-bit table of exact products runs as the exact GEMM, a DRUM table
    as its rank-1 factorization: both equal the families bit for bit."""
    exact = am.Multiplier.from_table(exact_table(12, False).astype(np.int32))
    drum = am.Multiplier.from_table(drum_table(bits=12, k=4).astype(np.int32))
    assert (exact.plan, drum.plan) == ("exact-gemm", "factorized-gemm")
    family = am.multiplier("drum:bits=12,k=4")
    rng = np.random.default_rng(2)
    a = rng.integers(0, 4096, (30, 50)).astype(np.uint16)
    b = rng.integers(0, 4096, (50, 20)).astype(np.uint16)
    np.testing.assert_array_equal(am.matmul(a, b, exact), a.astype(np.int64) @ b.astype(np.int64))
    want = drum_values(a, 4) @ drum_values(b, 4)
    np.testing.assert_array_equal(am.matmul(a, b, drum), want)
    np.testing.assert_array_equal(am.matmul(a, b, family), want)


def test_models_wider_than_8_bits_tabulate_up_to_12():
    drum = am.multiplier("drum:bits=10,k=3")
    values = drum_values(np.arange(1024), 3)
    np.testing.assert_array_equal(drum.table(), np.outer(values, values))
    signed = am.Multiplier.exact(11, signed=True).table()
    np.testing.assert_array_equal(signed, exact_table(11, True))
    with pytest.raises(UnsupportedError, match="at most 12 bits"):
        am.Multiplier.exact(13).table()
    with pytest.raises(ShapeError, match="n in 1..12"):
        am.Multiplier.from_table(np.zeros((2048 + 1, 2048 + 1), np.int32))


def test_metrics_of_a_table_equal_its_family():
    family = am.multiplier("drum:bits=10,k=4")
    table = am.Multiplier.from_table(family.table())
    assert table.metrics() == family.metrics()
    np.testing.assert_array_equal(table.error_map(), family.error_map())
    assert table.metrics()["wce"] > 0


@pytest.mark.parametrize("suffix,order", [(".txt", "raw"), (".csv", "offset"), (".npy", "twos"),
                                          (".npz", "raw")])
def test_wide_table_files_round_trip(tmp_path, suffix, order):
    table = noisy_table(10, True, 5000, seed=3).astype(np.int32)
    m = am.Multiplier.from_table(table, signed=True)
    path = tmp_path / ("t" + suffix)
    m.save(path, order=order)
    back = am.load_multiplier(path, signed=True, order=order)
    assert back.bits == 10
    np.testing.assert_array_equal(back.table(), table)


def test_sixteen_bit_formats_take_wide_tables_only_when_they_fit(tmp_path):
    """Binary and C tables hold 16-bit entries: a 10-bit table of small
    products goes through; a 10-bit DRUM (products up to 2^20) is refused
    rather than written with its high bits cut."""
    small = am.Multiplier.from_table(np.arange(4**10, dtype=np.int32).reshape(1024, 1024) % 1000)
    for suffix in (".bin", ".h"):
        small.save(tmp_path / ("s" + suffix))
        back = am.load_multiplier(tmp_path / ("s" + suffix), signed=False)
        np.testing.assert_array_equal(back.table(), small.table())
        with pytest.raises(InvalidArgumentError, match=f"as {formats.format_of('d' + suffix)}: "
                           "its entries are 16-bit and 65585 does not fit; use text or npy"):
            am.multiplier("exact:bits=10").save(tmp_path / ("d" + suffix))
    assert not (tmp_path / "d.bin").exists()
    flat, bits = formats.parse_table((tmp_path / "s.bin").read_bytes(), format="binary",
                                     signed=False)
    assert (bits, len(flat), flat[1001]) == (10, 4**10, 1)


def test_sweep_ships_a_wide_table_to_its_workers():
    from approxmul_cffi.sweep.inputs import MultiplierRef
    table = noisy_table(9, False, 100, seed=4).astype(np.int32)
    ref = MultiplierRef.from_multiplier(am.Multiplier.from_table(table), name="mine")
    rebuilt = ref.build()
    assert (ref.spec, rebuilt.bits, rebuilt.plan) == (None, 9, "table")
    np.testing.assert_array_equal(rebuilt.table(), table)
