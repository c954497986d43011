"""The NumPy-free path: array.array, bytearray and memoryview in, memoryview out."""

import array
import textwrap

import numpy as np

import approxmul_cffi as am


def test_buffers_give_the_same_result_as_numpy():
    a_values = [1, 2, 3, 250, 4, 5]
    b_values = [7, 8, 9, 10, 11, 12]
    a = memoryview(array.array("B", a_values)).cast("B", shape=[2, 3])
    b = memoryview(bytearray(b_values)).cast("B", shape=[3, 2])
    m = am.Multiplier.exact(8)
    result = am.matmul(a, b, m)
    assert isinstance(result, memoryview)
    expected = np.array(a_values).reshape(2, 3) @ np.array(b_values).reshape(3, 2)
    assert result.tolist() == expected.tolist()


def test_one_dimensional_buffers_are_rows_and_multiply_works():
    m = am.Multiplier.exact(8, signed=True)
    a = array.array("b", [-1, 2, -3])
    result = am.multiply(a, array.array("b", [4, 5, 6]), m)
    assert result.tolist() == [[-4, 10, -18]]


def test_non_contiguous_memoryview_input_is_copied():
    m = am.Multiplier.exact(8)
    base = memoryview(bytearray(range(12))).cast("B", shape=[3, 4])
    a = base[::2]  # rows 0 and 2
    b = memoryview(bytearray([1, 0, 0, 1, 1, 1, 0, 0])).cast("B", shape=[4, 2])
    assert am.matmul(a, b, m).tolist() == [[0 + 2, 1 + 2], [8 + 10, 9 + 10]]


def test_without_numpy(python_runner):
    """A process where NumPy cannot be imported uses only buffers."""
    code = textwrap.dedent("""
        import sys
        sys.modules["numpy"] = None  # import numpy now raises ImportError
        import array
        import approxmul_cffi as am
        m = am.Multiplier.from_table([[x * y + 1 for y in range(16)] for x in range(16)])
        a = memoryview(array.array("B", [1, 2, 3, 15])).cast("B", shape=[2, 2])
        out = memoryview(bytearray(16)).cast("B").cast("i", shape=[2, 2])
        r = am.matmul(a, a, m, out=out)
        assert r is out and out.tolist() == [[1*1+1 + 2*3+1, 1*2+1 + 2*15+1],
                                            [3*1+1 + 15*3+1, 3*2+1 + 15*15+1]], out.tolist()
        t = m.table()
        assert isinstance(t, memoryview) and t.shape == (16, 16) and t[3, 4] == 13
        assert am.multiply(bytearray([2, 3]), bytearray([5, 7]), m).tolist() == [[11, 22]]
        try:
            am.matmul(array.array("d", [1.0]), a, m)
        except am.DTypeError as e:
            assert "format 'd'" in str(e)
        else:
            raise AssertionError("float buffer accepted")
        assert "numpy" not in [k for k, v in sys.modules.items() if v is not None]
        print("ok")
    """)
    result = python_runner(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
