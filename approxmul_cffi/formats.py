"""Product-table files: read and written with the operand order stated, never guessed.

Formats (chosen by ``format=`` or by the file extension, then checked
against the content):

=========  ======================  ==========================================================
format     extensions              content
=========  ======================  ==========================================================
binary     .bin                    4^n little-endian 16-bit entries, no header, index a*2^n+b
                                   (TFApprox); int16 when ``signed=True``
c          .h .c                   ``const int16_t lut[256][256] = {{...}, ...};`` (AdaPT);
                                   uint16_t / int32_t / uint32_t / int / short also read
text       .txt .csv .tsv .dat     2^n lines of 2^n integers, comma/space separated
npy        .npy                    a 2^n x 2^n integer array (NumPy)
npz        .npz                    an archive with one such array (or one named ``table``)
=========  ======================  ==========================================================

Orders (``order=``): ``"raw"``: row i holds the operand whose bit pattern is
i (for unsigned operands, value i); ``"twos"`` (signed only): values
0..2^(n-1)-1 then -2^(n-1)..-1, the AdaPT/TorchApprox layout, which is the
same layout as raw for signed operands; ``"offset"`` (signed only): row i
holds value i - 2^(n-1), the ApproxTorch layout.

Every entry must fit the 2n-bit product range of the operands (unsigned
0..4^n-1, signed -2^(2n-1)..2^(2n-1)-1). All parsing and checking is in the
C library (``approxmul_table_parse``): NumPy files reach it as text rows, and
a table being written passes through it too, which checks its range and
applies the order (the order's row permutation is its own inverse).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
>>> write_table([[0, 0], [0, 1]], path, signed=False)
>>> read_table(path, signed=False)
([[0, 0], [0, 1]], 1)
"""

import array
import os
import sys

from ._buffers import as_int, numpy_module
from ._library import check, ffi, lib
from .errors import DTypeError, FormatError, InvalidArgumentError, LibraryIOError, ShapeError
from .safe_files import load_npy, load_npz, npz_headers, read_bounded

__all__ = ["EXTENSIONS", "FORMATS", "ORDERS", "flatten_table", "format_of", "parse_table",
           "read_table", "write_table"]

FORMATS = ("binary", "c", "text", "npy", "npz")
ORDERS = ("raw", "twos", "offset")
EXTENSIONS = {
    ".bin": "binary", ".h": "c", ".c": "c", ".txt": "text", ".csv": "text", ".tsv": "text",
    ".dat": "text", ".npy": "npy", ".npz": "npz",
}
# The largest file of each format, for the widest table (12 bits, 4^12
# entries): a binary table is 2 * 4^12 bytes; text and C source allow about
# 16 characters an entry.
MAX_FILE_BYTES = {"binary": 2 * 4**12, "c": 16 * 4**12, "text": 16 * 4**12}
# the largest .npy/.npz table: 4^12 int64 entries (and the headers)
MAX_ARRAY_BYTES = 8 * 4**12

_C_FORMATS = {"binary": "APPROXMUL_TABLE_BINARY_U16LE", "c": "APPROXMUL_TABLE_C_SOURCE",
              "text": "APPROXMUL_TABLE_TEXT"}
_C_ORDERS = {"raw": "APPROXMUL_ORDER_RAW", "twos": "APPROXMUL_ORDER_TWOS",
             "offset": "APPROXMUL_ORDER_OFFSET"}


def format_of(path, format=None):
    """The table format named by ``format`` or, if None, by the path's extension.

    >>> format_of("lut.h"), format_of("table.dat", "npy")
    ('c', 'npy')
    """
    if format is not None:
        if format not in FORMATS:
            raise InvalidArgumentError(f"format: {format!r} is not one of {', '.join(FORMATS)}")
        return format
    extension = os.path.splitext(os.fspath(path))[1].lower()
    if extension not in EXTENSIONS:
        raise InvalidArgumentError(
            f"{os.fspath(path)}: cannot tell the table format from the extension "
            f"{extension!r}; pass format= one of {', '.join(FORMATS)} (extensions: "
            f"{', '.join(sorted(EXTENSIONS))})")
    return EXTENSIONS[extension]


