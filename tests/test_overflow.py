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
