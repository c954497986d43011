"""Bit-exactness of matmul and multiply against the NumPy table reference."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import approxmul_cffi as am
import reference
from reference import exact_table, table_matmul

DTYPE = {(8, True): np.int8, (8, False): np.uint8}


def random_operands(rng, shape, bits, signed, dtype=None):
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    dtype = dtype or (np.int8 if signed else np.uint8) if bits <= 8 else \
        (np.int16 if signed else np.uint16)
    return rng.integers(low, high, size=shape).astype(dtype)


def strided_view(rng, array, layout):
    """The same values laid out contiguously, transposed, sliced or reversed."""
    if layout == "contiguous":
        return array
    if layout == "fortran":
        return np.asfortranarray(array)
    if layout == "transposed":
        return array.T.copy().T
    if layout == "sliced":
        big = np.zeros((array.shape[0] * 2, array.shape[1] * 3), array.dtype)
        big[::2, ::3] = array
        return big[::2, ::3]
    if layout == "reversed":
        return np.ascontiguousarray(array[::-1, ::-1])[::-1, ::-1]
    raise ValueError(layout)


LAYOUTS = ["contiguous", "fortran", "transposed", "sliced", "reversed"]


def threaded_matmul(threads, rng, a, a_layout, b, b_layout, m, **options):
    """am.matmul of a and b laid out as a_layout and b_layout, on `threads`
    library threads (the setting restored after)."""
    before = am.get_num_threads()
    am.set_num_threads(threads)
    try:
        return am.matmul(strided_view(rng, a, a_layout), strided_view(rng, b, b_layout), m,
                         **options)
    finally:
        am.set_num_threads(before)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.integers(0, 40), cols=st.integers(0, 300), inner=st.integers(0, 300),
       signed=st.booleans(), threads=st.sampled_from([1, 2]),
       a_layout=st.sampled_from(LAYOUTS), b_layout=st.sampled_from(LAYOUTS),
       seed=st.integers(0, 2**32 - 1))
def test_random_table_matmul_is_bit_exact(rows, cols, inner, signed, threads, a_layout,
                                          b_layout, seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(-40000, 40000, size=(256, 256))
    m = am.Multiplier.from_table(table, signed=signed)
    a = strided_view(rng, random_operands(rng, (rows, inner), 8, signed), a_layout)
    b = strided_view(rng, random_operands(rng, (inner, cols), 8, signed), b_layout)
    am.set_num_threads(threads)
    try:
        result = am.matmul(a, b, m)
    finally:
        am.set_num_threads(0)
    assert result.shape == (rows, cols)
    assert result.dtype == reference.accumulator_dtype(np.abs(table).max(), 8, signed, inner)
    np.testing.assert_array_equal(result, table_matmul(table, a, b, 8))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("cols", [320, 577, 1000, 3136])
def test_random_table_column_jobs_share_the_chunks(cols, threads):
    # the weight-stationary table kernel's column jobs take the 64-column
    # chunks evenly, larger jobs first (3136: ten of 4 chunks, three of 3;
    # 577: 4, 3 and 3, the last chunk one column), and the sums do not
    # depend on that split
    rng = np.random.default_rng(cols + threads)
    table = rng.integers(0, 65536, size=(256, 256))
    m = am.Multiplier.from_table(table)
    a = rng.integers(0, 256, (5, 70), dtype=np.uint8)
    b = rng.integers(0, 256, (70, cols), dtype=np.uint8)
    am.set_num_threads(threads)
    try:
        result = am.matmul(a, b, m)
    finally:
        am.set_num_threads(0)
    assert m.plan == "table"
    np.testing.assert_array_equal(result, table_matmul(table, a, b, 8))


@pytest.mark.parametrize("bits", [1, 2, 3, 5, 7, 8])
@pytest.mark.parametrize("signed", [False, True])
def test_narrow_tables(bits, signed):
    rng = np.random.default_rng(bits)
    side = 1 << bits
    table = rng.integers(-(2**20), 2**20, size=(side, side))
    m = am.Multiplier.from_table(table, signed=signed)
    assert (m.bits, m.signed, m.plan) == (bits, signed, "table")
    np.testing.assert_array_equal(m.table(), table)
    a = random_operands(rng, (17, 33), bits, signed)
    b = random_operands(rng, (33, 9), bits, signed)
    np.testing.assert_array_equal(am.matmul(a, b, m), table_matmul(table, a, b, bits))


@pytest.mark.parametrize("bits", [2, 4, 8, 11, 16])
@pytest.mark.parametrize("signed", [False, True])
def test_exact_multiplier(bits, signed):
    rng = np.random.default_rng(bits)
    m = am.Multiplier.exact(bits=bits, signed=signed)
    assert m.plan == "exact-gemm"
    a = random_operands(rng, (13, 70), bits, signed)
    b = random_operands(rng, (70, 21), bits, signed)
    expected = a.astype(np.int64) @ b.astype(np.int64)
    np.testing.assert_array_equal(am.matmul(a, b, m), expected)
    lo, hi = m.operand_range
    assert m.product(lo, lo) == lo * lo and m.product(hi, lo) == hi * lo


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(["exact", "drum", "roba"]), bits=st.sampled_from([9, 12, 15, 16]),
       signed=st.booleans(),
       shape=st.tuples(st.integers(1, 70), st.integers(1, 90), st.integers(1, 200)),
       a_layout=st.sampled_from(LAYOUTS), b_layout=st.sampled_from(LAYOUTS),
       threads=st.sampled_from([1, 2]), zero_points=st.booleans(),
       out=st.sampled_from([None, "rows", "columns", "sliced"]), seed=st.integers(0, 2**32 - 1))
def test_wide_products_as_byte_gemms(family, bits, signed, shape, a_layout, b_layout, threads,
                                     zero_points, out, seed):
    """9-16-bit exact products, DRUM's (rank 1, factors up to 16 bits) and
    RoBA's (rank 2, factors up to 2^16), run as three 8-bit GEMMs on the bytes
    of the values or factors (split_gemm): every layout, both signs, extreme
    codes, zero points."""
    from kernel_cases import drum_values, roba_sums, signed_drum
    rng = np.random.default_rng(seed)
    rows, cols, inner = shape
    if family == "exact":
        m, f = am.Multiplier.exact(bits=bits, signed=signed), np.asarray
    elif family == "drum":
        m = am.multiplier(f"drum:bits={bits},k=4,signed={int(signed)}")
        f = (lambda v: signed_drum(v, 4)) if signed else (lambda v: drum_values(v, 4))
    else:
        m = am.multiplier(f"roba:bits={bits},signed={int(signed)}")
    assert m.plan == ("exact-gemm" if family == "exact" else "factorized-gemm")
    lo, hi = m.operand_range
    a = random_operands(rng, (rows, inner), bits, signed)
    b = random_operands(rng, (inner, cols), bits, signed)
    a.flat[::7], b.flat[::5] = lo, hi  # the corners of the byte split
    za, zb = (int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))) if zero_points \
        else (0, 0)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    # sum_k M(a, b) - zb sum_k a - za sum_k b + K za zb, M(a, b) = f(a) f(b)
    sums = roba_sums(a64, b64) if family == "roba" else f(a64) @ f(b64)
    want = (sums - zb * a64.sum(1, keepdims=True) - za * b64.sum(0, keepdims=True)
            + inner * za * zb)
    before = am.get_num_threads()
    am.set_num_threads(threads)
    try:
        # C may hold the running total itself (int64, rows in memory order) or not
        target = {None: None, "rows": np.empty((rows, cols), np.int64),
                  "columns": np.empty((cols, rows), np.int64).T,
                  "sliced": np.empty((rows, 2 * cols), np.int64)[:, ::2]}[out]
        got = am.matmul(strided_view(rng, a, a_layout), strided_view(rng, b, b_layout), m,
                        a_zero_point=za, b_zero_point=zb, out=target)
    finally:
        am.set_num_threads(before)
    np.testing.assert_array_equal(got, want)
    assert target is None or got is target


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(["mitchell", "ilm"]), iterations=st.sampled_from([0, 1, 2, 5, 16]),
       bits=st.sampled_from([9, 12, 16]), signed=st.booleans(),
       shape=st.tuples(st.integers(1, 70), st.integers(1, 300), st.integers(1, 300)),
       a_layout=st.sampled_from(LAYOUTS), b_layout=st.sampled_from(LAYOUTS),
       threads=st.sampled_from([1, 2]), zero_points=st.booleans(),
       out=st.sampled_from([None, "rows", "sliced"]), seed=st.integers(0, 2**32 - 1))
def test_wide_log_products_in_vector_lanes(family, iterations, bits, signed, shape, a_layout,
                                           b_layout, threads, zero_points, out, seed):
    """9-16-bit Mitchell and ILM have no table and no factorization: their
    GEMM blocks run the formulas in int64 lanes (log_block), tails of every
    width, zero operands, the extreme codes, zero points, int32 and strided
    outputs, ILM's rounds up to the most a 16-bit operand has."""
    from kernel_cases import ilm_values, mitchell_values
    rng = np.random.default_rng(seed)
    rows, cols, inner = shape
    iterations = min(iterations, bits)
    if family == "mitchell":
        m = am.multiplier(f"mitchell:bits={bits},signed={int(signed)}")
        product = mitchell_values
    else:
        m = am.multiplier(f"ilm:bits={bits},iterations={iterations},signed={int(signed)}")
        def product(x, y):
            return ilm_values(x, y, iterations)
    assert m.plan == "function"
    lo, hi = m.operand_range
    a = random_operands(rng, (rows, inner), bits, signed)
    b = random_operands(rng, (inner, cols), bits, signed)
    a.flat[::7], b.flat[::5], a.flat[::9], b.flat[::11] = lo, hi, 0, 0
    za, zb = (int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))) if zero_points \
        else (0, 0)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    sums = np.zeros((rows, cols), np.int64)
    for k in range(inner):
        sums += product(a64[:, k:k + 1], b64[k:k + 1, :])
    want = (sums - zb * a64.sum(1, keepdims=True) - za * b64.sum(0, keepdims=True)
            + inner * za * zb)
    # the default output is int32 where the products' bound allows (9 bits, short sums)
    target = {None: None, "rows": np.empty((rows, cols), np.int64),
              "sliced": np.empty((rows, 2 * cols), np.int64)[:, ::2]}[out]
    got = threaded_matmul(threads, rng, a, a_layout, b, b_layout, m, a_zero_point=za,
                          b_zero_point=zb, out=target)
    np.testing.assert_array_equal(got, want)
    assert target is None or got is target
    if bits == 9 and inner <= 64 and out is None:
        assert got.dtype == np.int32


