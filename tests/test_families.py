"""Built-in families: worked examples from the papers/notes, exhaustive
comparison with independent Python definitions, and exhaustive properties."""

import os
import random

import numpy as np
import pytest

import approxmul_cffi as am

# ---- independent reference definitions (written from the papers, bit level
# where the paper is bit level, so they share no code with the C++ core)


def lod(x):
    return x.bit_length() - 1


def ref_array(a, b, n, keep):
    """Sum of the kept partial-product bits a_i b_j 2^(i+j)."""
    return sum(1 << (i + j) for i in range(n) for j in range(n)
               if (a >> i) & 1 and (b >> j) & 1 and keep(i, j))


def ref_truncated(a, b, n, cut, correct):
    constant = ref_correction(n, cut, False) if correct else 0
    return ref_array(a, b, n, lambda i, j: i + j >= cut) + constant


def ref_bam(a, b, n, hbl, vbl):
    return ref_array(a, b, n, lambda i, j: j >= hbl and i + j >= vbl)


def is_nand(i, j, n):
    return (i == n - 1) != (j == n - 1)


def ref_baugh_wooley(a, b, n, keep, vbl, constant=0):
    """Signed: the kept bits of the Baugh-Wooley matrix (NAND where exactly one
    index is the sign bit, constant ones in columns n and 2n-1, kept when the
    column is >= vbl), plus a correction constant, mod 2^(2n)."""
    pa, pb = a & ((1 << n) - 1), b & ((1 << n) - 1)
    total = constant + sum(1 << c for c in (n, 2 * n - 1) if c >= vbl)
    for i in range(n):
        for j in range(n):
            bit = (pa >> i) & (pb >> j) & 1
            if keep(i, j):
                total += (bit ^ is_nand(i, j, n)) << (i + j)
    total %= 1 << (2 * n)
    return total - (1 << (2 * n)) if total >> (2 * n - 1) else total


def ref_correction(n, cut, signed):
    """round-half-up of the expected value of the removed bits (uniform operands)."""
    quarters = sum((3 if signed and is_nand(i, j, n) else 1) << (i + j)
                   for i in range(n) for j in range(n) if i + j < cut)
    quarters += sum(4 << c for c in (n, 2 * n - 1) if signed and c < cut)
    return (quarters + 2) // 4


def ref_segment(x, k, unbiased):
    if x < 1 << k:
        return x
    s = lod(x) - k + 1
    return ((x >> s) | int(unbiased)) << s


def ref_mitchell(a, b):
    if a == 0 or b == 0:
        return 0
    k1, k2 = lod(a), lod(b)
    f = (a - (1 << k1)) / (1 << k1) + (b - (1 << k2)) / (1 << k2)  # exact in binary floats
    return int((1 << (k1 + k2)) * (1 + f) if f < 1 else (1 << (k1 + k2 + 1)) * f)


def ref_ilm(a, b, iterations):
    if a == 0 or b == 0:
        return 0
    k1, k2 = lod(a), lod(b)
    x1, x2 = a - (1 << k1), b - (1 << k2)
    basic = (1 << (k1 + k2)) + x1 * (1 << k2) + x2 * (1 << k1)
    return basic + (ref_ilm(x1, x2, iterations - 1) if iterations > 0 else 0)


def ref_roba(a, b):
    def rounded(x):
        if x <= 1:
            return x
        p = lod(x)
        return 1 << (p + 1) if x >= 3 << (p - 1) else 1 << p  # ties (x = 1.5 * 2^p) up
    ar, br = rounded(a), rounded(b)
    return ar * b + a * br - ar * br


def signed_wrap(unsigned):
    def product(a, b):
        p = unsigned(abs(a), abs(b))
        return -p if (a < 0) != (b < 0) else p
    return product


