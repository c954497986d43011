"""Operations whose every multiplication goes through a :class:`Multiplier`.

Every op takes ``(operands..., multiplier)``, the operands' zero points as
keywords (only the code-by-code product goes through the multiplier, the
zero-point cross terms are exact), and an optional ``out=`` keyword. Every
argument is checked by the C library, which also computes every output
shape and type; this module only translates Python objects to C terms.
"""

from ._buffers import (DTYPE_NAMES, Tensor, as_int, as_matrix, as_pair, as_tensor, is_ndarray,
                       new_tensor, numpy_module)
from ._library import check, ffi, lib
from .errors import DTypeError, ShapeError
from .multipliers import Multiplier

__all__ = ["accumulator_dtype", "bmm", "conv2d", "conv2d_output_shape", "linear", "matmul",
           "multiply"]


def _handle(multiplier):
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
    check(lib.approxmul_accumulator_dtype(_handle(multiplier), inner, a_zero_point,
                                          b_zero_point, out))
    return DTYPE_NAMES[out[0]]


def _output(out, shape, dtype, like_numpy):
    """(result object, its writable Tensor): a fresh array, or ``out`` checked against shape."""
    result = new_tensor(shape, dtype, like_numpy) if out is None else out
    view = as_tensor(result, "out", len(shape), writable=True)
    if view.shape != tuple(shape):
        view.release()
        raise ShapeError(f"out: shape {view.shape}, expected {tuple(shape)}")
    return result, view


def _transposed(view):
    """The same 2-D Tensor read as its transpose (strides swapped, no copy)."""
    return Tensor(view.name, view.dtype, view.pointer, view.shape[::-1], view.strides[::-1],
                  view.keepalive, view.buffer)


def _gemm(multiplier, av, bv, out, like_numpy, a_zero_point, b_zero_point):
    """out = av @ bv through the multiplier (the one matmul call of matmul and linear)."""
    handle = _handle(multiplier)
    with av, bv:  # buffers exported only for the call
        if av.cols != bv.rows:
            raise ShapeError(f"{av.name} is {av.rows} x {av.cols} and {bv.name} is "
                             f"{bv.rows} x {bv.cols}: inner sizes {av.cols} and {bv.rows} differ")
        dtype = accumulator_dtype(multiplier, av.cols, a_zero_point, b_zero_point)
        result, cv = _output(out, (av.rows, bv.cols), dtype, like_numpy)
        with cv:
            check(lib.approxmul_matmul(handle, av.rows, bv.cols, av.cols, *av.args(),
                                       *bv.args(), a_zero_point, b_zero_point, *cv.args()))
    return result


def matmul(a, b, multiplier, *, a_zero_point=0, b_zero_point=0, out=None):
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
    return _gemm(multiplier, as_matrix(a, "a"), as_matrix(b, "b"), out,
                 is_ndarray(a) or is_ndarray(b), a_zero_point, b_zero_point)


def _add_bias(result, bias, out):
    """``result + bias`` along the rows, int64 (into ``out`` when given)."""
    rows, cols = result.shape
    target, view = _output(out, (rows, cols), "int64", is_ndarray(result))
    with view:
        if view.dtype != "int64":
            raise DTypeError(f"out: dtype {view.dtype}; with a bias the result is int64")
    if is_ndarray(target):
        bias = numpy_module().asarray(bias)
        if bias.dtype.kind not in "iu":
            raise DTypeError(f"bias: dtype {bias.dtype}; expected integers in the "
                             "accumulator's scale")
        if bias.shape != (cols,):
            raise ShapeError(f"bias: shape {bias.shape}, expected ({cols},)")
        numpy_module().add(result, bias, out=target)
        return target
    values = [as_int(v, "bias") for v in bias]
    if len(values) != cols:
        raise ShapeError(f"bias: {len(values)} values, expected {cols}")
    for i in range(rows):
        for j in range(cols):
            target[i, j] = result[i, j] + values[j]
    return target


def _rows(array, name, lead):
    """A (..., n) ndarray as (rows, n) without a copy (for outputs), else ShapeError."""
    if array.ndim != len(lead) + 1:
        raise ShapeError(f"{name}: shape {array.shape}, expected {len(lead) + 1} dimensions")
    rows = array.reshape(-1, array.shape[-1])
    if not numpy_module().shares_memory(rows, array):
        raise ShapeError(f"{name}: must be reshapeable to 2-D without a copy")
    return rows