@pytest.mark.parametrize("family", ["exact", "drum"])
@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows, inner, cols", [(97, 311, 203), (97, 1100, 603), (603, 700, 97)])
def test_wide_products_on_threads(family, signed, threads, rows, inner, cols):
    """A problem large enough for the byte split, its GEMMs and its folds to
    run on several threads (and B's column sums in per-thread parts); the
    bytes from B, then from A, in rows longer than the split's runs of table
    lookups (512 codes)."""
    from kernel_cases import drum_values, signed_drum
    rng = np.random.default_rng(11)
    if family == "exact":
        m, f = am.Multiplier.exact(bits=16, signed=signed), np.asarray
    else:
        m = am.multiplier(f"drum:bits=16,k=6,signed={int(signed)}")
        f = (lambda v: signed_drum(v, 6)) if signed else (lambda v: drum_values(v, 6))
    a = random_operands(rng, (rows, inner), 16, signed).astype(np.int64)
    b = random_operands(rng, (inner, cols), 16, signed).astype(np.int64)
    lo, hi = m.operand_range
    want = f(a) @ f(b) - lo * a.sum(1, keepdims=True) - hi * b.sum(0, keepdims=True) + inner * hi * lo
    a, b = a.astype(np.int16 if signed else np.uint16), b.astype(np.int16 if signed else np.uint16)
    before = am.get_num_threads()
    am.set_num_threads(threads)
    try:
        got = am.matmul(a, b, m, a_zero_point=hi, b_zero_point=lo)
    finally:
        am.set_num_threads(before)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("spec", ["exact:bits=16", "exact:bits=12,signed=1",
                                  "drum:bits=16,k=4,signed=1"])