def _order_code(order):
    if order not in ORDERS:
        raise InvalidArgumentError(f"order: {order!r} is not one of {', '.join(ORDERS)}")
    return getattr(lib, _C_ORDERS[order])


def parse_table(data, *, format, signed, order="raw", bits=None):
    """(flat entries in raw-pattern order, bits) of a binary, C or text table's bytes.

    The one table parser (the C library's): it checks the entry count, the
    product range and the order, and undoes the order's row permutation.

    >>> parse_table(b"0 0\\n0 1\\n", format="text", signed=False)
    ([0, 0, 0, 1], 1)
    """
    order_code = _order_code(order)
    if format not in _C_FORMATS:
        raise InvalidArgumentError(f"format: {format!r} is not one of {', '.join(_C_FORMATS)}")
    # every entry takes at least 2 bytes, so tables wider than 8 bits need
    # more than 4^9 bytes: smaller data gets the small buffer
    capacity = 4**8 if len(data) < 4**9 else 4**12
    out = ffi.new("int32_t[]", capacity)
    bits_out = ffi.new("int *")
    with ffi.from_buffer(data) as pointer:  # released right after the call
        check(lib.approxmul_table_parse(
            pointer, len(data), getattr(lib, _C_FORMATS[format]),
            0 if bits is None else as_int(bits, "bits"), bool(signed),
            order_code, out, capacity, bits_out))
    side = 1 << bits_out[0]
    return ffi.unpack(out, side * side), bits_out[0]


def _text_rows(rows):
    return "".join(" ".join(map(str, row)) + "\n" for row in rows).encode()


def _numpy_array(path, format):
    """The one array in a .npy/.npz file (its entries are checked by the parser)."""
    name = os.fspath(path)
    # headers first: no pickles, declared sizes present and at most a table's
    if format == "npz":
        keys = list(npz_headers(name))
        if "table" not in keys and len(keys) != 1:
            raise FormatError(f"{name}: archive holds {keys}; expected one array or one "
                              f"named 'table'")
        key = "table" if "table" in keys else keys[0]
        loaded = load_npz(name, max_bytes=MAX_ARRAY_BYTES, what="a table", names=[key])[key]
    else:
        loaded = load_npy(name, max_bytes=MAX_ARRAY_BYTES, what="a table")
    if loaded.ndim != 2 or loaded.dtype.kind not in "iu":
        raise FormatError(f"{name}: shape {loaded.shape}, dtype {loaded.dtype}; expected a 2-D "
                          f"integer table")
    return loaded


def read_table(path, *, signed, order="raw", format=None, bits=None):
    """(raw-pattern table as a list of rows, bits) read from a table file.

    The operand order is stated, never guessed; see the module docs.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.txt")
    >>> _ = open(path, "w").write("0 0\\n0 -1\\n")  # any products within range
    >>> read_table(path, signed=True)
    ([[0, 0], [0, -1]], 1)
    """
    format = format_of(path, format)
    _order_code(order)
    name = os.fspath(path)
    where = f"read as {format}"
    if format in ("npy", "npz"):
        array_ = _numpy_array(path, format)
        data, parse_as = _text_rows(array_.tolist()), "text"
        where += f", shape {array_.shape}"
    else:
        try:  # never more than the format can hold (a device like /dev/zero has no end)
            data = read_bounded(path, MAX_FILE_BYTES[format], f"a {format} table file")
        except LibraryIOError as error:
            raise LibraryIOError(f"cannot read table file: {error}") from None
        parse_as = format
    try:
        flat, found = parse_table(data, format=parse_as, signed=signed, order=order, bits=bits)
    except FormatError as error:
        raise FormatError(f"{name} ({where}): {error}") from None
    side = 1 << found
    return [flat[r * side:(r + 1) * side] for r in range(side)], found


