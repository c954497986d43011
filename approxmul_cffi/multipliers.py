"""The Multiplier (an n x n bit approximate or exact integer multiplier) and
:func:`multiplier`, the one function that makes one from anything naming it.
"""

import array
import os

from . import error_metrics, formats, specs, vendor
from ._buffers import as_int
from ._library import c_string, check, ffi, lib
from .errors import CallbackError, InvalidArgumentError, ShapeError, UnsupportedError

__all__ = ["Multiplier", "load_multiplier", "multiplier"]


netlist_support = {}  # filled by approxmul_cffi.verilog when the package loads


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
    # _metadata: what the source said about the circuit (netlist header comments);
    # _answers: the immutable handle's answers to queries, asked once (layers ask per call)
    __slots__ = ("_handle", "_spec", "_keepalive", "_metadata", "_answers", "__weakref__")

    def __init__(self, handle, spec=None, keepalive=None):
        # handles come from the class methods; this takes ownership of one
        self._handle = ffi.gc(handle, lib.approxmul_multiplier_destroy)
        self._spec = spec
        self._keepalive = keepalive
        self._metadata, self._answers = {}, {}

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
        return cls._create(lib.approxmul_multiplier_exact, as_int(bits, "bits"), bool(signed))

    @classmethod
    def from_table(cls, table, signed=False):
        """A multiplier from its full product table.

        ``table`` is 2^n x 2^n integers (n = 1..12) that fit int32, a NumPy
        array, a sequence of rows, or a flat buffer of 4^n int32 values.
        ``table[x][y]`` is the product of the operands whose raw n-bit
        patterns are x and y: for signed operands, the pattern of -1 is
        2^n - 1 (two's complement), so ``table[255][1]`` is the product of -1
        and 1 for 8 bits. Other row orders are converted by the file loaders.
        9-12-bit tables run on the generic kernel unless :attr:`plan` says otherwise.

        >>> t = [[x * y for y in range(4)] for x in range(4)]
        >>> Multiplier.from_table(t).product(3, 2)
        6
        """
        flat, side = formats.flatten_table(table, max_side=4096)
        if side < 2 or side > 4096 or side & (side - 1):
            raise ShapeError(f"table: {side} x {side} is not a 2^n x 2^n table with n in 1..12")
        bits = side.bit_length() - 1
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
        return netlist_support["from_verilog"](source, module=module, a=a, b=b, out=out, signed=signed,
                            cell_map=cell_map)

    def to_verilog(self):
        """This family multiplier as a gate-level Verilog netlist (exact, truncated, bam).

        >>> "module truncated_bits_4" in Multiplier.from_spec("truncated:bits=4").to_verilog()
        True
        """
        if self.spec is None or self.spec.startswith(("file:", "c:", "verilog:")):
            raise UnsupportedError(f"{self!r} is no built-in family; netlists are written for "
                                   "the families exact, truncated and bam")
        return netlist_support["family_verilog"](self.spec)

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
        if function not in self._answers or self._handle is None:  # closed: self.handle raises
            out = ffi.new(ctype)
            check(function(self.handle, out))
            self._answers[function] = out[0]
        return self._answers[function]

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
        """How the kernels compute it: "exact-gemm", "table", ... (docs/architecture.md)."""
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
        check(lib.approxmul_multiplier_product(self.handle, as_int(a, "a"), as_int(b, "b"), out))
        return out[0]

    def table(self):
        """The 2^n x 2^n int32 product table indexed by raw bit patterns (n <= 12).

        A NumPy array when NumPy is installed, else a 2-D memoryview; wider
        models than 8 bits are tabulated now (a 12-bit table is 64 MiB).

        >>> Multiplier.exact(bits=2).table().tolist()
        [[0, 0, 0, 0], [0, 1, 2, 3], [0, 2, 4, 6], [0, 3, 6, 9]]
        """
        if self.bits > 12:  # refused before allocating 8 * 4^bits bytes
            raise UnsupportedError(f"table: {self.bits}-bit operands make {4 ** self.bits} "
                                   f"pairs; at most 12 bits (metrics() covers any width)")
        side = 1 << self.bits
        try:
            import numpy as np
        except ImportError:
            np = None
        out = np.empty((side, side), np.int32) if np else array.array("i", bytes(4 * side * side))
        with ffi.from_buffer("int32_t[]", out) as pointer:
            check(lib.approxmul_multiplier_table(self.handle, pointer, side * side))
        return out if np is not None else memoryview(out).cast("B").cast("i", shape=[side, side])

    # ------------------------------------------------ multiplier library

    @classmethod
    def from_spec(cls, spec):
        """Same as :func:`approxmul_cffi.multiplier` (kept for existing code).

        >>> Multiplier.from_spec("drum:k=4").spec
        'drum:bits=8,signed=0,k=4'
        """
        return multiplier(spec)

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
    def from_c_function(cls, library_path, symbol, signature, *, bits=None, signed=None,
                        isolate=True, timeout=60.0):
        """A vendor C model: ``symbol`` in the shared library ``library_path``.

        ``signature`` is the C prototype, whose parameter names ``a``/``b``
        give the operand order (``"uint64_t f(uint64_t b, uint64_t a)"`` for
        EvoApproxLib's second-operand-first models), or a short name (u8, s8,
        u64ba, u64, u16, s16; see :mod:`approxmul_cffi.vendor`). ``bits``
        defaults to the parameter type's width (8 for 64-bit parameters).
        ``signed`` defaults to the types' signedness; ``signed=True`` with
        unsigned types reads a signed circuit declared with unsigned types
        (operands as n-bit patterns, result as 2n-bit two's complement).

        Models of up to 8 bits are tabulated at once, by default in a child
        process (``isolate``): a model that crashes, exits or runs longer
        than ``timeout`` seconds raises CallbackError instead of taking this
        process down. Wider ones are
        called from the kernels in this process: this object keeps the
        library loaded, so keep the Multiplier alive while C code uses its
        handle. Symbols that are data, not functions, are refused.

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
        made = vendor.load_model(library_path, symbol, signature, bits=bits, signed=signed,
                                 isolate=isolate, timeout=timeout)
        if "table" in made:  # tabulated in a child process: the library never loaded here
            model = cls.from_table(memoryview(made["table"]).cast("i"), signed=made["signed"])
        else:  # tabulated models no longer need the library; wider ones call into it
            model = cls(made["handle"], keepalive=made["keepalive"])
        model._spec = made["spec"]
        return model

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
        bits = as_int(bits, "bits")
        failure = []

        def call(_, a, b, out):
            try:
                out[0] = as_int(function(a, b), "product")
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
        :func:`approxmul_cffi.multiplier` reads them back exactly.

        >>> import tempfile, os, approxmul_cffi as am
        >>> path = os.path.join(tempfile.mkdtemp(), "mitchell.bin")
        >>> am.multiplier("mitchell").save(path)
        >>> am.multiplier(path, signed=False).product(200, 57)
        11008
        """
        formats.write_table(self.table(), path, signed=self.signed, format=format, order=order,
                            spec=self.spec or self.name)

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
        return error_metrics.metrics(self.handle)

    def error_map(self):
        """The 2^n x 2^n errors approx - exact, rows and columns by raw bit pattern (n <= 12).

        int64; a NumPy array when NumPy is installed, else a 2-D memoryview.
        For signed operands row 2^n - 1 is operand -1, as in :meth:`table`.

        >>> Multiplier.from_spec("mitchell:bits=2").error_map().tolist()
        [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, -1]]
        """
        return error_metrics.error_map(self.handle, self.bits)

    def __reduce__(self):
        # pickles (e.g. to Dask workers) as the spec string that rebuilds it
        spec = self.spec
        if spec is None:
            raise TypeError("this multiplier has no spec (in-memory table or callable); "
                            "save it to a table file and load that instead")
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



