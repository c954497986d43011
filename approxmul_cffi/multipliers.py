"""The Multiplier: an n x n bit approximate (or exact) integer multiplier."""

import array
import os

from ._buffers import numpy_module
from ._library import c_string, check, ffi, lib
from .errors import CallbackError, DTypeError, InvalidArgumentError, ShapeError, UnsupportedError


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

    # _spec: a spec set on the Python side (table files, C models);
    # _keepalive: objects C may call into while the handle lives (a dlopen'ed model)
    # _metadata: what the source said about the circuit (netlist header comments)
    __slots__ = ("_handle", "_spec", "_keepalive", "_metadata", "__weakref__")

    def __init__(self, handle, spec=None, keepalive=None):
        # handles come from the class methods; this takes ownership of one
        self._handle = ffi.gc(handle, lib.approxmul_multiplier_destroy)
        self._spec = spec
        self._keepalive = keepalive
        self._metadata = {}

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

    @classmethod
    def from_verilog(cls, source, module=None, a="A", b="B", out="O", signed=False,
                     cell_map=None):
        """A multiplier from a gate-level Verilog netlist (see :mod:`approxmul_cffi.verilog`).

        >>> Multiplier.from_verilog(Multiplier.from_spec("exact:bits=4").to_verilog()).product(9, 9)
        81
        """
        from .verilog import from_verilog

        return from_verilog(source, module=module, a=a, b=b, out=out, signed=signed,
                            cell_map=cell_map)

    def to_verilog(self):
        """This family multiplier as a gate-level Verilog netlist (exact, truncated, bam).

        >>> "module truncated_bits_4" in Multiplier.from_spec("truncated:bits=4").to_verilog()
        True
        """
        from .verilog import family_verilog

        if self.spec is None or self.spec.startswith(("file:", "c:", "verilog:")):
            raise UnsupportedError(f"{self!r} is no built-in family; netlists are written for "
                                   "the families exact, truncated and bam")
        return family_verilog(self.spec)

    @property
    def metadata(self):
        """What the source said about the circuit: {NAME: (value, unit)} from a netlist's header.

        >>> Multiplier.exact(bits=2).metadata
        {}
        """
        return dict(self._metadata)

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
        else:
            out = array.array("i", bytes(4 * side * side))
        with ffi.from_buffer("int32_t[]", out) as pointer:
            check(lib.approxmul_multiplier_table(self.handle, pointer, side * side))
        return out if np is not None else memoryview(out).cast("B").cast("i", shape=[side, side])

    # ------------------------------------------------ multiplier library

    @classmethod
    def from_spec(cls, spec):
        """A built-in family from a spec string ``family[:key=value,...]``.

        Families (``approxmul_cffi.families()`` lists them with their papers):
        exact, truncated, bam, drum, dsm, mitchell, ilm, roba. Omitted
        parameters take defaults (bits=8, signed=0). For table files and C
        models use :func:`approxmul_cffi.multiplier`, which accepts those too.

        >>> m = Multiplier.from_spec("drum:k=4")
        >>> m.product(200, 57), m.spec
        (12480, 'drum:bits=8,signed=0,k=4')
        """
        if not isinstance(spec, str):
            raise DTypeError(f"spec: expected a string, got {type(spec).__name__}")
        if "\0" in spec:  # C would silently stop reading there
            raise InvalidArgumentError(f"spec: {spec!r} contains a NUL character")
        return cls._create(lib.approxmul_multiplier_from_spec, spec.encode())

    @property
    def spec(self):
        """A spec string that rebuilds this multiplier, or None (in-memory tables, callables).

        Built-in families give their canonical form with every parameter;
        table files ``file:PATH?format=..&order=..&signed=..``; C models
        ``c:LIBRARY:SYMBOL:SIGNATURE?bits=..&signed=..``. Pass it to
        :func:`approxmul_cffi.multiplier`, e.g. on a Dask worker.

        >>> Multiplier.exact(bits=4).spec
        'exact:bits=4,signed=0'
        """
        if self._spec is not None:
            return self._spec
        text = c_string(self._query(lib.approxmul_multiplier_spec, "const char **"))
        return text or None

    @classmethod
    def from_c_function(cls, library_path, symbol, signature, *, bits=None, signed=None):
        """A vendor C model: ``symbol`` in the shared library ``library_path``.

        ``signature`` is the C prototype, whose parameter names ``a``/``b``
        give the operand order (``"uint64_t f(uint64_t b, uint64_t a)"`` for
        EvoApproxLib's second-operand-first models), or a short name (u8, s8,
        u64ba, u64, u16, s16; see :mod:`approxmul_cffi.vendor`). ``bits``
        defaults to the parameter type's width (8 for 64-bit parameters).
        ``signed`` defaults to the types' signedness; ``signed=True`` with
        unsigned types reads a signed circuit declared with unsigned types
        (operands as n-bit patterns, result as 2n-bit two's complement).

        Models of up to 8 bits are tabulated at once. Wider ones are called
        from the kernels: this object keeps the library loaded, so keep the
        Multiplier alive while C code uses its handle.

        >>> import subprocess, tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "m.c"), "w").write(
        ...     "#include <stdint.h>\\nuint16_t mul(uint8_t a, uint8_t b) { return a * b | 1; }\\n")
        >>> _ = subprocess.run(["cc", "-shared", "-fPIC", "-o", os.path.join(d, "m.so"),
        ...                     os.path.join(d, "m.c")], check=True)
        >>> m = Multiplier.from_c_function(os.path.join(d, "m.so"), "mul",
        ...                                "uint16_t f(uint8_t a, uint8_t b)")
        >>> m.product(2, 3)
        7
        """
        from . import vendor

        entry = vendor.parse_signature(signature)
        bits = entry[4] if bits is None else _int(bits, "bits")
        signed = entry[2].startswith("int") if signed is None else bool(signed)
        function, keepalive = vendor.open_function(library_path, symbol, entry)
        out = ffi.new("approxmul_multiplier **")
        check(lib.approxmul_multiplier_from_c_function(
            function, vendor.signature_enum(entry), bits, signed, str(symbol).encode(), out))
        spec = (f"c:{os.path.abspath(os.fspath(library_path))}:{symbol}:{entry[0]}"
                f"?bits={bits}&signed={int(signed)}")
        # tabulated models no longer need the library; wider ones call into it
        return cls(out[0], spec=spec, keepalive=keepalive if bits > 8 else None)

    @classmethod
    def from_callable(cls, function, bits=8, signed=False):
        """A multiplier tabulated from a Python function ``function(a, b) -> int``.

        Called once for every operand pair (values, not bit patterns), bits
        1..8. An exception inside ``function`` becomes a CallbackError that
        carries its message.

        >>> m = Multiplier.from_callable(lambda a, b: a * b & ~1, bits=4)
        >>> m.product(3, 3)
        8
        """
        bits = _int(bits, "bits")
        failure = []

        def call(_, a, b, out):
            try:
                out[0] = _int(function(a, b), "product")
                return 0
            except BaseException as error:  # never let it unwind through C
                failure.append((a, b, error))
                return 1

        callback = ffi.callback("int(void *, int64_t, int64_t, int64_t *)", call)
        out = ffi.new("approxmul_multiplier **")
        status = lib.approxmul_multiplier_from_callback(callback, ffi.NULL, bits, bool(signed), out)
        if failure:
            a, b, error = failure[0]
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise error
            raise CallbackError(f"{getattr(function, '__name__', 'the function')}({a}, {b}) "
                                f"raised {type(error).__name__}: {error}") from error
        check(status)
        return cls(out[0])

    def save(self, path, format=None, order="raw"):
        """Write the product table to ``path`` (format from the extension unless given).

        Formats: binary (.bin), c (.h/.c), text (.txt/.csv), npy, npz; orders:
        raw, twos, offset (signed only). See :mod:`approxmul_cffi.formats`;
        :func:`approxmul_cffi.load_multiplier` reads them back exactly.

        >>> import tempfile, os, approxmul_cffi as am
        >>> path = os.path.join(tempfile.mkdtemp(), "mitchell.bin")
        >>> Multiplier.from_spec("mitchell").save(path)
        >>> am.load_multiplier(path, signed=False).product(200, 57)
        11008
        """
        from .formats import write_table

        write_table(self, path, format=format, order=order)

    def metrics(self):
        """Error metrics over every operand pair as a dict (definitions: docs/metrics.md).

        Keys: mae, mae_percent, mse, wce, wce_percent, wcre_percent,
        mre_percent, ep_percent, bias, error_std, min_error, max_error,
        pairs, zero_product_pairs. e = approx - exact; percentages of 4^bits
        for mae/wce; relative metrics skip pairs whose exact product is 0.

        >>> m = Multiplier.from_spec("truncated:cut=8")
        >>> m.metrics()["mae"], m.metrics()["wce"]
        (448.25, 1793)
        """
        out = ffi.new("approxmul_metrics *")
        check(lib.approxmul_multiplier_metrics(self.handle, out))
        values = {name: getattr(out, name) for name in _METRICS}
        values["wce"] = int(values["wce"])
        return values

    def error_map(self):
        """The 2^n x 2^n errors approx - exact, rows and columns by raw bit pattern (n <= 12).

        int64; a NumPy array when NumPy is installed, else a 2-D memoryview.
        For signed operands row 2^n - 1 is operand -1, as in :meth:`table`.

        >>> Multiplier.from_spec("mitchell:bits=2").error_map().tolist()
        [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, -1]]
        """
        side = 1 << self.bits
        try:
            import numpy as np
        except ImportError:
            np = None
        out = (np.empty((side, side), dtype=np.int64) if np is not None
               else array.array("q", bytes(8 * side * side)))
        with ffi.from_buffer("int64_t[]", out) as pointer:
            check(lib.approxmul_multiplier_error_map(self.handle, pointer, side * side))
        return out if np is not None else memoryview(out).cast("B").cast("q", shape=[side, side])

    def __reduce__(self):
        # pickles (e.g. to Dask workers) as the spec string that rebuilds it
        spec = self.spec
        if spec is None:
            raise TypeError("this multiplier has no spec (in-memory table or callable); "
                            "save it to a table file and load that instead")
        from .specs import multiplier

        return multiplier, (spec,)

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


_METRICS = ("mae", "mae_percent", "mse", "wce", "wce_percent", "wcre_percent", "mre_percent",
            "ep_percent", "bias", "error_std", "min_error", "max_error", "pairs",
            "zero_product_pairs")


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