def reference(family, n, signed=False, **p):
    if signed and family == "truncated":  # on the Baugh-Wooley array, not sign-magnitude
        constant = ref_correction(n, p["cut"], True) if p.get("correct") else 0
        return lambda a, b: ref_baugh_wooley(a, b, n, lambda i, j: i + j >= p["cut"], p["cut"], constant)
    if signed and family == "bam":
        return lambda a, b: ref_baugh_wooley(a, b, n, lambda i, j: j >= p["hbl"] and i + j >= p["vbl"],
                                             p["vbl"])
    designs = {
        "truncated": lambda a, b: ref_truncated(a, b, n, p["cut"], p.get("correct", 0)),
        "bam": lambda a, b: ref_bam(a, b, n, p["hbl"], p["vbl"]),
        "drum": lambda a, b: ref_segment(a, p["k"], True) * ref_segment(b, p["k"], True),
        "dsm": lambda a, b: ref_segment(a, p["m"], False) * ref_segment(b, p["m"], False),
        "mitchell": ref_mitchell,
        "ilm": lambda a, b: ref_ilm(a, b, p["iterations"]),
        "roba": ref_roba,
        "exact": lambda a, b: a * b,
    }
    return signed_wrap(designs[family]) if signed else designs[family]


CASES = [
    ("truncated", {"cut": 0}), ("truncated", {"cut": 5}), ("truncated", {"cut": 6, "correct": 1}),
    ("truncated", {"cut": 11, "correct": 1}), ("bam", {"hbl": 2, "vbl": 5}),
    ("bam", {"hbl": 1, "vbl": 0}), ("drum", {"k": 2}), ("drum", {"k": 4}), ("dsm", {"m": 3}),
    ("mitchell", {}), ("ilm", {"iterations": 0}), ("ilm", {"iterations": 1}),
    ("ilm", {"iterations": 2}), ("roba", {}), ("exact", {}),
]
# truncated and bam are signed on the Baugh-Wooley array, the others sign-magnitude
SIGNED_FAMILIES = {"truncated", "bam", "drum", "dsm", "mitchell", "ilm", "roba", "exact"}


def spec(family, bits, signed, params):
    items = [f"bits={bits}", f"signed={int(signed)}"] + [f"{k}={v}" for k, v in params.items()]
    return f"{family}:" + ",".join(items)


@pytest.mark.parametrize("family,params,signed",
                         [(f, p, s) for f, p in CASES for s in (False, True)
                          if not s or f in SIGNED_FAMILIES], ids=str)
def test_matches_reference_exhaustively_6_bit(family, params, signed):
    n = 6
    m = am.multiplier(spec(family, n, signed, params))
    ref = reference(family, n, signed, **params)
    low, high = m.operand_range
    values = range(low, high + 1)
    expected = np.array([[ref(a, b) for b in values] for a in values])
    patterns = np.arange(1 << n) ^ (1 << (n - 1) if signed else 0)  # value order -> raw pattern
    table = m.table()[np.ix_(patterns, patterns)]
    assert np.array_equal(table, expected)


@pytest.mark.parametrize("family,params", [c for c in CASES if c[0] != "truncated" or c[1]["cut"] < 8])
def test_wide_matches_reference_on_samples(family, params):
    # 12 and 16 bits go through the function path (no table)
    rng = random.Random(12)
    for n in (12, 16):
        signed = family in SIGNED_FAMILIES and n == 12
        m = am.multiplier(spec(family, n, signed, params))
        ref = reference(family, n, signed, **params)
        low, high = m.operand_range
        pairs = [(rng.randint(low, high), rng.randint(low, high)) for _ in range(150)]
        pairs += [(low, low), (high, high), (low, high), (0, high), (1, 1)]
        for a, b in pairs:
            assert m.product(a, b) == ref(a, b), (a, b)


def test_worked_examples():
    # n = 8, a = 200, b = 57 (exact 11400), from the papers' definitions (docs/multipliers.md)
    expected = {
        "truncated:cut=8": 11008, "truncated:cut=8,correct=1": 11456,
        "bam:hbl=2,vbl=8": 11008, "drum:k=4": 12480, "drum:k=6": 11628, "dsm:m=4": 10752,
        "mitchell": 11008, "ilm:iterations=0": 9600, "ilm:iterations=1": 11328, "roba": 11008,
    }
    for s, product in expected.items():
        assert am.multiplier(s).product(200, 57) == product, s
    assert am.multiplier("truncated:cut=4").product(15, 15) == 176
    assert am.multiplier("bam:bits=4,hbl=2,vbl=4").product(15, 15) == 160
    assert am.multiplier("drum:k=4").product(13, 11) == 143  # both below 2^k: exact
    assert am.multiplier("drum:k=4").product(20, 3) == 66
    assert am.multiplier("drum:k=4").product(16, 1) == 18  # powers of two >= 2^k are not exact
    assert am.multiplier("mitchell").product(3, 3) == 8
    assert am.multiplier("mitchell").product(255, 255) == 65024
    assert am.multiplier("ilm:iterations=1").product(255, 255) == 61056
    assert am.multiplier("roba").product(6, 6) == 32
    assert am.multiplier("roba").product(3, 5) == 16  # overestimate: rounded in opposite directions
    assert am.multiplier("drum:k=4,signed=1").product(-100, 57) == -am.multiplier("drum:k=4").product(100, 57)