@pytest.mark.parametrize("shapes", [((0, 5), (5, 3)), ((4, 0), (0, 3)), ((4, 5), (5, 0))])
def test_wide_products_of_empty_operands(spec, shapes):
    """Empty sums are the zero-point terms' K za zb = 0: zeros, no bytes split."""
    m = am.multiplier(spec)
    dtype = np.int16 if m.signed else np.uint16
    a, b = np.ones(shapes[0], dtype), np.ones(shapes[1], dtype)
    got = am.matmul(a, b, m, a_zero_point=2, b_zero_point=1)
    want = (a.astype(np.int64) - 2) @ (b.astype(np.int64) - 1) if spec.startswith("exact") else \
        np.zeros((shapes[0][0], shapes[1][1]), np.int64)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_a_table_equal_to_exact_runs_as_exact_gemm():
    for signed in (False, True):
        m = am.Multiplier.from_table(exact_table(8, signed), signed=signed)
        assert m.plan == "exact-gemm"
        almost = exact_table(8, signed)
        almost[3, 5] += 1
        # not exact; a*b plus a one-entry error is rank 2: two GEMMs
        m = am.Multiplier.from_table(almost, signed=signed)
        assert m.plan == "factorized-gemm"
        codes = np.array([[3, 4]], np.int8 if signed else np.uint8)
        assert am.matmul(codes.T, np.array([[5, 5]], codes.dtype), m).tolist() == [[16, 16],
                                                                                  [20, 20]]


