"""Largest-magnitude products summed over K = 2^20: exact in int64, never wrapped.

Zero strides (one stored element repeated K times) make K = 2^20 cost no
memory; they are called through the C ABI so that no NumPy is needed.
"""

import array

import pytest

import approxmul_cffi as am
from approxmul_cffi._library import ffi, lib

K = 2**20
TYPECODES = {lib.APPROXMUL_INT8: ("b", "int8_t"), lib.APPROXMUL_UINT8: ("B", "uint8_t"),
             lib.APPROXMUL_INT16: ("h", "int16_t"), lib.APPROXMUL_UINT16: ("H", "uint16_t")}


def broadcast_matmul(m, dtype, a_values, b_values, inner, c_dtype, zero_points=(0, 0)):
    """C[i, j] over A[i, :] = a_values[i] and B[:, j] = b_values[j], via stride 0.

    Returns (status, C as nested lists, untouched flag)."""
    typecode, ctype = TYPECODES[dtype]
    a = ffi.from_buffer(ctype + "[]", array.array(typecode, a_values))
    b = ffi.from_buffer(ctype + "[]", array.array(typecode, b_values))
    rows, cols = len(a_values), len(b_values)
    wide = c_dtype == lib.APPROXMUL_INT64
    c = array.array("q" if wide else "i", [7] * (rows * cols))
    pc = ffi.from_buffer(("int64_t" if wide else "int32_t") + "[]", c)
    status = lib.approxmul_matmul(m.handle, rows, cols, inner, dtype, a, 1, 0, dtype, b, 0, 1,
                                  zero_points[0], zero_points[1], c_dtype, pc, cols, 1)
    return status, [list(c[i * cols:(i + 1) * cols]) for i in range(rows)], set(c) == {7}


@pytest.mark.parametrize("bits, signed, dtype", [
    (8, True, lib.APPROXMUL_INT8), (8, False, lib.APPROXMUL_UINT8),
    (16, True, lib.APPROXMUL_INT16), (16, False, lib.APPROXMUL_UINT16),
])
def test_exact_extremes_over_a_million_terms(bits, signed, dtype):
    m = am.Multiplier.exact(bits, signed=signed)
    low, high = m.operand_range
    values = [low, high, low + 1, 0]
    assert am.accumulator_dtype(m, K) == "int64"
    status, c, _ = broadcast_matmul(m, dtype, values, values, K, lib.APPROXMUL_INT64)
    assert status == 0, ffi.string(lib.approxmul_last_error())
    assert c == [[K * x * y for y in values] for x in values]
    # int32 cannot hold 2^20 * 128^2 = 2^34: refused, output untouched
    status, _, untouched = broadcast_matmul(m, dtype, values, values, K, lib.APPROXMUL_INT32)
    assert status == lib.APPROXMUL_ERR_OVERFLOW and untouched
    assert b"int64" in ffi.string(lib.approxmul_last_error())


def test_table_with_int32_extremes():
    entries = [-2**31 if (i + i // 16) % 2 else 2**31 - 1 for i in range(256)]
    m = am.Multiplier.from_table(array.array("i", entries))
    values = [0, 1, 15, 14]
    status, c, _ = broadcast_matmul(m, lib.APPROXMUL_UINT8, values, values, K,
                                    lib.APPROXMUL_INT64)
    assert status == 0
    assert c == [[K * entries[x * 16 + y] for y in values] for x in values]


def test_zero_points_at_their_extremes_stay_exact():
    m = am.Multiplier.exact(8)
    values = [0, 255, 17]
    za, zb = 255, 128
    status, c, _ = broadcast_matmul(m, lib.APPROXMUL_UINT8, values, values, K,
                                    lib.APPROXMUL_INT64, (za, zb))
    assert status == 0
    assert c == [[K * (x - za) * (y - zb) for y in values] for x in values]


def test_sums_beyond_int64_are_refused_before_any_work():
    m = am.Multiplier.from_table(array.array("i", [-2**31] * 65536))  # 8-bit: no value scan
    inner = 2**33  # 2^33 * 2^31 = 2^64: even int64 could overflow
    with pytest.raises(am.AccumulatorOverflowError, match="int64"):
        am.accumulator_dtype(m, inner)
    status, _, untouched = broadcast_matmul(m, lib.APPROXMUL_UINT8, [1], [1], inner,
                                            lib.APPROXMUL_INT64)
    assert status == lib.APPROXMUL_ERR_OVERFLOW and untouched