def _load_table(path, signed, order, format, bits):
    table, found = formats.read_table(path, signed=signed, order=order, format=format, bits=bits)
    from .conventions import warn_if_mismatched

    warn_if_mismatched(path, signed, order, format)  # a wrong convention looks like noise
    m = Multiplier.from_table(table, signed=signed)
    m._spec = (f"file:{os.path.abspath(os.fspath(path))}?format={formats.format_of(path, format)}"
               f"&order={order}&signed={int(bool(signed))}&bits={found}")
    return m


def multiplier(spec, *, signed=None, order=None, format=None, bits=None):
    """A Multiplier from anything that names one: the one way to make or load one.

    ``spec`` is a built-in family spec, a table file (a path, or a
    ``file:`` spec), a vendor C model spec (:mod:`approxmul_cffi.specs`), or
    a Multiplier (returned as is). The keywords are a table file's options
    (default: unsigned, raw order, format from the extension, bits from the
    entry count); given any, ``spec`` is read as a path.

    >>> multiplier("drum:k=4").product(200, 57)
    12480
    >>> multiplier(multiplier("ilm:iterations=1").spec).product(200, 57)
    11328
    >>> import os, tempfile; path = os.path.join(tempfile.mkdtemp(), "t.txt")
    >>> rows = [[a * b for b in range(-2, 2)] for a in range(-2, 2)]  # offset order
    >>> _ = open(path, "w").write("\\n".join(" ".join(map(str, r)) for r in rows))
    >>> m = multiplier(path, signed=True, order="offset")
    >>> m.product(-2, -1), int(m.table()[3][2])   # raw pattern 3 is -1, 2 is -2
    (2, 2)
    """
    given = {k: v for k, v in dict(signed=signed, order=order, format=format, bits=bits).items()
             if v is not None}
    if isinstance(spec, Multiplier):
        if given:
            raise InvalidArgumentError(f"table file options {sorted(given)} given with a Multiplier")
        return spec
    bare_path = isinstance(spec, (str, os.PathLike)) and not str(spec).lower().endswith(".v")
    parsed = (("file", os.fspath(spec), {}) if given and bare_path
              and not str(spec).startswith(("file:", "c:", "verilog:")) else specs.parse(spec))
    kind = parsed[0]
    if kind == "file":
        _, path, options = parsed
        for key, value in given.items():
            if options.setdefault(key, value) != value:
                raise InvalidArgumentError(f"{key}: {value!r} given, the spec says "
                                           f"{options[key]!r}")
        return _load_table(path, bool(options.get("signed", False)), options.get("order", "raw"),
                           options.get("format"), options.get("bits"))
    if kind == "verilog" and set(given) <= {"signed"}:
        if parsed[1].startswith("verilog:"):
            return netlist_support["from_spec"](parsed[1])
        return netlist_support["from_verilog"](parsed[1], **given)
    if given:
        raise InvalidArgumentError(f"table file options {sorted(given)} given with the "
                                   f"{'C model' if kind == 'c' else 'family'} spec {spec!r}")
    if kind == "c":
        _, library, symbol, signature, options = parsed
        return Multiplier.from_c_function(library, symbol, signature, **options)
    text = parsed[1]
    if "\0" in text:  # C would silently stop reading there
        raise InvalidArgumentError(f"spec: {text!r} contains a NUL character")
    try:
        return Multiplier._create(lib.approxmul_multiplier_from_spec, text.encode())
    except InvalidArgumentError as error:
        if str(error).startswith("unknown multiplier family"):
            raise InvalidArgumentError(str(error) + specs.HINT) from None
        raise


def load_multiplier(path, signed=False, order="raw", format=None, bits=None):
    """Same as ``multiplier(path, signed=..., order=..., format=..., bits=...)`` (kept for existing code).

    >>> import tempfile, os; path = os.path.join(tempfile.mkdtemp(), "m.npy")
    >>> multiplier("mitchell").save(path); load_multiplier(path).product(200, 57)
    11008
    """
    return multiplier(path, signed=signed, order=order, format=format, bits=bits)