def test_signed_drum_k2_can_leave_the_16_bit_range():
    # documented: products are int64 and reported as is, not wrapped
    m = am.multiplier("drum:k=2,signed=1")
    assert m.product(-128, -128) == 36864
    assert m.product_range[1] == 36864


def values_and_table(s):
    m = am.multiplier(s)
    low, high = m.operand_range
    v = np.arange(low, high + 1)
    patterns = v & ((1 << m.bits) - 1)
    return m, v, m.table()[np.ix_(patterns, patterns)].astype(np.int64)


@pytest.mark.parametrize("signed", [False, True])
def test_exact_equals_a_times_b_everywhere(signed):
    for bits in (1, 2, 5, 8):
        m, v, t = values_and_table(f"exact:bits={bits},signed={int(signed)}")
        assert np.array_equal(t, np.outer(v, v))
        assert m.plan == "exact-gemm"
    assert am.multiplier("exact:bits=16,signed=1").product(-32768, -32768) == 1 << 30


def test_truncation_error_bounds_8_bit():
    for cut in range(0, 16):
        _, v, t = values_and_table(f"truncated:cut={cut}")
        error = t - np.outer(v, v)
        # removed bits: at most the full value of columns below cut
        bound = sum(min(q + 1, 15 - q) << q for q in range(cut))
        # at a = b = 255 every removed bit is 1, so the bound is reached
        assert error.max() == 0 and -error.min() == bound == -error[-1, -1]
        assert (t % (1 << cut) == 0).all()  # low output bits are 0


def test_corrected_truncation_is_nearly_unbiased():
    for cut in (4, 6, 8, 10):
        for signed in (0, 1):
            m = am.multiplier(f"truncated:cut={cut},correct=1,signed={signed}")
            assert abs(m.metrics()["bias"]) <= 0.5, m.spec
            assert m.product(0, 0) > 0  # documented: the constant makes 0 * x nonzero


def test_signed_arrays():
    # an unbroken Baugh-Wooley array is exact (the identity the signed families rest on)
    for bits in (2, 5, 8):
        _, v, t = values_and_table(f"bam:bits={bits},signed=1")
        assert np.array_equal(t, np.outer(v, v))
    # worked example, n = 4, cut = 4: a = -3 (1101), b = 5 (0101); kept cells of
    # columns >= 4: (3,1) NAND(1,0) = 1 -> 16, (2,2) 1 -> 16, (3,2) NAND(1,1) = 0,
    # (1,3) NAND(0,0) = 1 -> 16, (2,3) NAND(1,0) = 1 -> 32, (3,3) AND(1,0) = 0;
    # constants 16 + 128: 224 = 1110_0000 -> -32 (exact -15)
    assert am.multiplier("truncated:bits=4,cut=4,signed=1").product(-3, 5) == -32
    # truncation only removes bits, but in two's complement a removed NAND one lowers the value
    _, v, t = values_and_table("truncated:cut=6,signed=1")
    assert (t <= np.outer(v, v)).all() and (t % 64 == 0).all()


def test_one_sided_errors_and_symmetry():
    for s in ("mitchell", "ilm:iterations=1", "dsm:m=3", "truncated:cut=7", "bam:hbl=3,vbl=6"):
        _, v, t = values_and_table(s)
        assert (t <= np.outer(v, v)).all(), s  # these designs never overestimate
    for s in ("drum:k=3", "dsm:m=4", "mitchell", "ilm:iterations=2", "roba", "truncated:cut=9",
              "drum:k=3,signed=1", "roba:signed=1", "bam:hbl=0,vbl=5"):
        _, _, t = values_and_table(s)
        assert np.array_equal(t, t.T), s  # symmetric designs
    _, _, t = values_and_table("bam:hbl=2,vbl=3")  # rows are bits of b: not symmetric
    assert not np.array_equal(t, t.T)