def write_table(table, path, *, signed, format=None, order="raw", spec=None):
    """Write a raw-pattern product table (2^n x 2^n rows or array) to ``path``.

    ``format`` comes from the extension unless given; ``order`` is the file's
    row order. The C parser checks the entries and permutes the rows, so a
    written file always reads back exactly. :meth:`Multiplier.save` calls this.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.bin")
    >>> write_table([[0, 0], [0, 1]], path, signed=False)
    >>> open(path, "rb").read()
    b'\\x00\\x00\\x00\\x00\\x00\\x00\\x01\\x00'
    """
    format = format_of(path, format)
    rows = table.tolist() if hasattr(table, "tolist") else [list(row) for row in table]
    try:
        flat, bits = parse_table(_text_rows(rows), format="text", signed=signed, order=order)
    except FormatError as error:
        raise InvalidArgumentError(f"cannot write this table to a file: {error}") from None
    side = 1 << bits
    if format in ("binary", "c") and bits > 8:
        # 16-bit entries hold every product of up to 8 bits only
        low, high = (-2**15, 2**15 - 1) if signed else (0, 2**16 - 1)
        outside = next((v for v in flat if not low <= v <= high), None)
        if outside is not None:
            raise InvalidArgumentError(f"cannot write this table as {format}: its entries are "
                                       f"16-bit and {outside} does not fit; use text or npy")
    rows = [flat[r * side:(r + 1) * side] for r in range(side)]
    kind = "signed" if signed else "unsigned"
    label = f"approxmul product table: {spec or 'table'}; {kind} {bits}-bit operands, {order} order"
    if format in ("npy", "npz"):
        np = numpy_module()
        if np is None:
            import numpy as np  # writing NumPy's own files needs it anyway
        array_ = np.array(rows, dtype=np.int32)
        with open(path, "wb") as file:  # np.save* would append an extension
            (np.save if format == "npy" else lambda f, a: np.savez(f, table=a))(file, array_)
        return
    if format == "binary":
        data = array.array("H", [value & 0xFFFF for value in flat])
        if sys.byteorder == "big":  # the files are little-endian
            data.byteswap()
        data = data.tobytes()
    elif format == "c":
        ctype = "int16_t" if signed else "uint16_t"
        lines = [f"/* {label}", "   lut[x][y] = mul(x, y) */", "#include <stdint.h>",
                 f"const {ctype} lut[{side}][{side}] = {{"]
        lines += ["    {" + ", ".join(map(str, row)) + "}," for row in rows]
        lines.append("};")
        data = ("\n".join(lines) + "\n").encode()
    else:
        separator = ", " if str(path).lower().endswith(".csv") else " "
        data = (f"# {label}\n" + "".join(separator.join(map(str, row)) + "\n"
                                         for row in rows)).encode()
    try:
        with open(path, "wb") as file:
            file.write(data)
    except OSError as error:
        raise LibraryIOError(f"cannot write {os.fspath(path)}: {error.strerror}") from error


def flatten_table(table, max_side=4096):
    """(array.array('i') of an in-memory table's entries in row-major order, side length).

    ``table`` is a NumPy array, a buffer of int32 values or a sequence of rows;
    one wider than ``max_side`` is refused before it is copied.

    >>> flatten_table([[1, 2], [3, 4]])
    (array('i', [1, 2, 3, 4]), 2)
    """
    shape = getattr(table, "shape", None)  # 2-D arrays and rows: checked before the copy
    side = shape[0] if shape is not None and len(shape) == 2 else len(table) \
        if isinstance(table, (list, tuple)) else 0
    if side > max_side:
        raise ShapeError(f"table: {side} x {side} is larger than {max_side} x {max_side}")
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
            value = as_int(value, "table entry")
            if not -2**31 <= value < 2**31:
                raise InvalidArgumentError(f"table: entry {value} does not fit int32")
            flat.append(value)
    return flat, len(rows)
