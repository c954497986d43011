"""Bad input gets a clear error naming the argument, and out is never written."""

import numpy as np
import pytest

import approxmul_cffi as am

M8S = am.Multiplier.exact(8, signed=True)
M8U = am.Multiplier.exact(8, signed=False)


def operands(signed=True, rows=3, inner=4, cols=5):
    dtype = np.int8 if signed else np.uint8
    return np.ones((rows, inner), dtype), np.ones((inner, cols), dtype)


def sentinel(shape=(3, 5), dtype=np.int32):
    return np.full(shape, 12345, dtype)


@pytest.mark.parametrize("make_call, error, words", [
    (lambda out: am.matmul(*operands(False), M8S, out=out), am.DTypeError, ["a: ", "uint8"]),
    (lambda out: am.matmul(np.ones((3, 4), np.float32), operands()[1], M8S, out=out),
     am.DTypeError, ["a: ", "float32"]),
    (lambda out: am.matmul(operands()[0], np.ones((4, 5), np.int32), M8S, out=out),
     am.DTypeError, ["b: ", "int32"]),
    (lambda out: am.matmul(np.ones((3, 3), np.int8), operands()[1], M8S, out=out),
     am.ShapeError, ["a is 3 x 3 and b is 4 x 5", "inner"]),
    (lambda out: am.matmul(np.ones((3, 4, 1), np.int8), operands()[1], M8S, out=out),
     am.ShapeError, ["a: ", "2-D"]),
    (lambda out: am.matmul(*operands(), M8S, out=out, a_zero_point=300),
     am.OperandRangeError, ["a_zero_point: "]),
    (lambda out: am.matmul(*operands(), "exact", out=out), am.DTypeError, ["multiplier: "]),
    (lambda out: am.matmul(np.full((3, 4), 40, np.int16), operands()[1],
                           am.Multiplier.exact(5, signed=True), out=out),
     am.OperandRangeError, ["a[0, 0] = 40", "5-bit"]),
])
def test_matmul_rejects(make_call, error, words):
    out = sentinel()
    with pytest.raises(error) as info:
        make_call(out)
    # the message starts with the argument at fault, then says what is wrong
    assert str(info.value).startswith(words[0]), str(info.value)
    for word in words[1:]:
        assert word in str(info.value)
    assert (out == 12345).all(), "out was written on error"


def test_error_classes_are_builtin_subclasses():
    assert issubclass(am.DTypeError, TypeError)
    assert issubclass(am.ShapeError, ValueError)
    assert issubclass(am.AccumulatorOverflowError, OverflowError)
    assert issubclass(am.OutOfMemoryError, MemoryError)
    assert issubclass(am.LibraryIOError, OSError)


def test_bad_out():
    a, b = operands()
    with pytest.raises(am.ShapeError, match="out"):
        am.matmul(a, b, M8S, out=np.zeros((5, 3), np.int32))
    readonly = sentinel()
    readonly.flags.writeable = False
    with pytest.raises(am.InvalidArgumentError, match="read-only"):
        am.matmul(a, b, M8S, out=readonly)
    with pytest.raises(am.DTypeError, match="out"):
        am.matmul(a, b, M8S, out=np.zeros((3, 5), np.float64))
    with pytest.raises(am.DTypeError, match="int32 or int64"):
        am.matmul(a, b, M8S, out=np.zeros((3, 5), np.int16))
    # every output element written twice
    overlapping = np.lib.stride_tricks.as_strided(np.zeros(8, np.int32), (3, 5), (4, 4))
    with pytest.raises(am.AliasingError, match="overlap"):
        am.matmul(a, b, M8S, out=overlapping)


def test_out_overlapping_an_input():
    buffer = np.zeros(64, np.int32)
    a = buffer.view(np.int8)[:12].reshape(3, 4)
    b = np.ones((4, 5), np.int8)
    out = buffer[2:17].reshape(3, 5)  # bytes 8..68 overlap a's 0..12
    with pytest.raises(am.AliasingError, match="overlaps input a"):
        am.matmul(a, b, M8S, out=out)


def test_int32_out_that_could_overflow_is_rejected():
    a = np.full((2, 40000), 255, np.uint8)
    b = np.full((40000, 2), 255, np.uint8)
    out = np.full((2, 2), 7, np.int32)
    with pytest.raises(am.AccumulatorOverflowError, match="int64"):
        am.matmul(a, b, M8U, out=out)
    assert (out == 7).all()


