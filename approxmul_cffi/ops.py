"""Operations whose every multiplication goes through a :class:`Multiplier`."""

from ._buffers import (DTYPE_NAMES, as_matrix, as_tensor, is_ndarray, new_tensor,
                       numpy_module)
from ._library import check, ffi, lib
from .errors import DTypeError, InvalidArgumentError, ShapeError
from .multipliers import Multiplier


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
        return new_tensor((rows, cols), dtype, like_numpy), None
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


def _out_tensor(out, shape, dtype, like_numpy):
    if out is None:
        result = new_tensor(shape, dtype, like_numpy)
    else:
        result = out
    view = as_tensor(result, "out", len(shape), writable=True)
    if view.shape != tuple(shape):
        raise ShapeError(f"out: shape {view.shape}, expected {tuple(shape)}")
    return result, view


def bmm(a, b, multiplier, out=None, *, a_zero_point=0, b_zero_point=0):
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
    handle = _multiplier(multiplier)
    at, bt = as_tensor(a, "a", 3), as_tensor(b, "b", 3)
    (batch, rows, inner), (batch_b, inner_b, cols) = at.shape, bt.shape
    if batch != batch_b or inner != inner_b:
        raise ShapeError(f"a is {at.shape} and b is {bt.shape}: batch sizes and inner sizes "
                         f"must match")
    dtype = accumulator_dtype(multiplier, inner, a_zero_point, b_zero_point)
    result, ct = _out_tensor(out, (batch, rows, cols), dtype, is_ndarray(a) or is_ndarray(b))
    with at, bt, ct:  # buffers exported only for the call
        check(lib.approxmul_bmm(handle, batch, rows, cols, inner,
                                at.code, at.pointer, *at.strides,
                                bt.code, bt.pointer, *bt.strides,
                                a_zero_point, b_zero_point,
                                ct.code, ct.pointer, *ct.strides))
    return result


def _pair(value, name):
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    try:
        pair = tuple(int(v) for v in value)
    except TypeError:
        raise InvalidArgumentError(f"{name}: expected an int or a pair of ints") from None
    if len(pair) != 2:
        raise InvalidArgumentError(f"{name}: expected an int or a pair of ints, got {value!r}")
    return pair


def conv2d_output_shape(x_shape, w_shape, *, stride=1, padding=0, dilation=1, groups=1,
                        multiplier=None, x_zero_point=0, w_zero_point=0):
    """The (N, O, OH, OW) shape :func:`conv2d` returns for these arguments.

    Computed and validated by the C library with the same checks (and
    messages) as :func:`conv2d` itself; zero points are checked only when a
    ``multiplier`` is given, so shape inference can run before one is chosen.

    >>> import approxmul_cffi as am
    >>> am.conv2d_output_shape((8, 3, 32, 32), (16, 3, 3, 3), stride=2, padding=1)
    (8, 16, 16, 16)
    """
    handle = ffi.NULL if multiplier is None else _multiplier(multiplier)
    if isinstance(groups, bool) or not isinstance(groups, int):
        raise InvalidArgumentError(f"groups: {groups!r}; must be an int >= 1")
    shapes = [tuple(int(v) for v in shape) for shape in (x_shape, w_shape)]
    for name, shape in zip(("x", "w"), shapes):
        if len(shape) != 4:
            raise ShapeError(f"{name}: expected 4 dimensions, got shape {shape}")
    out = ffi.new("int64_t[4]")
    check(lib.approxmul_conv2d_output_shape(
        handle, ffi.new("int64_t[4]", shapes[0]), ffi.new("int64_t[4]", shapes[1]),
        *(ffi.new("int64_t[2]", _pair(v, n)) for v, n in ((stride, "stride"),
                                                         (padding, "padding"),
                                                         (dilation, "dilation"))),
        groups, x_zero_point, w_zero_point, out))
    return tuple(out)