def linear(x, w, multiplier, bias=None, *, x_zero_point=0, w_zero_point=0, out=None):
    """A linear layer on codes: ``x @ w.T + bias``, every product ``mul(x, w)``.

    ``x`` is ... x in_features (any leading dimensions with NumPy; 2-D
    buffers otherwise), ``w`` is out_features x in_features as in PyTorch.
    Zero points as in :func:`matmul`. ``bias``: out_features integers in the
    accumulator's scale; with it the result is int64, else the dtype of
    :func:`matmul`. Rescaling is the caller's (see
    :func:`approxmul_cffi.quant.requantize`).

    >>> import numpy as np, approxmul_cffi as am
    >>> m = am.Multiplier.exact(bits=8, signed=True)
    >>> x = np.array([[1, 2, 3]], np.int8); w = np.array([[1, 0, -1], [2, 2, 2]], np.int8)
    >>> am.linear(x, w, m).tolist(), am.linear(x, w, m, bias=[10, -12]).tolist()
    ([[-2, 12]], [[8, 0]])
    """
    lead, out2d = None, out
    if is_ndarray(x):
        x = numpy_module().asanyarray(x)
        if x.ndim == 0:
            raise ShapeError("x: expected at least 1 dimension (in_features)")
        if x.ndim != 2:  # leading dimensions fold into rows, and come back at the end
            lead = x.shape[:-1]
            x = x.reshape(-1, x.shape[-1])
            if out is not None:
                out2d = _rows(numpy_module().asanyarray(out), "out", lead)
    result = _gemm(multiplier, as_matrix(x, "x"), _transposed(as_matrix(w, "w")),
                   out2d if bias is None else None, is_ndarray(x) or is_ndarray(w),
                   x_zero_point, w_zero_point)
    if bias is not None:
        result = _add_bias(result, bias, out2d)
    if out is not None:
        return out
    return result if lead is None else result.reshape(lead + result.shape[-1:])


def multiply(a, b, multiplier, *, a_zero_point=0, b_zero_point=0, out=None):
    """Elementwise approximate product ``out = mul(a, b)``.

    NumPy inputs broadcast against each other and may have any number of
    dimensions; buffers must have equal shapes (1-D or 2-D). With zero
    points each element is the one-term :func:`matmul`:
    ``mul(a, b) - b_zero_point * a - a_zero_point * b + a_zero_point * b_zero_point``.
    The result is int32 when it cannot overflow it, else int64.

    >>> import numpy as np, approxmul_cffi as am
    >>> m = am.Multiplier.exact(bits=8)
    >>> am.multiply(np.array([200, 3], np.uint8), np.array([2, 3], np.uint8), m).tolist()
    [400, 9]
    >>> am.multiply(np.array([200, 3], np.uint8), np.array([2, 3], np.uint8), m,
    ...             a_zero_point=3, b_zero_point=2).tolist()
    [0, 0]
    """
    handle = _handle(multiplier)
    dtype = accumulator_dtype(multiplier, 1, a_zero_point, b_zero_point)
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
        result, av, bv = out, as_matrix(a, "a"), as_matrix(b, "b")
        cv = as_matrix(out2d, "out", writable=True)
    else:
        av, bv = as_matrix(a, "a"), as_matrix(b, "b")
        if (av.rows, av.cols) != (bv.rows, bv.cols):
            raise ShapeError(f"a is {av.rows} x {av.cols} and b is {bv.rows} x {bv.cols}")
        result, cv = _output(out, (av.rows, av.cols), dtype, False)
    with av, bv, cv:
        if not (a_zero_point or b_zero_point):
            check(lib.approxmul_multiply(handle, av.rows, av.cols, *av.args(), *bv.args(),
                                         *cv.args()))
        elif av.cols:
            # each row as a batch of 1 x 1 x 1 matmuls: the C library applies the zero points
            for i in range(av.rows):
                check(lib.approxmul_bmm(
                    handle, av.cols, 1, 1, 1,
                    av.code, av.pointer + i * av.row_stride, av.col_stride, 0, 0,
                    bv.code, bv.pointer + i * bv.row_stride, bv.col_stride, 0, 0,
                    a_zero_point, b_zero_point,
                    cv.code, cv.pointer + i * cv.row_stride, cv.col_stride, 0, 0))
    return result


