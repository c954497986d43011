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
# the real types quantization reads and dequantization writes
REAL_TYPES = {"float32": lib.APPROXMUL_FLOAT32, "float64": lib.APPROXMUL_FLOAT64}
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


_DTYPE_NAMES = {}


def dtype_name(dtype):
    """``dtype.name``, remembered: NumPy builds that string anew on each access (microseconds)."""
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        name = _DTYPE_NAMES[dtype] = dtype.name
        return name
    except TypeError:  # an unhashable dtype-like object
        return dtype.name


def numpy_module():
    """NumPy if it has been imported, else None (never imports it)."""
    return sys.modules.get("numpy")


def is_ndarray(obj):
    """True for NumPy arrays and NumPy scalars."""
    np = numpy_module()
    return np is not None and isinstance(obj, (np.ndarray, np.generic))


class Tensor:
    """An N-D view in C terms: pointer, shape and strides in elements.

    Use it as a context manager around the C call: leaving the block
    releases the ``ffi.from_buffer`` export at once. Left to the garbage
    collector, an export held inside a reference cycle (an exception's
    traceback is one) can crash CPython when the cycle is collected, and
    on PyPy it would keep the object locked until a late collection.
    """

    __slots__ = ("name", "dtype", "pointer", "shape", "strides", "keepalive", "buffer")

    def __init__(self, name, dtype, pointer, shape, strides, keepalive, buffer=None):
        self.name = name
        self.dtype = dtype
        self.pointer = pointer
        self.shape = tuple(shape)
        self.strides = tuple(strides)
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

    # 2-D views (matrices) in BLIS terms
    rows = property(lambda self: self.shape[0])
    cols = property(lambda self: self.shape[1])
    row_stride = property(lambda self: self.strides[0])
    col_stride = property(lambda self: self.strides[1])

    def args(self):
        """The (dtype, pointer, row stride, col stride) arguments of a matrix in a C call."""
        return (self.code, self.pointer, self.row_stride, self.col_stride)


def _ndarray_tensor(array, name, ndim, writable):
    np = numpy_module()
    dtype = dtype_name(array.dtype)
    if dtype not in DTYPES or not array.dtype.isnative:
        raise DTypeError(f"{name}: dtype {array.dtype} is not supported "
                         f"(expected one of {', '.join(DTYPES)})")
    if array.ndim != ndim:
        raise ShapeError(f"{name}: expected a {ndim}-D array, got {array.ndim}-D "
                         f"with shape {array.shape}")
    if writable and not array.flags.writeable:
        raise InvalidArgumentError(f"{name}: the array is read-only")
    itemsize = array.itemsize
    if array.flags.c_contiguous and array.size:
        # the common case, kept short: every call of a network's layers comes here
        strides = [s // itemsize for s in array.strides]
        base = ffi.from_buffer(dtype + "_t[]", array, require_writable=writable)
        return Tensor(name, dtype, base, array.shape, strides, array, base)
    if any(s % itemsize for s in array.strides):
        # strides that split elements (e.g. a field of a record array)
        if writable:
            raise InvalidArgumentError(f"{name}: strides are not a multiple of the item size")
        array = np.ascontiguousarray(array)
    strides = [s // itemsize for s in array.strides]
    if array.size == 0:
        return Tensor(name, dtype, ffi.NULL, array.shape, strides, array)
    # The element with the lowest address and the span up to the highest one.
    low = sum((n - 1) * s for n, s in zip(array.shape, strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(array.shape, strides) if s > 0)
    first = array[tuple(slice(n - 1, n) if s < 0 else slice(0, 1)
                        for n, s in zip(array.shape, strides))]
    span = np.lib.stride_tricks.as_strided(first, shape=(high - low + 1,), strides=(itemsize,),
                                           writeable=writable)
    base = ffi.from_buffer(dtype + "_t[]", span, require_writable=writable)
    return Tensor(name, dtype, base - low, array.shape, strides, (array, span), base)


def _buffer_tensor(obj, name, ndim, writable):
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
    if ndim == 2 and view.ndim == 1:  # a flat buffer is one row
        if not view.c_contiguous:
            raise ShapeError(f"{name}: a non-contiguous 1-D buffer cannot be used")
        view = view.cast("B").cast(FORMATS[dtype], shape=[1, view.shape[0]])
    if view.ndim != ndim:
        raise ShapeError(f"{name}: expected a {ndim}-D buffer, got {view.ndim}-D; give the "
                         f"shape with memoryview(buffer).cast(format, shape=[...])")
    if writable and view.readonly:
        raise InvalidArgumentError(f"{name}: the buffer is read-only")
    if not view.c_contiguous:
        if writable:
            raise InvalidArgumentError(f"{name}: output buffers must be C-contiguous")
        # copied through tolist(): PyPy 7.3's tobytes() of a strided view raises MemoryError
        values = view.tolist()
        for _ in range(ndim - 1):
            values = [x for row in values for x in row]
        flat = array.array(FORMATS[dtype], values)
        view = memoryview(flat).cast("B").cast(FORMATS[dtype], shape=list(view.shape))
    strides = [s // view.itemsize for s in view.strides]
    if 0 in view.shape:
        return Tensor(name, dtype, ffi.NULL, view.shape, strides, view)
    pointer = ffi.from_buffer(dtype + "_t[]", view, require_writable=writable)
    return Tensor(name, dtype, pointer, view.shape, strides, view, pointer)


def as_tensor(obj, name, ndim, writable=False):
    """An ndim-D Tensor of an ndarray (any strides, no copy) or of a buffer."""
    if is_ndarray(obj):
        return _ndarray_tensor(numpy_module().asanyarray(obj), name, ndim, writable)
    return _buffer_tensor(obj, name, ndim, writable)


def as_matrix(obj, name, writable=False):
    """A 2-D Tensor; a flat (1-D) buffer counts as one row."""
    return as_tensor(obj, name, 2, writable)


def new_tensor(shape, dtype, like_numpy):
    """A fresh output of this shape: an ndarray, or a memoryview without NumPy."""
    if like_numpy:
        return numpy_module().empty(shape, dtype=dtype)
    count = 1
    for n in shape:
        count *= n
    data = memoryview(bytearray(count * ITEMSIZE[dtype]))
    if count == 0:
        return data.cast(FORMATS[dtype])
    return data.cast(FORMATS[dtype], shape=list(shape))


def as_int(value, name):
    """``value`` as a Python int (anything with ``__index__`` but bool), else DTypeError."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise DTypeError(f"{name}: expected an integer, got {type(value).__name__}")
    return value.__index__()


def as_pair(value, name):
    """An int or a pair of ints as a pair of Python ints, else InvalidArgumentError.

    Only the form is checked here; the values are the C library's to judge.
    """
    if hasattr(value, "__index__") and not isinstance(value, bool):
        value = value.__index__()
        return (value, value)
    try:
        pair = tuple(as_int(v, name) for v in value)
    except (TypeError, DTypeError):
        pair = ()
    if len(pair) != 2:
        raise InvalidArgumentError(f"{name}: expected an int or a pair of ints, got {value!r}")
    return pair