@given(a_zero=st.integers(0, 255), b_zero=st.integers(0, 255), seed=st.integers(0, 1000))
@settings(max_examples=25, deadline=None)
def test_zero_points_only_cross_terms_exact(a_zero, b_zero, seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(0, 65536, size=(256, 256))
    m = am.Multiplier.from_table(table)
    a = random_operands(rng, (9, 40), 8, False)
    b = random_operands(rng, (40, 11), 8, False)
    result = am.matmul(a, b, m, a_zero_point=a_zero, b_zero_point=b_zero)
    np.testing.assert_array_equal(result, table_matmul(table, a, b, 8, a_zero, b_zero))
    # with the exact multiplier this is the product of the centred codes
    exact = am.matmul(a, b, am.Multiplier.exact(8), a_zero_point=a_zero, b_zero_point=b_zero)
    np.testing.assert_array_equal(
        exact, (a.astype(np.int64) - a_zero) @ (b.astype(np.int64) - b_zero))


@pytest.mark.parametrize("make, bits, signed, max_abs, za, zb, code, product", [
    # code: the operand value filling a and b; product: mul(code, code)
    (lambda: am.Multiplier.exact(8), 8, False, 255 * 255, 0, 0, 255, 255 * 255),
    (lambda: am.Multiplier.exact(8, signed=True), 8, True, 128 * 128, -128, 127, -128, 2**14),
    (lambda: am.Multiplier.from_table(np.full((256, 256), -40001)), 8, False, 40001, 3, 200,
     255, -40001),
    (lambda: am.Multiplier.exact(16, signed=True), 16, True, 2**30, 0, 0, -2**15, 2**30),
    (lambda: am.Multiplier.exact(11), 11, False, 2047**2, 5, 0, 2047, 2047**2),
    # a bound of exactly 2^31 - 1 (a prime: only term 1 reaches it) is int32
    (lambda: am.Multiplier.from_table(np.ones((4, 4), np.int32)), 2, False, 1, 0, 0, 3, 1),
])
def test_output_dtype_switches_exactly_at_the_int32_limit(make, bits, signed, max_abs, za, zb,
                                                          code, product):
    m = make()
    max_operand = 1 << (bits - 1) if signed else (1 << bits) - 1
    term = max_abs + (abs(za) + abs(zb)) * max_operand + abs(za * zb)
    limit = (2**31 - 1) // term  # the largest inner size whose sums all fit int32
    for inner, want in ((limit - 1, "int32"), (limit, "int32"), (limit + 1, "int64")):
        assert am.accumulator_dtype(m, inner, za, zb) == want, inner
        assert reference.accumulator_dtype(max_abs, bits, signed, inner, za, zb) == want
    if limit > 10**6:
        return  # operands of 2^31 codes: the dtype rule above is the check
    # operands that reach the bound: the exact sum, in the chosen dtype
    dtype = DTYPE.get((bits, signed), np.int16 if signed else np.uint16)
    for inner in (limit, limit + 1):
        a = np.full((1, inner), code, dtype)
        got = am.matmul(a, a.T.copy(), m, a_zero_point=za, b_zero_point=zb)
        assert got.dtype == ("int32" if inner == limit else "int64")
        assert int(got[0, 0]) == inner * (product - zb * code - za * code + za * zb)


def test_large_inner_size_switches_to_int64_and_stays_exact():
    # 255*255*40000 > 2^31: an int32 accumulator would wrap
    inner = 40000
    a = np.full((2, inner), 255, np.uint8)
    b = np.full((inner, 3), 255, np.uint8)
    m = am.Multiplier.exact(8)
    result = am.matmul(a, b, m)
    assert result.dtype == np.int64
    assert (result == 255 * 255 * inner).all()
    table_m = am.Multiplier.from_table(exact_table(8, False) + (np.arange(256) == 7)[:, None])
    np.testing.assert_array_equal(am.matmul(a, b, table_m), result)


def test_wider_operand_storage_with_narrow_multiplier():
    rng = np.random.default_rng(3)
    table = rng.integers(-100, 100, size=(16, 16))
    m = am.Multiplier.from_table(table, signed=True)
    a = random_operands(rng, (5, 6), 4, True, np.int16)
    b = random_operands(rng, (6, 7), 4, True, np.int8)
    np.testing.assert_array_equal(am.matmul(a, b, m), table_matmul(table, a, b, 4))


def test_out_argument_is_filled_and_returned():
    rng = np.random.default_rng(4)
    m = am.Multiplier.exact(8, signed=True)
    a = random_operands(rng, (6, 5), 8, True)
    b = random_operands(rng, (5, 4), 8, True)
    out = np.zeros((4, 6), np.int64).T  # strided output
    assert am.matmul(a, b, m, out=out) is out
    np.testing.assert_array_equal(out, a.astype(np.int64) @ b.astype(np.int64))


def test_multiply_elementwise_and_broadcasting():
    rng = np.random.default_rng(5)
    table = rng.integers(-5000, 5000, size=(256, 256))
    m = am.Multiplier.from_table(table, signed=True)
    a = random_operands(rng, (3, 4, 5), 8, True)
    b = random_operands(rng, (4, 1), 8, True)
    result = am.multiply(a, b, m)
    expected = table[a.astype(np.int64) & 255, np.broadcast_to(b, a.shape).astype(np.int64) & 255]
    assert result.shape == (3, 4, 5)
    np.testing.assert_array_equal(result, expected)
    assert am.multiply(np.int8(-3), np.int8(5), am.Multiplier.exact(8, True)) == -15


def test_concurrent_python_threads_share_a_multiplier():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(6)
    table = rng.integers(-1000, 1000, size=(256, 256))
    m = am.Multiplier.from_table(table)
    problems = [(random_operands(rng, (30, 50), 8, False), random_operands(rng, (50, 20), 8,
                                                                          False))
                for _ in range(16)]
    expected = [table_matmul(table, a, b, 8) for a, b in problems]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda p: am.matmul(p[0], p[1], m), problems))
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a_zero, b_zero", [(0, 0), (-7, 0), (0, 100), (-128, 127)])
def test_multiply_zero_points_are_one_term_matmuls(a_zero, b_zero):
    rng = np.random.default_rng(6)
    table = rng.integers(-5000, 5000, size=(256, 256))
    m = am.Multiplier.from_table(table, signed=True)
    a = random_operands(rng, (5, 7), 8, True)
    b = random_operands(rng, (5, 7), 8, True)[:, ::-1]  # strided
    got = am.multiply(a, b, m, a_zero_point=a_zero, b_zero_point=b_zero)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    want = (table[a64 & 255, b64 & 255] - b_zero * a64 - a_zero * b64 + a_zero * b_zero)
    np.testing.assert_array_equal(got, want)
    # each element is the 1 x 1 x 1 matmul with the same zero points
    assert got[2, 3] == am.matmul(a[2:3, 3:4], b[2:3, 3:4], m, a_zero_point=a_zero,
                                  b_zero_point=b_zero)[0, 0]
    with pytest.raises(am.OperandRangeError, match="a_zero_point"):
        am.multiply(a, b, m, a_zero_point=200)