def conv2d(x, w, multiplier, *, stride=1, padding=0, dilation=1, groups=1, x_zero_point=0,
           w_zero_point=0, out=None):
    """Approximate 2-D convolution, PyTorch's layout and semantics (cross-correlation).

    ``x`` is N x C x H x W activation codes, ``w`` O x C/groups x KH x KW
    weight codes; ``stride``, ``padding``, ``dilation`` are ints or
    (height, width) pairs; ``groups`` includes depthwise (groups = C).
    Every product is ``mul(activation, weight)``, activation first.
    Padded taps hold ``x_zero_point`` and pass through the multiplier like
    any code; the zero-point cross terms are exact (docs/semantics.md).
    Returns N x O x OH x OW, int32 when no sum can overflow it, else int64.

    >>> import numpy as np, approxmul_cffi as am
    >>> m = am.Multiplier.exact(bits=8)
    >>> x = np.ones((1, 1, 3, 3), np.uint8); w = np.full((1, 1, 2, 2), 2, np.uint8)
    >>> am.conv2d(x, w, m)[0, 0].tolist()
    [[8, 8], [8, 8]]
    """
    handle = _multiplier(multiplier)
    xt, wt = as_tensor(x, "x", 4), as_tensor(w, "w", 4)
    stride, padding, dilation = (_pair(stride, "stride"), _pair(padding, "padding"),
                                 _pair(dilation, "dilation"))
    shape = conv2d_output_shape(xt.shape, wt.shape, stride=stride, padding=padding,
                                dilation=dilation, groups=groups, multiplier=multiplier,
                                x_zero_point=x_zero_point, w_zero_point=w_zero_point)
    dtype = accumulator_dtype(multiplier, wt.shape[1] * wt.shape[2] * wt.shape[3],
                              x_zero_point, w_zero_point)
    result, ot = _out_tensor(out, shape, dtype, is_ndarray(x) or is_ndarray(w))
    arrays = [ffi.new("int64_t[4]", list(v)) for v in (xt.shape, xt.strides, wt.shape,
                                                        wt.strides, ot.shape, ot.strides)]
    pairs = [ffi.new("int64_t[2]", list(v)) for v in (stride, padding, dilation)]
    with xt, wt, ot:
        check(lib.approxmul_conv2d(handle, xt.code, xt.pointer, arrays[0], arrays[1],
                                   wt.code, wt.pointer, arrays[2], arrays[3],
                                   pairs[0], pairs[1], pairs[2], groups, x_zero_point,
                                   w_zero_point, ot.code, ot.pointer, arrays[4], arrays[5]))
    return result


def linear(x, w, multiplier, *, x_zero_point=0, w_zero_point=0):
    """A linear layer's approximate product ``x @ w.T``, every product ``mul(x, w)``.

    ``x`` is ... x in_features (any leading dimensions, NumPy), ``w`` is
    out_features x in_features as in PyTorch. Zero points as in
    :func:`matmul`; add the bias and rescale outside.

    >>> import numpy as np, approxmul_cffi as am
    >>> m = am.Multiplier.exact(bits=8, signed=True)
    >>> x = np.array([[1, 2, 3]], np.int8); w = np.array([[1, 0, -1], [2, 2, 2]], np.int8)
    >>> am.linear(x, w, m).tolist()
    [[-2, 12]]
    """
    if is_ndarray(x):
        np = numpy_module()
        x = np.asanyarray(x)
        if x.ndim < 1:
            raise ShapeError("x: expected at least 1 dimension (in_features)")
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x
        w2 = np.asanyarray(w)
        if w2.ndim != 2:
            raise ShapeError(f"w: expected out_features x in_features, got shape {w2.shape}")
        result = matmul(x2, w2.T, multiplier, a_zero_point=x_zero_point,
                        b_zero_point=w_zero_point)
        return result.reshape(lead + (w2.shape[0],))
    wv = as_matrix(w, "w")
    # buffers: 2-D x only; w.T is expressed by swapping strides in C terms
    xv = as_matrix(x, "x")
    if xv.cols != wv.cols:
        raise ShapeError(f"x has {xv.cols} features and w has {wv.cols}")
    dtype = accumulator_dtype(multiplier, xv.cols, x_zero_point, w_zero_point)
    out = new_tensor((xv.rows, wv.rows), dtype, False)
    cv = as_matrix(out, "out", writable=True)
    with xv, wv, cv:
        check(lib.approxmul_matmul(_multiplier(multiplier), xv.rows, wv.rows, xv.cols,
                                   *xv.args(), wv.code, wv.pointer, wv.col_stride,
                                   wv.row_stride, x_zero_point, w_zero_point, *cv.args()))
    return out