def test_bad_tables():
    with pytest.raises(am.ShapeError, match="2\\^n"):
        am.Multiplier.from_table(np.zeros((3, 3), np.int32))
    with pytest.raises(am.ShapeError, match="square"):
        am.Multiplier.from_table(np.zeros((4, 8), np.int32))
    with pytest.raises(am.ShapeError, match="n in 1..12"):
        am.Multiplier.from_table(np.zeros((1, 1), np.int32))
    with pytest.raises(am.ShapeError, match="8192 x 8192 is larger than 4096 x 4096"):
        am.Multiplier.from_table(np.zeros((8192, 8192), np.uint8))
    with pytest.raises(am.DTypeError, match="float"):
        am.Multiplier.from_table(np.zeros((4, 4), np.float64))
    with pytest.raises(am.InvalidArgumentError, match="int32"):
        am.Multiplier.from_table(np.full((4, 4), 2**31, np.int64))
    with pytest.raises(am.ShapeError, match="row 1"):
        am.Multiplier.from_table([[1, 2], [3]])


def test_bad_multiplier_arguments():
    for bits in (0, 17, -1):
        with pytest.raises(am.InvalidArgumentError, match="bits"):
            am.Multiplier.exact(bits=bits)
    with pytest.raises(am.DTypeError):
        am.Multiplier.exact(bits=8.0)
    with pytest.raises(am.OperandRangeError, match="^a: 128 "):
        M8S.product(128, 1)
    with pytest.raises(am.OperandRangeError, match="^b: -129 "):
        M8S.product(1, -129)
    with pytest.raises(am.UnsupportedError, match="at most 12 bits"):
        am.Multiplier.exact(bits=13).table()
    with pytest.raises(am.InvalidArgumentError):
        am.set_num_threads(-2)


def test_closed_multiplier():
    m = am.Multiplier.exact(8)
    with m:
        assert m.bits == 8
    m.close()  # idempotent
    with pytest.raises(am.InvalidArgumentError, match="closed"):
        am.matmul(*operands(False), m)
    assert "closed" in repr(m)


def test_size_overflow_at_c_level():
    from approxmul_cffi._library import ffi, lib

    m = am.Multiplier.exact(8, signed=True)
    a = np.ones(4, np.int8)
    c = np.zeros(4, np.int64)
    pa, pc = ffi.from_buffer("int8_t[]", a), ffi.from_buffer("int64_t[]", c)
    status = lib.approxmul_matmul(m.handle, 2**62, 2**62, 1, lib.APPROXMUL_INT8, pa, 1, 1,
                                  lib.APPROXMUL_INT8, pa, 1, 1, 0, 0, lib.APPROXMUL_INT64, pc,
                                  1, 1)
    assert status == lib.APPROXMUL_ERR_OVERFLOW
    assert b"overflow" in ffi.string(lib.approxmul_last_error())
    # strides whose extent leaves the address space
    status = lib.approxmul_matmul(m.handle, 3, 2, 2, lib.APPROXMUL_INT8, pa, 2**62, 1,
                                  lib.APPROXMUL_INT8, pa, 1, 1, 0, 0, lib.APPROXMUL_INT64, pc,
                                  2, 1)
    assert status == lib.APPROXMUL_ERR_OVERFLOW
    assert (c == 0).all()


def test_more_size_overflows_at_c_level():
    from approxmul_cffi._library import ffi, lib

    m = am.Multiplier.exact(8, signed=True)
    a = np.ones(4, np.int8)
    c = np.zeros(4, np.int64)
    pa, pc = ffi.from_buffer("int8_t[]", a), ffi.from_buffer("int64_t[]", c)

    def matmul(rows, cols, inner, a_strides=(1, 1), c_strides=(1, 1)):
        return lib.approxmul_matmul(m.handle, rows, cols, inner, lib.APPROXMUL_INT8, pa,
                                    *a_strides, lib.APPROXMUL_INT8, pa, 0, 0, 0, 0,
                                    lib.APPROXMUL_INT64, pc, *c_strides)
    # rows * cols fits, rows * cols * inner does not
    assert matmul(2**31, 2**31, 2**2) == lib.APPROXMUL_ERR_OVERFLOW
    assert b"rows*cols*inner" in ffi.string(lib.approxmul_last_error())
    # offsets fit int64 but the addresses would wrap below 0 (found by fuzzing)
    assert matmul(2, 1, 1, a_strides=(-2**62, 1)) == lib.APPROXMUL_ERR_OVERFLOW
    assert b"address space" in ffi.string(lib.approxmul_last_error())
    # an output whose extent overflows
    assert matmul(3, 1, 1, c_strides=(2**62, 1)) == lib.APPROXMUL_ERR_OVERFLOW
    status = lib.approxmul_multiply(m.handle, 2**32, 2**32, lib.APPROXMUL_INT8, pa, 0, 0,
                                    lib.APPROXMUL_INT8, pa, 0, 0, lib.APPROXMUL_INT64, pc, 1, 1)
    assert status == lib.APPROXMUL_ERR_OVERFLOW
    assert (c == 0).all()
    # an accumulator bound beyond int64 is an error, not a wrap
    with pytest.raises(am.AccumulatorOverflowError):
        am.accumulator_dtype(m, 2**62)