def test_linear_bias_and_out():
    rng = np.random.default_rng(7)
    m = am.Multiplier.exact(8, signed=True)
    x = random_operands(rng, (2, 3, 6), 8, True)  # leading dimensions
    w = random_operands(rng, (4, 6), 8, True)
    bias = rng.integers(-1000, 1000, 4)
    want = x.astype(np.int64) @ w.astype(np.int64).T
    np.testing.assert_array_equal(am.linear(x, w, m), want)
    got = am.linear(x, w, m, bias, x_zero_point=3, w_zero_point=-2)
    shifted = (x.astype(np.int64) - 3) @ (w.astype(np.int64) + 2).T + bias
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, shifted)
    out = np.zeros((2, 3, 4), np.int64)
    assert am.linear(x, w, m, bias, out=out) is not None
    np.testing.assert_array_equal(out, want + bias)
    # without NumPy arrays: buffers and a list bias
    import array
    xb = memoryview(array.array("b", [1, 2, 3])).cast("b", shape=[1, 3])
    wb = memoryview(array.array("b", [1, 0, -1, 2, 2, 2])).cast("b", shape=[2, 3])
    assert am.linear(xb, wb, m, [10, -12]).tolist() == [[8, 0]]


def test_out_is_keyword_only_everywhere():
    m = am.Multiplier.exact(8)
    a = np.ones((2, 2), np.uint8)
    out = np.zeros((2, 2), np.int32)
    for op in (am.matmul, am.multiply):
        with pytest.raises(TypeError):
            op(a, a, m, out)
    with pytest.raises(TypeError):
        am.bmm(a[None], a[None], m, out[None])


