"""Values that cannot become their C argument are reported by the parameter's name.

cffi's own TypeError/OverflowError named neither the function nor the
parameter ("an integer is required"); every C call made by approxmul_cffi
now says which argument and why.
"""

import pytest

import approxmul_cffi as am
from portable_support import matrix


@pytest.fixture
def operands():
    m = am.Multiplier.exact(bits=8)
    return matrix("B", 2, 2, [1, 2, 3, 4]), m


@pytest.mark.parametrize("value, error, words", [
    (1.5, am.DTypeError, "a_zero_point: 1.5 is not an integer (float)"),
    ("3", am.DTypeError, "a_zero_point: '3' is not an integer (str)"),
    (None, am.DTypeError, "a_zero_point: None is not an integer"),
    (2**70, am.InvalidArgumentError, "a_zero_point: 1180591620717411303424 is outside the "
                                     "int64_t range"),
    (-2**63 - 1, am.InvalidArgumentError, "outside the int64_t range -2^63..2^63-1"),
])
def test_matmul_zero_point(operands, value, error, words):
    a, m = operands
    with pytest.raises(error) as caught:
        am.matmul(a, a, m, a_zero_point=value)
    assert words in str(caught.value)
    assert isinstance(caught.value, TypeError if error is am.DTypeError else ValueError)


def test_b_zero_point_and_valid_values_still_work(operands):
    a, m = operands
    with pytest.raises(am.DTypeError, match="b_zero_point: 0.5 is not an integer"):
        am.matmul(a, a, m, b_zero_point=0.5)
    # sum_k a[i,k] b[k,j] - 1 * sum_k a[i,k] = [[7-3, 10-3], [15-7, 22-7]]
    assert am.matmul(a, a, m, b_zero_point=1).tolist() == [[4, 7], [8, 15]]
    assert am.matmul(a, a, m, b_zero_point=True).tolist() == [[4, 7], [8, 15]]


def test_thread_count_types():
    with pytest.raises(am.DTypeError, match="num_threads: 1.5 is not an integer"):
        am.set_num_threads(1.5)
    with pytest.raises(am.InvalidArgumentError, match="num_threads: 4294967296 is outside"):
        am.set_num_threads(2**32)


def test_the_library_object_lists_every_name():
    from approxmul_cffi._library import lib, raw_lib

    assert set(dir(lib)) == set(dir(raw_lib))
    assert "APPROXMUL_ERR_CANCELLED" in dir(lib) and "approxmul_cancel" in dir(lib)
