"""Core behaviour with plain buffers: what a PyPy or NumPy-free user relies on."""

import array
import os
import textwrap

import pytest

import approxmul_cffi as am
from portable_support import Lcg, matrix, reference_matmul


def test_numpy_absent_when_the_job_says_so():
    # the PyPy job without NumPy sets this, so a NumPy import anywhere fails loudly
    if os.environ.get("APPROXMUL_EXPECT_NO_NUMPY"):
        with pytest.raises(ImportError):
            import numpy  # noqa: F401
    assert am.library_path() and am.__version__


@pytest.mark.parametrize("bits, signed", [(8, False), (8, True), (4, True), (3, False)])
def test_table_matmul_matches_reference(bits, signed):
    rand = Lcg(bits * 2 + signed)
    side = 1 << bits
    table = rand.values(side * side, -70000, 70000)
    m = am.Multiplier.from_table(array.array("i", table), signed=signed)
    low, high = (-(side // 2), side // 2) if signed else (0, side)
    typecode = "b" if signed else "B"
    rows, inner, cols = 5, 300, 7  # inner crosses the kernel's 256-deep block
    a = matrix(typecode, rows, inner, rand.values(rows * inner, low, high))
    b = matrix(typecode, inner, cols, rand.values(inner * cols, low, high))

    def product(x, y):
        return table[(x % side) * side + (y % side)]
    for threads in (1, 2):
        am.set_num_threads(threads)
        try:
            result = am.matmul(a, b, m)
        finally:
            am.set_num_threads(0)
        assert result.format == "i" and result.shape == (rows, cols)
        assert result.tolist() == reference_matmul(product, a, b)


def test_exact_multiplier_and_multiply():
    m = am.Multiplier.exact(8, signed=True)
    a = matrix("b", 2, 3, [-128, 127, 0, 5, -6, 7])
    b = matrix("b", 3, 2, [1, -1, 2, -2, 3, -3])
    assert am.matmul(a, b, m).tolist() == reference_matmul(lambda x, y: x * y, a, b)
    assert am.multiply(a, a, m).tolist() == [[16384, 16129, 0], [25, 36, 49]]
    wide = am.Multiplier.exact(12)
    x = matrix("H", 1, 2, [4095, 3])
    assert am.multiply(x, x, wide).tolist() == [[4095 * 4095, 9]]
    with pytest.raises(am.OperandRangeError, match="12-bit"):
        am.multiply(matrix("H", 1, 1, [4096]), matrix("H", 1, 1, [1]), wide)


def test_out_buffer_and_wide_multiplier():
    m = am.Multiplier.exact(8)
    out = memoryview(bytearray(4 * 6)).cast("i", shape=[2, 3])
    x = matrix("B", 2, 1, [3, 4])
    y = matrix("B", 1, 3, [1, 2, 3])
    assert am.matmul(x, y, m, out=out) is out
    assert out.tolist() == [[3, 6, 9], [4, 8, 12]]


def test_table_round_trip():
    values = list(range(16))
    m = am.Multiplier.from_table(array.array("i", values), signed=True)
    table = m.table()
    assert table.tolist() == [values[0:4], values[4:8], values[8:12], values[12:16]]
    assert (m.bits, m.signed, m.product(-1, 1)) == (2, True, values[3 * 4 + 1])


def test_bad_buffers_raise_and_leave_out_alone():
    m = am.Multiplier.exact(8)
    a = matrix("B", 2, 2, [1, 2, 3, 4])
    out = memoryview(bytearray(b"\x11" * 16)).cast("i", shape=[2, 2])
    with pytest.raises(am.DTypeError, match="format 'd'"):
        am.matmul(array.array("d", [1.0, 2.0]), a, m, out=out)
    with pytest.raises(am.DTypeError, match="^a: element type int8 "):
        am.matmul(matrix("b", 2, 2, [1, 2, 3, 4]), a, m, out=out)  # signed codes, unsigned m
    with pytest.raises(am.ShapeError, match="inner"):
        am.matmul(matrix("B", 2, 3, [0] * 6), a, m, out=out)
    with pytest.raises(am.InvalidArgumentError, match="read-only"):
        am.matmul(a, a, m, out=memoryview(bytes(16)).cast("i", shape=[2, 2]))
    shared = bytearray(64)
    overlapping_out = memoryview(shared)[:16].cast("i", shape=[2, 2])
    with pytest.raises(am.AliasingError, match="overlaps input a"):
        am.matmul(memoryview(shared)[8:12].cast("B", shape=[2, 2]), a, m, out=overlapping_out)
    assert out.tobytes() == b"\x11" * 16


def test_error_with_buffers_in_a_reference_cycle_does_not_crash(python_runner):
    """Regression: an exception kept in a cycle (frame <-> traceback) held the
    buffers' ffi.from_buffer exports; collecting that cycle crashed CPython
    (memoryview cannot be cleared while exported). Exports now end with the call."""
    code = textwrap.dedent("""
        import array, gc
        import approxmul_cffi as am
        m = am.Multiplier.exact(8)
        shared = bytearray(64)
        def fail():
            a = memoryview(shared)[8:12].cast("B", shape=[2, 2])
            out = memoryview(shared)[:16].cast("i", shape=[2, 2])
            try:
                am.matmul(a, a, m, out=out)
            except am.AliasingError as error:
                kept = error  # frame -> kept -> traceback -> frame
            try:
                m.from_table([[1, 2], [3]])
            except am.ShapeError as error:
                kept2 = error
        for _ in range(3):
            fail()
            gc.collect()
        print("ok")
    """)
    result = python_runner(code)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.strip() == "ok"
