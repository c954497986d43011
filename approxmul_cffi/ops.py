"""Operations whose every multiplication goes through a :class:`Multiplier`."""

from ._buffers import DTYPE_NAMES, as_matrix, is_ndarray, new_output, numpy_module
from ._library import check, ffi, lib
from .errors import DTypeError, ShapeError
from .multiplier import Multiplier


def _multiplier(multiplier):
    if not isinstance(multiplier, Multiplier):
        raise DTypeError(f"multiplier: expected a Multiplier, got {type(multiplier).__name__}")
    return multiplier.handle


def accumulator_dtype(multiplier, inner, a_zero_point=0, b_zero_point=0):
    """The output dtype ("int32" or "int64") of a matmul with this inner size.

    int32 is chosen only when no output can overflow it, given the
    multiplier's largest product and the zero points.

    >>> import approxmul_cffi as am
    >>> m = am.Multiplier.exact(bits=8)
    >>> am.accumulator_dtype(m, 1000), am.accumulator_dtype(m, 100000)
    ('int32', 'int64')
    """
    out = ffi.new("approxmul_dtype *")
    check(lib.approxmul_accumulator_dtype(_multiplier(multiplier), inner, a_zero_point,
                                          b_zero_point, out))
    return DTYPE_NAMES[out[0]]


def _output(out, rows, cols, dtype, like_numpy):
    if out is None:
        return new_output(rows, cols, dtype, like_numpy), None
    view = as_matrix(out, "out", writable=True)
    if (view.rows, view.cols) != (rows, cols):
        raise ShapeError(f"out: shape ({view.rows}, {view.cols}), expected ({rows}, {cols})")
    return out, view


def matmul(a, b, multiplier, out=None, *, a_zero_point=0, b_zero_point=0):
    """Approximate matrix product: ``out[i, j] = sum_k mul(a[i, k], b[k, j])``.

    ``a`` (rows x inner) and ``b`` (inner x cols) hold operand codes: int8
    (or int16) for a signed multiplier, uint8 (or uint16) for an unsigned
    one. Any strides work without a copy. With zero points, only the
    code-by-code product goes through the multiplier and the cross terms are
    exact: ``sum_k mul(a, b) - b_zero_point * sum_k a - a_zero_point * sum_k b
    + inner * a_zero_point * b_zero_point``.

    The result is int32 when no sum can overflow it, else int64 (see
    :func:`accumulator_dtype`); an ``out`` array must have a sufficient
    dtype and must not overlap the inputs. It is an ndarray if an input is
    one, else a 2-D memoryview.

    >>> import numpy as np, approxmul_cffi as am
    >>> m = am.Multiplier.exact(bits=8, signed=True)
    >>> a = np.array([[1, -2], [3, 4]], dtype=np.int8)
    >>> am.matmul(a, a, m).tolist()
    [[-5, -10], [15, 10]]
    """
    handle = _multiplier(multiplier)
    av, bv = as_matrix(a, "a"), as_matrix(b, "b")
    if av.cols != bv.rows:
        raise ShapeError(f"a is {av.rows} x {av.cols} and b is {bv.rows} x {bv.cols}: "
                         f"inner sizes {av.cols} and {bv.rows} differ")
    dtype = accumulator_dtype(multiplier, av.cols, a_zero_point, b_zero_point)
    result, cv = _output(out, av.rows, bv.cols, dtype, is_ndarray(a) or is_ndarray(b))
    if cv is None:
        cv = as_matrix(result, "out", writable=True)
    with av, bv, cv:  # buffers exported only for the call
        check(lib.approxmul_matmul(handle, av.rows, bv.cols, av.cols, *av.args(), *bv.args(),
                                   a_zero_point, b_zero_point, *cv.args()))
    return result


def multiply(a, b, multiplier, out=None):
    """Elementwise approximate product ``out = mul(a, b)``.

    NumPy inputs broadcast against each other and may have any number of
    dimensions; buffers must have equal shapes (1-D or 2-D). The result is
    int32 when the multiplier's products fit it, else int64.

    >>> import numpy as np, approxmul_cffi as am
    >>> m = am.Multiplier.exact(bits=8)
    >>> am.multiply(np.array([200, 3], np.uint8), np.array([2, 3], np.uint8), m).tolist()
    [400, 9]
    """
    handle = _multiplier(multiplier)
    dtype = accumulator_dtype(multiplier, 1)
    if is_ndarray(a) or is_ndarray(b):
        np = numpy_module()
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        shape = a.shape
        if len(shape) != 2:
            cols = shape[-1] if shape else 1
            a, b = (x.reshape(-1, cols) for x in (a, b))
        if out is None:
            out = np.empty(shape, dtype=dtype)
        elif not isinstance(out, np.ndarray) or out.shape != shape:
            raise ShapeError(f"out: expected an ndarray of shape {shape}")
        out2d = out.reshape(a.shape)
        if not np.shares_memory(out2d, out):  # reshape had to copy: write through a view
            raise ShapeError("out: must be reshapeable to 2-D without a copy")
        av, bv, cv = as_matrix(a, "a"), as_matrix(b, "b"), as_matrix(out2d, "out", writable=True)
    else:
        av, bv = as_matrix(a, "a"), as_matrix(b, "b")
        if (av.rows, av.cols) != (bv.rows, bv.cols):
            raise ShapeError(f"a is {av.rows} x {av.cols} and b is {bv.rows} x {bv.cols}")
        out, cv = _output(out, av.rows, av.cols, dtype, False)
        if cv is None:
            cv = as_matrix(out, "out", writable=True)
    with av, bv, cv:
        check(lib.approxmul_multiply(handle, av.rows, av.cols, *av.args(), *bv.args(),
                                     *cv.args()))
    return out