def test_linear_out_errors_write_nothing():
    m = am.Multiplier.exact(8)
    x = np.ones((2, 3, 4), np.uint8)
    w = np.ones((5, 4), np.uint8)
    out = np.zeros((2, 3, 5), np.int32)
    with pytest.raises(am.DTypeError, match="int64"):
        am.linear(x, w, m, [1] * 5, out=out)
    with pytest.raises(am.ShapeError, match="without a copy"):
        am.linear(x, w, m, out=np.zeros((2, 5, 3), np.int64).transpose(0, 2, 1))
    with pytest.raises(am.ShapeError, match="bias"):
        am.linear(x, w, m, np.ones(4, np.int64))
    assert not out.any()
    assert am.linear(x, w, m, out=out) is out and (out == 4).all()



@pytest.mark.parametrize("signed", [False, True])
def test_packed_a_from_byte_rows_and_reused_buffers(signed):
    """A's codes in byte rows pack through a lookup per code (exact, rank 1
    and rank 2 factorizations), strided ones through the general walk; both
    into a per-thread buffer that later calls reuse uncleared: padding rows,
    odd inner sizes and shared or per-job packing after larger calls."""
    rng = np.random.default_rng(11)
    v = np.arange(-128, 128) if signed else np.arange(256)
    tables = {"exact": np.outer(v, v),
              "rank 1": np.outer(v | 1, v | 3),
              "rank 2": np.outer(v, v) + np.outer(v // 16, v // 16)}  # high-nibble error
    for name, by_value in tables.items():
        table = np.empty((256, 256), np.int64)  # by raw code
        table[np.ix_(v & 0xff, v & 0xff)] = by_value
        m = am.Multiplier.from_table(table, signed=signed)
        assert m.plan in ("exact-gemm", "factorized-gemm"), (name, m.plan)
        for rows, inner, cols in [(64, 700, 300), (5, 301, 260), (67, 64, 129), (3, 1025, 300)]:
            a = random_operands(rng, (rows, inner), 8, signed)
            b = random_operands(rng, (inner, cols), 8, signed)
            want = table_matmul(table, a, b, 8)
            for view in (a, np.asfortranarray(a)):
                assert np.array_equal(am.matmul(view, b, m), want), (name, rows, inner, cols)


def test_packed_a_too_large_to_keep():
    """A packed A past what a thread keeps between calls (4 MiB) is the call's
    own; before and after it, smaller calls reuse the kept buffer."""
    rng = np.random.default_rng(12)
    m = am.Multiplier.exact(8)
    for rows, inner, cols in [(300, 700, 80), (2200, 1030, 64), (301, 700, 80)]:
        a = random_operands(rng, (rows, inner), 8, False)
        b = random_operands(rng, (inner, cols), 8, False)
        assert np.array_equal(am.matmul(a, b, m), a.astype(np.int64) @ b.astype(np.int64))