def test_segment_families_exact_for_small_operands_and_powers_of_two():
    for k in (2, 4, 6):
        _, v, t = values_and_table(f"drum:k={k}")
        small = v < (1 << k)
        assert np.array_equal(t[np.ix_(small, small)], np.outer(v[small], v[small]))
    _, v, t = values_and_table("mitchell")
    powers = (v > 0) & ((v & (v - 1)) == 0)
    assert np.array_equal(t[powers], np.outer(v[powers], v))  # exact when a is a power of two


def test_sign_magnitude_families_are_odd():
    for s in ("drum:k=3", "dsm:m=3", "mitchell", "ilm:iterations=1", "roba"):
        m, v, t = values_and_table(s + ",signed=1" if ":" in s else s + ":signed=1")
        inner = (v > -128)  # -(-128) is out of range
        assert np.array_equal(t[inner][:, inner], -t[inner][:, inner][::-1, :]), s


def test_enough_ilm_iterations_are_exact():
    _, v, t = values_and_table("ilm:iterations=7")
    assert np.array_equal(t, np.outer(v, v))


def test_factorized_plans():
    assert am.multiplier("drum:k=4").plan == "factorized-gemm"
    # rank 1 + cut (+ 1 for the correction constant): short sums run as GEMMs,
    # long ones through the table kernel, which is faster past a few GEMMs:
    # past 2 with AVX2's int16 GEMMs, past 6 elsewhere, past 8 on AMX tiles
    # for factors that fit bytes, as truncation's do (docs/benchmarks.md)
    longest = {"avx2": 2, "avx512amx": 8}.get(am.info()["isa"], 6)
    # An error local to the low nibbles runs as the exact GEMM plus a
    # nibble-table GEMM where the kernel set has a nibble kernel, from rank 2
    # on AVX2 and rank 3 on AVX-512; never on AMX tiles, where factors that
    # fit bytes (truncation's do) run as byte GEMMs (measured faster there,
    # docs/benchmarks.md)
    nibble = am.info()["kernel.nibble-table"].startswith("16-byte")
    nibble_from = {"avx2": 2, "avx512": 3}.get(am.info()["isa"]) if nibble else None
    for spec, rank, nibble_error in (("truncated:cut=1", 2, True), ("truncated:cut=2", 3, True),
                                     ("truncated:cut=3,correct=1", 5, True),
                                     ("truncated:cut=6", 7, False),
                                     ("truncated:cut=6,correct=1", 8, False),
                                     ("truncated:cut=7,correct=1", 9, False)):
        expected = ("exact-plus-table" if nibble_error and nibble_from is not None
                    and rank >= nibble_from
                    else "factorized-gemm" if rank <= longest else "table")
        assert am.multiplier(spec).plan == expected, spec
    # wider than 8 bits there is no table kernel to lose to
    assert am.multiplier("truncated:bits=12,cut=4").plan == "factorized-gemm"
    # factors beyond int16 run as byte-split GEMMs, up to rank 3 (RoBA: 2)
    assert am.multiplier("drum:bits=16,k=4").plan == "factorized-gemm"
    assert am.multiplier("drum:bits=16,k=4,signed=1").plan == "factorized-gemm"
    assert am.multiplier("roba:bits=16").plan == "factorized-gemm"
    # rank 3 or more, with the error in the low bytes (cut <= 8): the exact
    # GEMM plus an 8-bit table GEMM of the error, in either signedness
    assert am.multiplier("truncated:bits=16,cut=2").plan == "exact-plus-table"
    assert am.multiplier("truncated:bits=16,cut=8,correct=1").plan == "exact-plus-table"
    assert am.multiplier("truncated:bits=9,cut=8,signed=1").plan == "exact-plus-table"
    assert am.multiplier("bam:bits=16,hbl=0,vbl=6,signed=1").plan == "exact-plus-table"
    # dropped cells in more byte pairs (cut > 8, rows below hbl): the exact
    # GEMM plus a table GEMM for each pair, in either signedness, unless the
    # signed sum can wrap
    for spec in ("truncated:bits=16,cut=9", "bam:bits=16,hbl=1,vbl=6", "bam:bits=16,hbl=2,vbl=0",
                 "truncated:bits=16,cut=16,signed=1,correct=1", "bam:bits=12,hbl=10,vbl=0,signed=1",
                 "truncated:bits=10,cut=19"):
        assert am.multiplier(spec).plan == "exact-plus-table", spec
    assert am.multiplier("bam:bits=16,hbl=15,vbl=0,signed=1").plan == "function"
    assert am.multiplier("mitchell").plan == "table"
    assert am.multiplier("mitchell:bits=12").plan == "function"