def bmm(a, b, multiplier, *, a_zero_point=0, b_zero_point=0, out=None):
    """Batched approximate matmul: ``out[t] = matmul(a[t], b[t])`` for each batch entry t.

    ``a`` is batch x rows x inner, ``b`` batch x inner x cols (as in
    attention); any strides, including a zero batch stride (a broadcast
    input), go to C without a copy. Zero points and the output type follow
    :func:`matmul`: only the code-by-code product goes through the
    multiplier.

    >>> import numpy as np, approxmul_cffi as am
    >>> m = am.Multiplier.exact(bits=8)
    >>> a = np.ones((2, 1, 3), np.uint8); b = np.full((2, 3, 2), 4, np.uint8)
    >>> am.bmm(a, b, m).tolist()
    [[[12, 12]], [[12, 12]]]
    """
    handle = _handle(multiplier)
    at, bt = as_tensor(a, "a", 3), as_tensor(b, "b", 3)
    (batch, rows, inner), (batch_b, inner_b, cols) = at.shape, bt.shape
    if batch != batch_b or inner != inner_b:
        raise ShapeError(f"a is {at.shape} and b is {bt.shape}: batch sizes and inner sizes "
                         f"must match")
    dtype = accumulator_dtype(multiplier, inner, a_zero_point, b_zero_point)
    result, ct = _output(out, (batch, rows, cols), dtype, is_ndarray(a) or is_ndarray(b))
    with at, bt, ct:  # buffers exported only for the call
        check(lib.approxmul_bmm(handle, batch, rows, cols, inner,
                                at.code, at.pointer, *at.strides,
                                bt.code, bt.pointer, *bt.strides,
                                a_zero_point, b_zero_point,
                                ct.code, ct.pointer, *ct.strides))
    return result


def _conv2d_output(multiplier, x_shape, w_shape, stride, padding, dilation, groups,
                   x_zero_point=0, w_zero_point=0):
    """(output shape, dtype name or None) from the C library, which checks everything."""
    shape, dtype = ffi.new("int64_t[4]"), ffi.new("approxmul_dtype *")
    handle = ffi.NULL if multiplier is None else _handle(multiplier)
    for name, value in (("x", x_shape), ("w", w_shape)):
        if len(value) != 4:
            raise ShapeError(f"{name}: expected a 4-D shape, got {tuple(value)}")
    check(lib.approxmul_conv2d_output_shape(
        handle, list(x_shape), list(w_shape), list(as_pair(stride, "stride")),
        list(as_pair(padding, "padding")), list(as_pair(dilation, "dilation")),
        as_int(groups, "groups"), x_zero_point, w_zero_point, shape, dtype))
    return tuple(shape), (None if multiplier is None else DTYPE_NAMES[dtype[0]])


def conv2d_output_shape(x_shape, w_shape, *, stride=1, padding=0, dilation=1, groups=1,
                        multiplier=None, x_zero_point=0, w_zero_point=0):
    """The (N, O, OH, OW) shape :func:`conv2d` gives, after the same checks.

    The zero points are checked against ``multiplier`` when one is given;
    without one, shapes can be inferred before a multiplier is chosen.

    >>> conv2d_output_shape((2, 4, 9, 8), (6, 2, 3, 3), stride=2, padding=1, groups=2)
    (2, 6, 5, 4)
    """
    return _conv2d_output(multiplier, x_shape, w_shape, stride, padding, dilation, groups,
                          x_zero_point, w_zero_point)[0]


def conv2d(x, w, multiplier, *, stride=1, padding=0, dilation=1, groups=1, x_zero_point=0,
           w_zero_point=0, out=None):
    """Approximate 2-D convolution, PyTorch's layout and semantics (cross-correlation).

    ``x`` is N x C x H x W activation codes, ``w`` O x C/groups x KH x KW
    weight codes; ``stride``, ``padding``, ``dilation`` are ints or
    (height, width) pairs; ``groups`` includes depthwise (groups = C).
    Every product is ``mul(activation, weight)``, activation first.
    Padded taps hold ``x_zero_point`` and pass through the multiplier like
    any code; the zero-point cross terms are exact (docs/semantics.md).
    Returns N x O x OH x OW (:func:`conv2d_output_shape`), int32 when no sum
    can overflow it, else int64.

    >>> import numpy as np, approxmul_cffi as am
    >>> m = am.Multiplier.exact(bits=8)
    >>> x = np.ones((1, 1, 3, 3), np.uint8); w = np.full((1, 1, 2, 2), 2, np.uint8)
    >>> am.conv2d(x, w, m)[0, 0].tolist()
    [[8, 8], [8, 8]]
    """
    handle = _handle(multiplier)
    xt, wt = as_tensor(x, "x", 4), as_tensor(w, "w", 4)
    with xt, wt:
        stride, padding = as_pair(stride, "stride"), as_pair(padding, "padding")
        dilation, groups = as_pair(dilation, "dilation"), as_int(groups, "groups")
        shape, dtype = _conv2d_output(multiplier, xt.shape, wt.shape, stride, padding,
                                      dilation, groups, x_zero_point, w_zero_point)
        result, ot = _output(out, shape, dtype, is_ndarray(x) or is_ndarray(w))
        with ot:
            check(lib.approxmul_conv2d(
                handle, xt.code, xt.pointer, list(xt.shape), list(xt.strides),
                wt.code, wt.pointer, list(wt.shape), list(wt.strides),
                list(stride), list(padding), list(dilation), groups, x_zero_point,
                w_zero_point, ot.code, ot.pointer, list(ot.shape), list(ot.strides)))
    return result

