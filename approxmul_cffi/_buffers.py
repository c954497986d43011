"""Turn Python arrays into (pointer, dtype, shape, strides) for the C ABI.

NumPy arrays of any strides (negative, zero, transposed) go to C without a
copy: the pointer comes from ``ffi.from_buffer`` over the smallest contiguous
span that holds every element, plus the offset of element [0, 0]. Without
NumPy, any buffer-protocol object works (array.array, bytearray,
memoryview); a multi-dimensional memoryview carries its own shape, e.g.
``memoryview(array.array('b', data)).cast('b', shape=[rows, cols])``.

NumPy is never imported here: an ndarray argument means NumPy is loaded.
"""

import array
import sys

from ._library import ffi, lib
from .errors import DTypeError, InvalidArgumentError, ShapeError

# approxmul_dtype codes by C type name
DTYPES = {
    "int8": lib.APPROXMUL_INT8,
    "uint8": lib.APPROXMUL_UINT8,
    "int16": lib.APPROXMUL_INT16,
    "uint16": lib.APPROXMUL_UINT16,
    "int32": lib.APPROXMUL_INT32,
    "int64": lib.APPROXMUL_INT64,
}
DTYPE_NAMES = {code: name for name, code in DTYPES.items()}
ITEMSIZE = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8}
# struct-module format letter of each dtype, for memoryview.cast
FORMATS = {"int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "int64": "q"}


def _buffer_dtype(view):
    """The dtype name of a memoryview's struct format ('b', '<h', 'q', ...), or None."""
    fmt = view.format
    native = {"little": "<", "big": ">"}[sys.byteorder]
    if fmt[:1] in "@=" + native:
        fmt = fmt[1:]
    if len(fmt) != 1 or fmt not in "bhilqnBHILQN":
        return None
    name = ("int" if fmt.islower() else "uint") + str(8 * view.itemsize)
    return name if name in DTYPES else None


def numpy_module():
    """NumPy if it has been imported, else None (never imports it)."""
    return sys.modules.get("numpy")


def is_ndarray(obj):
    """True for NumPy arrays and NumPy scalars."""
    np = numpy_module()
    return np is not None and isinstance(obj, (np.ndarray, np.generic))


class Matrix:
    """A 2-D view in C terms; ``keepalive`` holds what the pointer points into.

    Use it as a context manager around the C call: leaving the block
    releases the ``ffi.from_buffer`` export at once. Left to the garbage
    collector, an export held inside a reference cycle (an exception's
    traceback is one) can crash CPython when the cycle is collected, and
    on PyPy it would keep the object locked until a late collection.
    """

    __slots__ = ("name", "dtype", "pointer", "rows", "cols", "row_stride", "col_stride",
                 "keepalive", "buffer")

    def __init__(self, name, dtype, pointer, rows, cols, row_stride, col_stride, keepalive,
                 buffer=None):
        self.name = name
        self.dtype = dtype
        self.pointer = pointer
        self.rows = rows
        self.cols = cols
        self.row_stride = row_stride
        self.col_stride = col_stride
        self.keepalive = keepalive
        self.buffer = buffer  # the ffi.from_buffer object, or None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def release(self):
        """End the buffer export; the pointer must not be used afterwards."""
        if self.buffer is not None:
            ffi.release(self.buffer)
            self.buffer = self.pointer = None

    @property
    def code(self):
        return DTYPES[self.dtype]

    def args(self):
        """The (dtype, pointer, row stride, col stride) arguments of a C call."""
        return (self.code, self.pointer, self.row_stride, self.col_stride)


def _ndarray_matrix(array, name, writable):
    np = numpy_module()
    if array.dtype.name not in DTYPES or not array.dtype.isnative:
        raise DTypeError(f"{name}: dtype {array.dtype} is not supported "
                         f"(expected one of {', '.join(DTYPES)})")
    if array.ndim != 2:
        raise ShapeError(f"{name}: expected a 2-D array, got {array.ndim}-D "
                         f"with shape {array.shape}")
    if writable and not array.flags.writeable:
        raise InvalidArgumentError(f"{name}: the array is read-only")
    itemsize = array.itemsize
    if any(s % itemsize for s in array.strides):
        # strides that split elements (e.g. a field of a record array)
        array = np.ascontiguousarray(array)
        if writable:
            raise InvalidArgumentError(f"{name}: strides are not a multiple of the item size")
    rows, cols = array.shape
    row_stride, col_stride = (s // itemsize for s in array.strides)
    if array.size == 0:
        return Matrix(name, array.dtype.name, ffi.NULL, rows, cols, row_stride, col_stride, array)
    # The element with the lowest address and the span up to the highest one.
    low = sum((n - 1) * s for n, s in zip(array.shape, (row_stride, col_stride)) if s < 0)
    high = sum((n - 1) * s for n, s in zip(array.shape, (row_stride, col_stride)) if s > 0)
    first = array[tuple(slice(n - 1, n) if s < 0 else slice(0, 1)
                        for n, s in zip(array.shape, array.strides))]
    span = np.lib.stride_tricks.as_strided(first, shape=(high - low + 1,), strides=(itemsize,),
                                           writeable=writable)
    base = ffi.from_buffer(array.dtype.name + "_t[]", span, require_writable=writable)
    return Matrix(name, array.dtype.name, base - low, rows, cols, row_stride, col_stride,
                  (array, span), base)


def _buffer_matrix(obj, name, writable):
    try:
        view = memoryview(obj)
    except TypeError:
        raise DTypeError(f"{name}: expected a NumPy array or a buffer-protocol object "
                         f"(array.array, bytearray, memoryview), got {type(obj).__name__}") \
            from None
    dtype = _buffer_dtype(view)
    if dtype is None:
        raise DTypeError(f"{name}: buffer format {view.format!r} is not supported "
                         f"(expected one of {', '.join(DTYPES)})")
    if view.ndim == 1:
        view = view.cast("B").cast(FORMATS[dtype], shape=[1, view.shape[0]]) \
            if view.c_contiguous else None
        if view is None:
            raise ShapeError(f"{name}: a non-contiguous 1-D buffer cannot be used")
    if view.ndim != 2:
        raise ShapeError(f"{name}: expected a 2-D buffer, got {view.ndim}-D; give the shape "
                         f"with memoryview(buffer).cast(format, shape=[rows, cols])")
    if writable and view.readonly:
        raise InvalidArgumentError(f"{name}: the buffer is read-only")
    if not view.c_contiguous:
        if writable:
            raise InvalidArgumentError(f"{name}: output buffers must be C-contiguous")
        # copied through tolist(): PyPy 7.3's tobytes() of a strided view raises MemoryError
        flat = array.array(FORMATS[dtype], [x for row in view.tolist() for x in row])
        view = memoryview(flat).cast("B").cast(FORMATS[dtype], shape=list(view.shape))
    rows, cols = view.shape
    if rows * cols == 0:
        return Matrix(name, dtype, ffi.NULL, rows, cols, cols, 1, view)
    pointer = ffi.from_buffer(dtype + "_t[]", view, require_writable=writable)
    return Matrix(name, dtype, pointer, rows, cols, cols, 1, view, pointer)


def as_matrix(obj, name, writable=False):
    """A 2-D Matrix view of an ndarray or buffer; no copy for ndarrays."""
    if is_ndarray(obj):
        return _ndarray_matrix(numpy_module().asanyarray(obj), name, writable)
    return _buffer_matrix(obj, name, writable)


def new_output(rows, cols, dtype, like_numpy):
    """A fresh rows x cols output: an ndarray, or a memoryview when NumPy is not in play."""
    if like_numpy:
        return numpy_module().empty((rows, cols), dtype=dtype)
    data = bytearray(rows * cols * ITEMSIZE[dtype])
    if rows * cols == 0:
        return memoryview(data).cast(FORMATS[dtype])
    return memoryview(data).cast(FORMATS[dtype], shape=[rows, cols])