def _all_products(m):
    """Every product of an 8-bit multiplier through matmul's kernels: C = A B
    with A the 256 codes as a column and B as a row (inner size 1)."""
    low, high = m.operand_range
    dtype = np.int8 if m.signed else np.uint8
    v = np.arange(low, high + 1)
    return am.matmul(v.astype(dtype)[:, None], v.astype(dtype)[None, :], m), v


def check_small_rank_tables(signed, longest):
    """Products a*b plus errors sum_k p_k(a) q_k(b) of residues, linear in
    neither operand's bits and with no rank-1 form, and products P Q of
    small random integer matrices: only the general lattice search
    factorizes them, up to rank ``longest``. Rows of such a table alone span
    no integer basis (rows 2 and 3 of a*b are 2b and 3b), and the residues'
    rows bring denominators the search must fold away."""
    rng = np.random.default_rng(11)
    bits = np.arange(256)
    a = bits - 256 * (bits >= 128) if signed else bits
    for rank in range(2, 8):  # (rank 1 here is the exact table: exact-gemm)
        error = sum((((bits * (2 * k + 3)) % (2 * k + 5)) - 2)[:, None]
                    * (((bits * (k + 2)) % (k + 7)) - 3) for k in range(rank - 1))
        small = rng.integers(-20, 20, (256, rank)) @ rng.integers(-20, 20, (rank, 256))
        for name, table in (("exact plus error", a[:, None] * a + error), ("P Q", small)):
            m = am.Multiplier.from_table(table, signed=signed)
            expected = "factorized-gemm" if rank <= longest else "table"
            assert m.plan == expected, (name, rank, m.plan)
            got, v = _all_products(m)
            assert np.array_equal(got, table[v[:, None] & 255, v[None, :] & 255]), (name, rank)


@pytest.mark.parametrize("signed", [False, True])
def test_tables_of_small_integer_rank_run_as_gemms(signed, python_runner):
    # int16 GEMMs of the search's factors beat the table kernel up to rank 2
    # (structure.hpp, kMaxLatticeRank); forced further, ranks 3-6 stay exact
    check_small_rank_tables(signed, 2)
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            f"from test_families import check_small_rank_tables; "
            f"check_small_rank_tables({signed}, 6); print('ok')")
    result = python_runner(code, env={"APPROXMUL_MAX_FACTORIZED_RANK": "6"})
    assert result.stdout.strip() == "ok", result.stderr


def test_wide_families_work_in_matmul():
    rng = np.random.default_rng(3)
    for s in ("drum:bits=12,k=4,signed=1", "truncated:bits=12,cut=9", "roba:bits=16"):
        m = am.multiplier(s)
        low, high = m.operand_range
        dtype = np.int16 if m.signed else np.uint16
        a = rng.integers(low, high + 1, size=(3, 5)).astype(dtype)
        b = rng.integers(low, high + 1, size=(5, 2)).astype(dtype)
        c = am.matmul(a, b, m)
        expected = [[sum(m.product(int(a[i, k]), int(b[k, j])) for k in range(5)) for j in range(2)]
                    for i in range(3)]
        assert c.tolist() == expected, s


def test_families_list_cites_papers():
    names = {f["name"]: f for f in am.families()}
    assert set(names) == {"exact", "truncated", "bam", "drum", "dsm", "mitchell", "ilm", "roba"}
    for name, year in [("drum", "2015"), ("mitchell", "1962"), ("ilm", "2011"), ("roba", "2017"),
                       ("bam", "2010"), ("dsm", "2015"), ("truncated", "1993")]:
        assert year in names[name]["description"], name
    assert "k=4 (2..bits)" in names["drum"]["parameters"]
