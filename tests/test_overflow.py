"""K = 2^20 through the public API: broadcast (stride-0) views, int64 chosen
automatically and exact, an int32 out refused. tests/portable/test_overflow.py
covers the same at the C ABI without NumPy."""

import numpy as np
import pytest

import approxmul_cffi as am

K = 2**20


@pytest.mark.parametrize("bits, signed, dtype", [(8, True, np.int8), (8, False, np.uint8),
                                                 (16, True, np.int16)])
def test_extreme_products_over_k_two_to_the_twenty(bits, signed, dtype):
    m = am.Multiplier.exact(bits, signed=signed)
    low, high = m.operand_range
    column = np.array([low, high, 0], dtype)
    a = np.broadcast_to(column[:, None], (3, K))   # strides (itemsize, 0)
    b = np.broadcast_to(column[None, :], (K, 3))   # strides (0, itemsize)
    result = am.matmul(a, b, m)
    assert result.dtype == np.int64
    expected = K * np.outer(column.astype(object), column.astype(object))
    assert result.tolist() == expected.tolist()
    out = np.full((3, 3), 7, np.int32)
    with pytest.raises(am.AccumulatorOverflowError, match="int64"):
        am.matmul(a, b, m, out=out)
    assert (out == 7).all()


def test_int32_kept_exactly_up_to_its_limit():
    m = am.Multiplier.exact(8)
    inner = (2**31 - 1) // (255 * 255)  # 33,025: the last inner size int32 holds
    a = np.broadcast_to(np.uint8(255), (1, inner))
    b = np.broadcast_to(np.uint8(255), (inner, 1))
    result = am.matmul(a, b, m)
    assert result.dtype == np.int32 and int(result[0, 0]) == inner * 255 * 255
    assert am.matmul(a[:, :1].repeat(inner + 1, 1), b[:1].repeat(inner + 1, 0), m).dtype \
        == np.int64


@pytest.mark.parametrize("spec", ["exact:bits=16,signed=1", "exact:bits=16", "drum:bits=16,k=4"])
@pytest.mark.parametrize("inner", [511, 512, 513, 1024, 1100])
@pytest.mark.parametrize("rows, cols", [(5, 3), (3, 5)])
def test_largest_16_bit_products_across_int32_block_limits(spec, inner, rows, cols):
    """16-bit operands at their extremes, so that each step's byte x int16
    product is the largest the split GEMM's int32 blocks must hold (2^22
    where a byte is -128 against -2^15), at inner sizes on either side of
    the 511 steps a block holds; both orientations of the split (bytes from
    the larger operand)."""
    m = am.multiplier(spec)
    low, high = m.operand_range
    dtype = np.int16 if m.signed else np.uint16
    rng = np.random.default_rng(inner)
    a = rng.choice([low, high], (rows, inner)).astype(dtype)
    b = rng.choice([low, high], (inner, cols)).astype(dtype)
    a[0] = low
    b[:, 0] = low
    table = {(x, y): m.product(x, y) for x in (low, high) for y in (low, high)}
    expected = [[sum(table[int(a[i, k]), int(b[k, j])] for k in range(inner)) for j in range(cols)]
                for i in range(rows)]
    assert am.matmul(a, b, m).tolist() == expected
