"""A quantized layer's integer call with its output stage, prepared once.

A network's layer runs the same weights, geometry and requantization on
every batch; converting them for each call cost a tiny layer more than the
C work (a 1x4x4x4 conv: 43 us of which the convolution is a few). The
classes here convert everything but the input once:

- :class:`Conv2dRequantizer`: ``approxmul_conv2d_requantize[_dequantize]``,
  the convolution with the stage inside (:func:`conv2d_requantize` is one
  such call);
- :class:`LinearRequantizer`: ``approxmul_matmul`` of ``x @ w.T``, then
  ``approxmul_requantize[_dequantize]`` along the last axis.

Buffers are exported only for the duration of each C call, as everywhere
in the package: the objects hold arrays (the small per-channel parameters
and the shapes as C arrays of their own), never exports.
"""

import numpy as np

from ._buffers import DTYPES, REAL_TYPES, as_int, as_matrix, as_pair, as_tensor, dtype_name
from ._library import check, ffi, lib
from .affine import _memory_order
from .errors import DTypeError, InvalidArgumentError, ShapeError
from .ops import _conv2d_output, _handle, accumulator_dtype
from .requant import _channel_parameters, _rounding_code, code_dtype

__all__ = ["Conv2dRequantizer", "LinearRequantizer", "conv2d_requantize"]


def _c_array(ctype, values):
    """A C array of its own holding ``values`` (a contiguous array of that element type)."""
    out = ffi.new(ctype, len(values))
    if len(values):
        ffi.memmove(out, values, values.nbytes)
    return out


def _dense_type(w, view):
    """The cffi type to export dense NumPy weights with on each call (as layers keep
    them; quicker than a Tensor), or None for any other layout."""
    dense = isinstance(w, np.ndarray) and w.flags.c_contiguous and w.size
    return f"{view.dtype}_t[]" if dense else None


def _export_weights(w, ctype, ndim):
    """(context manager, pointer) of the weights for one call: through ``ctype``
    (:func:`_dense_type`) when set, else through a Tensor."""
    if ctype is not None:
        buffer = ffi.from_buffer(ctype, w)
        return buffer, buffer
    tensor = as_tensor(w, "w", ndim)
    return tensor, tensor.pointer


class _Stage:
    """The requantization's arguments in their C form (shared by both calls).

    The C arrays (``_c_arrays()``: the per-channel parameters, and a
    convolution's shapes and geometry) are made on the first call, after
    the C library has checked the arguments, and are left out of pickles
    and copies, which make them again.
    """

    def _prepare_stage(self, multiplier, channels, bias, mantissa, shift, zero_point, qmin,
                       qmax, rounding, bits, real):
        self._multiplier = multiplier
        _handle(multiplier)  # a bad multiplier fails here, not at the first call
        rounding_code = _rounding_code(rounding)
        # own copies, from which the C arrays are made: changing the caller's
        # arrays afterwards changes nothing (the weights, read on each call, aside)
        self._parameter_values = tuple(
            np.array(v) for v in _channel_parameters(channels, bias, mantissa, shift))
        self._c = None
        code_type = code_dtype(bool(multiplier.signed), bits)
        self._out_dtype = code_type if real is None else np.dtype(real[1])
        self._stage = (int(zero_point), int(qmin), int(qmax), rounding_code,
                       DTYPES[dtype_name(code_type)])
        self._real = None if real is None else (float(real[0]),
                                                REAL_TYPES[dtype_name(self._out_dtype)])

    def _c_arrays(self):
        if self._c is None:
            self._c = self._make_c_arrays()
        return self._c

    def _make_c_arrays(self):
        # C arrays this object owns: no buffer export on each call
        return tuple(_c_array("int32_t[]", v) for v in self._parameter_values)

    def __getstate__(self):
        state = dict(self.__dict__, _c=None)
        if "_layouts" in state:
            state["_layouts"] = {}
        return state


