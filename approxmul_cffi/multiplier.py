"""The Multiplier: an n x n bit approximate (or exact) integer multiplier."""

import array

from ._buffers import numpy_module
from ._library import c_string, check, ffi, lib
from .errors import DTypeError, InvalidArgumentError, ShapeError


class Multiplier:
    """An n-bit by n-bit integer multiplier, unsigned or two's-complement signed.

    Build one with a class method (:meth:`exact`, :meth:`from_table`); pass it
    to :func:`approxmul_cffi.matmul` and friends. A multiplier is immutable
    and may be shared between threads. Its C handle is freed by
    :meth:`close`, by leaving a ``with`` block, or by garbage collection.

    >>> import approxmul_cffi as am
    >>> m = am.Multiplier.exact(bits=8, signed=True)
    >>> m.bits, m.signed, m.product(-3, 7)
    (8, True, -21)
    """

    __slots__ = ("_handle", "__weakref__")

    def __init__(self, handle):
        # handles come from the class methods; this takes ownership of one
        self._handle = ffi.gc(handle, lib.approxmul_multiplier_destroy)

    @classmethod
    def _create(cls, create, *args):
        out = ffi.new("approxmul_multiplier **")
        check(create(*args, out))
        return cls(out[0])

    @classmethod
    def exact(cls, bits=8, signed=False):
        """The exact multiplier for ``bits``-bit operands, 1 <= bits <= 16.

        >>> Multiplier.exact(bits=4).product(15, 15)
        225
        """
        return cls._create(lib.approxmul_multiplier_exact, _int(bits, "bits"), bool(signed))

    @classmethod
    def from_table(cls, table, signed=False):
        """A multiplier from its full product table.

        ``table`` is 2^n x 2^n integers (n = 1..8) that fit int32, a NumPy
        array, a sequence of rows, or a flat buffer of 4^n int32 values.
        ``table[x][y]`` is the product of the operands whose raw n-bit
        patterns are x and y: for signed operands, the pattern of -1 is
        2^n - 1 (two's complement), so ``table[255][1]`` is the product of -1
        and 1 for 8 bits. Other row orders are converted by the file loaders.

        >>> t = [[x * y for y in range(4)] for x in range(4)]
        >>> Multiplier.from_table(t).product(3, 2)
        6
        """
        flat, side = _flatten_table(table)
        bits = side.bit_length() - 1
        if side < 2 or side > 256 or side != 1 << bits:
            raise ShapeError(f"table: {side} x {side} is not a 2^n x 2^n table with n in 1..8")
        with ffi.from_buffer("int32_t[]", flat) as pointer:  # released after the call
            return cls._create(lib.approxmul_multiplier_from_table, pointer, len(flat), bits,
                               bool(signed))

    # ------------------------------------------------------------ queries

    @property
    def handle(self):
        """The C ``approxmul_multiplier *`` (cffi cdata); raises once closed."""
        if self._handle is None:
            raise InvalidArgumentError("the multiplier has been closed")
        return self._handle

    def _query(self, function, ctype):
        out = ffi.new(ctype)
        check(function(self.handle, out))
        return out[0]

    @property
    def bits(self):
        """Operand width in bits."""
        return self._query(lib.approxmul_multiplier_bits, "int *")

    @property
    def signed(self):
        """True for two's-complement operands."""
        return bool(self._query(lib.approxmul_multiplier_is_signed, "int *"))

    @property
    def name(self):
        """The model's name ("exact", "table", ...)."""
        return c_string(self._query(lib.approxmul_multiplier_name, "const char **"))

    @property
    def plan(self):
        """How the kernels compute this multiplier ("exact-gemm", "table", "function")."""
        return c_string(self._query(lib.approxmul_multiplier_plan, "const char **"))

    @property
    def operand_range(self):
        """(smallest, largest) operand value."""
        bits = self.bits
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if self.signed else (0, (1 << bits) - 1)

    @property
    def product_range(self):
        """(smallest, largest) product over all operand pairs."""
        low, high = ffi.new("int64_t *"), ffi.new("int64_t *")
        check(lib.approxmul_multiplier_product_range(self.handle, low, high))
        return low[0], high[0]

    def product(self, a, b):
        """The product of two operand values.

        >>> Multiplier.exact(bits=8, signed=True).product(-128, -128)
        16384
        """
        out = ffi.new("int64_t *")
        check(lib.approxmul_multiplier_product(self.handle, _int(a, "a"), _int(b, "b"), out))
        return out[0]

    def table(self):
        """The 2^n x 2^n int32 product table indexed by raw bit patterns (n <= 8).

        A NumPy array when NumPy is installed, else a 2-D memoryview.

        >>> Multiplier.exact(bits=2).table().tolist()
        [[0, 0, 0, 0], [0, 1, 2, 3], [0, 2, 4, 6], [0, 3, 6, 9]]
        """
        side = 1 << self.bits
        try:
            import numpy as np
        except ImportError:
            np = None
        if np is not None:
            out = np.empty((side, side), dtype=np.int32)
            with ffi.from_buffer("int32_t[]", out) as pointer:
                check(lib.approxmul_multiplier_table(self.handle, pointer, out.size))
            return out
        out = array.array("i", bytes(4 * side * side))
        with ffi.from_buffer("int32_t[]", out) as pointer:
            check(lib.approxmul_multiplier_table(self.handle, pointer, len(out)))
        return memoryview(out).cast("B").cast("i", shape=[side, side])

    # ------------------------------------------------------------ lifetime

    def close(self):
        """Free the C handle now (idempotent); later use raises an error."""
        if self._handle is not None:
            ffi.release(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self._handle is None:
            return "<Multiplier (closed)>"
        kind = "signed" if self.signed else "unsigned"
        return f"<Multiplier {self.name} {self.bits}-bit {kind}, plan={self.plan}>"


def _int(value, name):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise DTypeError(f"{name}: expected an integer, got {type(value).__name__}")
    return value.__index__()


def _flatten_table(table):
    """(array.array('i') of the entries in row-major order, side length)."""
    np = numpy_module()
    if np is not None and isinstance(table, np.ndarray):
        if table.dtype.kind not in "iu":
            raise DTypeError(f"table: dtype {table.dtype} is not an integer type")
        if table.ndim != 2 or table.shape[0] != table.shape[1]:
            raise ShapeError(f"table: expected a square 2-D array, got shape {table.shape}")
        if table.size and (table.min() < -2**31 or table.max() > 2**31 - 1):
            raise InvalidArgumentError("table: entries must fit int32")
        flat = array.array("i")
        flat.frombytes(np.ascontiguousarray(table, dtype=np.int32).tobytes())
        return flat, table.shape[0]
    try:
        view = memoryview(table)
    except TypeError:
        view = None
    if view is not None:
        if view.format.lstrip("@=") not in ("i", "l") or view.itemsize != 4:
            raise DTypeError(f"table: buffer format {view.format!r}; expected int32 entries")
        flat = array.array("i")
        flat.frombytes(view.tobytes())
        side = int(round(len(flat) ** 0.5))
        if view.ndim == 2 and view.shape[0] != view.shape[1] or side * side != len(flat):
            raise ShapeError(f"table: {len(flat)} entries do not form a square table")
        return flat, side
    rows = list(table)
    flat = array.array("i")
    for index, row in enumerate(rows):
        row = list(row)
        if len(row) != len(rows):
            raise ShapeError(f"table: row {index} has {len(row)} entries, expected {len(rows)}")
        for value in row:
            value = _int(value, "table entry")
            if not -2**31 <= value < 2**31:
                raise InvalidArgumentError(f"table: entry {value} does not fit int32")
            flat.append(value)
    return flat, len(rows)