class Conv2dRequantizer(_Stage):
    """:func:`conv2d_requantize` with everything but ``x`` fixed: ``stage(x)``.

    >>> import approxmul_cffi as am
    >>> from approxmul_cffi.quant import quantize_multiplier
    >>> m, s = quantize_multiplier(0.25)
    >>> w = np.full((1, 1, 1, 1), 2, np.uint8)
    >>> stage = Conv2dRequantizer(w, am.Multiplier.exact(8), 1, m, s, 0, 0, 255)
    >>> stage(np.full((1, 1, 1, 2), 5, np.uint8)).tolist()
    [[[[3, 3]]]]
    """

    def __init__(self, w, multiplier, bias, mantissa, shift, zero_point, qmin, qmax, *,
                 stride=1, padding=0, dilation=1, groups=1, x_zero_point=0, w_zero_point=0,
                 rounding="double", bits=8, real=None):
        with as_tensor(w, "w", 4) as wt:
            self._w, self._w_shape = w, wt.shape
        self._geometry = (as_pair(stride, "stride"), as_pair(padding, "padding"),
                          as_pair(dilation, "dilation"), as_int(groups, "groups"))
        self._zero_points = (x_zero_point, w_zero_point)
        self._prepare_stage(multiplier, self._w_shape[0], bias, mantissa, shift, zero_point,
                            qmin, qmax, rounding, bits, real)
        # x's (shape, strides) -> (output shape, and x's shape, strides and the
        # output shape as C arrays), as the C library checked and computed them
        self._layouts = {}

    def __call__(self, x):
        with as_tensor(x, "x", 4) as xt:
            return self.run(xt)

    def _make_c_arrays(self):
        # shapes, strides and geometry as C arrays once: lists converted on
        # every call cost a small layer as much as its products (w's layout
        # read here: a copy or pickle may have given it other strides)
        with as_tensor(self._w, "w", 4) as wt:
            w_layout = (wt.code, ffi.new("int64_t[4]", list(wt.shape)),
                        ffi.new("int64_t[4]", list(wt.strides)), _dense_type(self._w, wt))
        return (super()._make_c_arrays(), w_layout,
                (*(ffi.new("int64_t[2]", pair) for pair in self._geometry[:3]),
                 self._geometry[3]))

    def _layout(self, shape, strides):
        key = (shape, strides)
        layout = self._layouts.get(key)
        if layout is None:  # the C library checks x against everything else
            out_shape = _conv2d_output(self._multiplier, shape, self._w_shape, *self._geometry,
                                       *self._zero_points)[0]
            layout = (out_shape, *(ffi.new("int64_t[4]", list(v)) for v in (*key, out_shape)))
            if len(self._layouts) < 16:
                self._layouts[key] = layout
        return layout

    def run(self, xt):
        """The output for an x Tensor (``_buffers.as_tensor``)."""
        shape, x_shape, x_strides, out_shape = self._layout(xt.shape, xt.strides)
        parameters, (w_code, w_shape, w_strides, w_type), geometry = self._c_arrays()
        out = np.empty(shape, dtype=self._out_dtype)
        w_buffer, w_p = _export_weights(self._w, w_type, 4)
        with w_buffer, ffi.from_buffer(out, require_writable=True) as out_p:
            args = (_handle(self._multiplier), xt.code, xt.pointer, x_shape, x_strides,
                    w_code, w_p, w_shape, w_strides, *geometry,
                    *self._zero_points, *parameters, *self._stage)
            if self._real is None:
                check(lib.approxmul_conv2d_requantize(*args, out_p, out_shape))
            else:
                check(lib.approxmul_conv2d_requantize_dequantize(*args, *self._real, out_p,
                                                                 out_shape))
        return out

    def run_real(self, x, x_scale, x_qmin, x_qmax, x_dtype):
        """The real output (``real`` given at construction) for a real input:
        ``x`` (a float32 or float64 ndarray, N C H W) quantized with one scale,
        the x zero point and the codes ``x_qmin..x_qmax`` of ``x_dtype`` (the
        multiplier's domain), then :meth:`run` of those codes, in one C call
        (``approxmul_conv2d_real``) whose scratch holds the codes. The same
        bits as quantizing first; NaN or infinity in ``x`` raises
        :class:`~approxmul_cffi.errors.InvalidArgumentError`.

        >>> import approxmul_cffi as am
        >>> from approxmul_cffi.quant import quantize_multiplier
        >>> m, s = quantize_multiplier(0.25)
        >>> w = np.full((1, 1, 1, 1), 2, np.uint8)
        >>> stage = Conv2dRequantizer(w, am.Multiplier.exact(8), 1, m, s, 0, 0, 255,
        ...                           real=(0.5, np.float32))
        >>> stage.run_real(np.full((1, 1, 1, 2), 1.2, np.float32), 0.25, 0, 255, np.uint8).tolist()
        [[[[1.5, 1.5]]]]
        """
        name = dtype_name(x.dtype)
        if name not in REAL_TYPES or not x.dtype.isnative or x.ndim != 4:
            raise DTypeError(f"x: a 4-D float32 or float64 array, got {x.ndim}-D {x.dtype}")
        # dense in some axis order: the C library reads x whole from its first
        # element (through `flat`, x's memory in order), and the codes keep that layout
        flat = x
        if not x.flags.c_contiguous:
            order = _memory_order(x)
            if order is None:
                x = flat = np.ascontiguousarray(x)
            else:
                flat = x.transpose(order)
        shape, call = self.bind_real(x.dtype, x.shape, tuple(s // x.itemsize for s in x.strides),
                                     x_scale, x_qmin, x_qmax, x_dtype)
        out = np.empty(shape, dtype=self._out_dtype)
        if out.size:
            with ffi.from_buffer(flat) as x_p, ffi.from_buffer(out, require_writable=True) as out_p:
                call(x_p, out_p)
        return out

    def bind_real(self, x_type, shape, strides, x_scale, x_qmin, x_qmax, x_dtype):
        """:meth:`run_real` for the inputs of one layout, prepared once:
        ``(out_shape, call)``. ``call(x_pointer, out_pointer)`` makes the one
        C call on x's memory (``x_type`` float32 or float64; ``shape`` N C H
        W and ``strides`` in elements, dense in some axis order, the pointer
        at its first element in memory) into a C-ordered output of
        ``out_shape`` and the stage's real type. The pointers are cffi
        pointers alive for the call (``ffi.from_buffer``, or ``ffi.cast("void
        *", address)`` of memory another library holds); an output with no
        elements is not touched. A framework layer called on batch after
        batch binds once per layout: what each call costs in Python is then
        the weights' export and the call (run_real re-derives everything,
        about a tenth of a 1 ms layer where the previous layer's data has
        left the caches cold).
        """
        if self._real is None:
            raise InvalidArgumentError("run_real: the stage was made without real=(scale, dtype)")
        name = dtype_name(np.dtype(x_type))
        if name not in REAL_TYPES:
            raise DTypeError(f"x: float32 or float64, got {np.dtype(x_type)}")
        out_shape, x_shape, x_strides, out_shape_c = self._layout(
            tuple(int(v) for v in shape), tuple(int(v) for v in strides))
        parameters, (w_code, w_shape, w_strides, w_type), geometry = self._c_arrays()
        head = (_handle(self._multiplier), REAL_TYPES[name])
        middle = (x_shape, x_strides, float(x_scale), int(x_qmin), int(x_qmax),
                  DTYPES[dtype_name(np.dtype(x_dtype))], w_code)
        tail = (w_shape, w_strides, *geometry, *self._zero_points, *parameters, *self._stage,
                *self._real)
        # the interruption route's estimate (_interrupt._WORK), made once
        outputs = int(np.prod(out_shape))
        function = lib.with_work("approxmul_conv2d_real",
                                 outputs * int(np.prod(self._w_shape[1:])))
        w = self._w

        def call(x_p, out_p):
            if outputs:
                w_buffer, w_p = _export_weights(w, w_type, 4)
                with w_buffer:
                    check(function(*head, x_p, *middle, w_p, *tail, out_p, out_shape_c))

        return out_shape, call


def conv2d_requantize(x, w, multiplier, bias, mantissa, shift, zero_point, qmin, qmax, *,
                      stride=1, padding=0, dilation=1, groups=1, x_zero_point=0,
                      w_zero_point=0, rounding="double", bits=8, real=None):
    """:func:`~approxmul_cffi.conv2d` then :func:`~approxmul_cffi.quant.requantize` of its
    accumulators (channels along axis 1), in one pass of the C library
    (``approxmul_conv2d_requantize``) that never holds the accumulator
    tensor: a quantized layer's output codes, or with ``real=(scale,
    dtype)`` their real values (``approxmul_conv2d_requantize_dequantize``).
    The codes' type follows the multiplier's signedness and ``bits``. The
    same bits as the two calls. :class:`Conv2dRequantizer` prepares it once
    for a layer run on many batches.

    >>> import approxmul_cffi as am
    >>> from approxmul_cffi.quant import quantize_multiplier
    >>> m, s = quantize_multiplier(0.25)
    >>> x = np.full((1, 1, 2, 2), 3, np.uint8); w = np.full((1, 1, 1, 1), 2, np.uint8)
    >>> conv2d_requantize(x, w, am.Multiplier.exact(8), 1, m, s, 0, 0, 255)[0, 0].tolist()
    [[2, 2], [2, 2]]
    """
    with as_tensor(x, "x", 4) as xt:  # checked first, as approxmul_cffi.conv2d checks it
        return Conv2dRequantizer(
            w, multiplier, bias, mantissa, shift, zero_point, qmin, qmax, stride=stride,
            padding=padding, dilation=dilation, groups=groups, x_zero_point=x_zero_point,
            w_zero_point=w_zero_point, rounding=rounding, bits=bits, real=real).run(xt)


class LinearRequantizer(_Stage):
    """``approxmul_cffi.linear(x, w)`` (``x @ w.T``, ``w`` out_features x
    in_features) then :func:`~approxmul_cffi.quant.requantize` along the last
    axis, everything but ``x`` fixed: ``stage(x)`` for ``x`` of shape
    ``(..., in_features)``. The accumulators exist only between the two C calls.

    >>> import approxmul_cffi as am
    >>> from approxmul_cffi.quant import quantize_multiplier
    >>> m, s = quantize_multiplier(0.25)
    >>> w = np.array([[1, 1], [2, 0]], np.uint8)
    >>> stage = LinearRequantizer(w, am.Multiplier.exact(8), 0, m, s, 0, 0, 255)
    >>> stage(np.array([[4, 8]], np.uint8)).tolist()
    [[3, 2]]
    """

    def __init__(self, w, multiplier, bias, mantissa, shift, zero_point, qmin, qmax, *,
                 x_zero_point=0, w_zero_point=0, rounding="double", bits=8, real=None):
        with as_matrix(w, "w") as wv:
            self._w, (self._out_features, self._in_features) = w, wv.shape
        self._zero_points = (x_zero_point, w_zero_point)
        self._acc_dtype = np.dtype(accumulator_dtype(multiplier, self._in_features,
                                                     x_zero_point, w_zero_point))
        self._prepare_stage(multiplier, self._out_features, bias, mantissa, shift, zero_point,
                            qmin, qmax, rounding, bits, real)

    def _make_c_arrays(self):
        # w read as B = w.T: its code and strides (a copy or pickle may have changed them)
        with as_matrix(self._w, "w") as wv:
            w_layout = (wv.code, wv.strides[1], wv.strides[0], _dense_type(self._w, wv))
        return super()._make_c_arrays(), w_layout

    def __call__(self, x):
        x = np.asanyarray(x)
        if x.ndim < 1 or x.shape[-1] != self._in_features:
            raise ShapeError(f"x: shape {x.shape}; the layer takes (..., {self._in_features})")
        lead = x.shape[:-1]
        rows = x.reshape(-1, self._in_features)
        acc = np.empty((rows.shape[0], self._out_features), dtype=self._acc_dtype)
        out = np.empty(acc.shape, dtype=self._out_dtype)
        handle = _handle(self._multiplier)
        parameters, (w_code, w_row_stride, w_col_stride, w_type) = self._c_arrays()
        w_buffer, w_p = _export_weights(self._w, w_type, 2)
        with as_matrix(rows, "x") as xv, w_buffer, \
                ffi.from_buffer(acc, require_writable=True) as acc_p:
            check(lib.approxmul_matmul(handle, xv.rows, self._out_features, self._in_features,
                                       *xv.args(), w_code, w_p, w_row_stride, w_col_stride,
                                       *self._zero_points, DTYPES[dtype_name(acc.dtype)], acc_p,
                                       self._out_features, 1))
        with ffi.from_buffer(acc) as acc_p, ffi.from_buffer(out, require_writable=True) as out_p:
            common = (acc.shape[0], self._out_features, 1, DTYPES[dtype_name(acc.dtype)], acc_p,
                      *parameters, *self._stage)
            if self._real is None:
                check(lib.approxmul_requantize(*common, out_p))
            else:
                check(lib.approxmul_requantize_dequantize(*common, *self._real, out_p))
        return out.reshape(*lead, self._out_features)

    def bind_real(self, x_type, shape, strides, x_scale, x_qmin, x_qmax, x_dtype):
        """The real output (``real`` given at construction) for real inputs of
        one layout, prepared once: ``(out_shape, call)`` as
        :meth:`Conv2dRequantizer.bind_real` gives them. ``shape`` is
        ``(..., in_features)`` and x C-contiguous (``strides`` in elements,
        checked here); ``call`` quantizes x with one scale, the x zero point
        and the codes ``x_qmin..x_qmax`` of ``x_dtype`` (the multiplier's
        domain) as ``approxmul_quantize_finite`` does, then runs this stage on
        those codes: three C calls on arguments converted once. NaN or
        infinity in x raises :class:`~approxmul_cffi.errors.InvalidArgumentError`
        before anything is written to the output.

        >>> import approxmul_cffi as am
        >>> from approxmul_cffi._library import ffi
        >>> from approxmul_cffi.quant import quantize_multiplier
        >>> m, s = quantize_multiplier(0.25)
        >>> w = np.array([[1, 1], [2, 0]], np.uint8)
        >>> stage = LinearRequantizer(w, am.Multiplier.exact(8), 0, m, s, 0, 0, 255,
        ...                           real=(0.5, np.float32))
        >>> shape, call = stage.bind_real(np.float32, (1, 2), (2, 1), 0.25, 0, 255, np.uint8)
        >>> x, out = np.array([[1.0, 2.0]], np.float32), np.empty(shape, np.float32)
        >>> call(ffi.from_buffer(x), ffi.from_buffer(out))
        >>> out.tolist()
        [[1.5, 1.0]]
        """
        if self._real is None:
            raise InvalidArgumentError("bind_real: the stage was made without real=(scale, dtype)")
        name = dtype_name(np.dtype(x_type))
        if name not in REAL_TYPES:
            raise DTypeError(f"x: float32 or float64, got {np.dtype(x_type)}")
        shape = tuple(int(v) for v in shape)
        if not shape or shape[-1] != self._in_features:
            raise ShapeError(f"x: shape {shape}; the layer takes (..., {self._in_features})")
        dense = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
        if any(n > 1 and int(s) != d for n, s, d in zip(shape, strides, dense)):
            raise InvalidArgumentError(f"x: strides {tuple(strides)}; the call takes C order")
        rows, inner, cols = int(np.prod(shape[:-1])), self._in_features, self._out_features
        codes_type = np.dtype(x_dtype)
        acc_code = DTYPES[dtype_name(self._acc_dtype)]
        parameters, (w_code, w_row_stride, w_col_stride, w_type) = self._c_arrays()
        scale, zero = ffi.new("double[1]", [float(x_scale)]), ffi.new("int32_t[1]", [
            int(self._zero_points[0])])
        quantize = lib.with_work("approxmul_quantize_finite", rows * inner)
        qmin, qmax = int(x_qmin), int(x_qmax)
        matmul = lib.with_work("approxmul_matmul", rows * cols * inner)
        stage = lib.with_work("approxmul_requantize_dequantize", rows * cols)
        x_code, codes_code = REAL_TYPES[name], DTYPES[dtype_name(codes_type)]
        handle, w = _handle(self._multiplier), self._w
        tail = (*parameters, *self._stage, *self._real)

        def call(x_p, out_p):
            if rows * cols == 0:
                return
            codes = np.empty(rows * inner, codes_type)
            acc = np.empty(rows * cols, self._acc_dtype)
            w_buffer, w_p = _export_weights(w, w_type, 2)
            with ffi.from_buffer(codes, require_writable=True) as c_p, \
                    ffi.from_buffer(acc, require_writable=True) as a_p, w_buffer:
                check(quantize(1, 1, rows * inner, x_code, x_p, scale, zero, qmin, qmax,
                               codes_code, c_p))
                check(matmul(handle, rows, cols, inner, codes_code, c_p, inner, 1, w_code, w_p,
                             w_row_stride, w_col_stride, *self._zero_points, acc_code, a_p,
                             cols, 1))
                check(stage(rows, cols, 1, acc_code, a_p, *tail, out_p))

        return (*shape[:-1], cols), call
