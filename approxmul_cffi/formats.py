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
0..4^n-1, signed -2^(2n-1)..2^(2n-1)-1); the binary, C and text parsers are
in the C library (``approxmul_table_parse``).
"""

import os

from ._library import ffi, lib, check
from .errors import FormatError, InvalidArgumentError, LibraryIOError, UnsupportedError

FORMATS = ("binary", "c", "text", "npy", "npz")
ORDERS = ("raw", "twos", "offset")
EXTENSIONS = {
    ".bin": "binary", ".h": "c", ".c": "c", ".txt": "text", ".csv": "text", ".tsv": "text",
    ".dat": "text", ".npy": "npy", ".npz": "npz",
}
_C_FORMATS = {"binary": "APPROXMUL_TABLE_BINARY_U16LE", "c": "APPROXMUL_TABLE_C_SOURCE",
              "text": "APPROXMUL_TABLE_TEXT"}
_C_ORDERS = {"raw": "APPROXMUL_ORDER_RAW", "twos": "APPROXMUL_ORDER_TWOS",
             "offset": "APPROXMUL_ORDER_OFFSET"}


def format_of(path, format=None):
    """The table format of a path, from ``format=`` or the file extension.

    >>> format_of("lut.h"), format_of("table.bin"), format_of("t.txt", format="npy")
    ('c', 'binary', 'npy')
    """
    """The table format named by ``format`` or, if None, by the path's extension."""
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


def _check_order(order, signed):
    if order not in ORDERS:
        raise InvalidArgumentError(f"order: {order!r} is not one of {', '.join(ORDERS)}")
    if order != "raw" and not signed:
        raise InvalidArgumentError(
            f"order: {order!r} is defined for signed operands; unsigned tables are in raw order")


def _flip(order, bits):
    """File row r holds raw pattern r ^ flip (offset order moves the sign bit)."""
    return 1 << (bits - 1) if order == "offset" else 0


def _product_range(bits, signed):
    if signed:
        return -(1 << (2 * bits - 1)), (1 << (2 * bits - 1)) - 1
    return 0, (1 << (2 * bits)) - 1


def read_table(path, *, signed, order="raw", format=None, bits=None):
    """(raw-pattern table rows as lists or a NumPy array, bits) read from a file."""
    from .multipliers import _int

    format = format_of(path, format)
    signed = bool(signed)
    _check_order(order, signed)
    if bits is not None:
        bits = _int(bits, "bits")
    if format in ("npy", "npz"):
        return _read_numpy(path, format, signed, order, bits)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise LibraryIOError(f"cannot read table file {os.fspath(path)}: {error.strerror}") from error
    out = ffi.new("int32_t[]", 1 << 16)
    bits_out = ffi.new("int *")
    try:
        with ffi.from_buffer(data) as pointer:
            check(lib.approxmul_table_parse(
                pointer, len(data), getattr(lib, _C_FORMATS[format]), bits or 0,
                signed, getattr(lib, _C_ORDERS[order]), out, 1 << 16, bits_out))
    except FormatError as error:
        raise FormatError(f"{os.fspath(path)} (read as {format}): {error}") from None
    side = 1 << bits_out[0]
    flat = ffi.unpack(out, side * side)
    return [flat[r * side:(r + 1) * side] for r in range(side)], bits_out[0]


def _read_numpy(path, format, signed, order, bits):
    try:
        import numpy as np
    except ImportError:
        raise UnsupportedError(f"reading {format} files needs NumPy (pip install numpy)") from None
    name = os.fspath(path)
    try:
        loaded = np.load(path, allow_pickle=False)
    except FileNotFoundError as error:
        raise LibraryIOError(f"cannot read table file {name}: {error.strerror}") from error
    except (ValueError, OSError, EOFError) as error:
        raise FormatError(f"{name} is not a readable .{format} file: {error}") from None
    if format == "npz" or not isinstance(loaded, np.ndarray):
        if isinstance(loaded, np.ndarray):
            raise FormatError(f"{name}: a .npy array, not a .npz archive; use format='npy'")
        with loaded:
            keys = list(loaded.keys())
            if "table" in keys:
                key = "table"
            elif len(keys) == 1:
                key = keys[0]
            else:
                raise FormatError(f"{name}: archive holds {keys}; expected one array or one "
                                  f"named 'table'")
            array = loaded[key]
    else:
        array = loaded
    side = array.shape[0] if array.ndim == 2 else 0
    found = side.bit_length() - 1
    if array.ndim != 2 or array.shape[0] != array.shape[1] or side != 1 << found or not 1 <= found <= 8:
        raise FormatError(f"{name}: shape {array.shape}; expected a 2^n x 2^n table, n in 1..8")
    if bits is not None and bits != found:
        raise FormatError(f"{name}: a {side} x {side} table has {found}-bit operands, not {bits}")
    if array.dtype.kind not in "iu":
        raise FormatError(f"{name}: dtype {array.dtype}; expected integer entries")
    low, high = _product_range(found, signed)
    if array.size and (int(array.min()) < low or int(array.max()) > high):
        bad = int(array.min()) if int(array.min()) < low else int(array.max())
        raise FormatError(f"{name}: entry {bad} does not fit the {2 * found}-bit "
                          f"{'signed' if signed else 'unsigned'} product range {low}..{high}")
    index = np.arange(side) ^ _flip(order, found)  # raw pattern of each file row
    table = np.empty((side, side), dtype=np.int32)
    table[np.ix_(index, index)] = array
    return table, found


def write_table(multiplier, path, *, format=None, order="raw"):
    """Write ``multiplier``'s table to ``path`` (see :meth:`Multiplier.save`)."""
    format = format_of(path, format)
    signed, bits = multiplier.signed, multiplier.bits
    _check_order(order, signed)
    if bits > 8:
        raise UnsupportedError(f"a {bits}-bit multiplier has no table file (at most 8 bits)")
    raw = multiplier.table().tolist()
    low, high = _product_range(bits, signed)
    for r, row in enumerate(raw):
        for c, value in enumerate(row):
            if not low <= value <= high:
                raise InvalidArgumentError(
                    f"product [{r}][{c}] = {value} does not fit the {2 * bits}-bit "
                    f"{'signed' if signed else 'unsigned'} product range {low}..{high} that "
                    f"table files hold")
    side, flip = 1 << bits, _flip(order, bits)
    rows = [[raw[r ^ flip][c ^ flip] for c in range(side)] for r in range(side)]
    spec = multiplier.spec or multiplier.name
    if format in ("npy", "npz"):
        import numpy as np
        array = np.array(rows, dtype=np.int32)
        with open(path, "wb") as file:  # np.save* would append an extension
            (np.save if format == "npy" else lambda f, a: np.savez(f, table=a))(file, array)
        return
    if format == "binary":
        data = bytearray()
        for row in rows:
            for value in row:
                data += (value & 0xFFFF).to_bytes(2, "little")
    elif format == "c":
        ctype = "int16_t" if signed else "uint16_t"
        lines = ["/* approxmul product table: " + spec,
                 f"   {'signed' if signed else 'unsigned'} {bits}-bit operands, {order} order: "
                 f"lut[x][y] = mul(x, y) */",
                 "#include <stdint.h>",
                 f"const {ctype} lut[{side}][{side}] = {{"]
        lines += ["    {" + ", ".join(map(str, row)) + "}," for row in rows]
        lines.append("};")
        data = ("\n".join(lines) + "\n").encode()
    else:
        separator = ", " if str(path).lower().endswith(".csv") else " "
        header = (f"# approxmul product table: {spec}; {'signed' if signed else 'unsigned'} "
                  f"{bits}-bit operands, {order} order\n")
        data = (header + "".join(separator.join(map(str, row)) + "\n" for row in rows)).encode()
    try:
        with open(path, "wb") as file:
            file.write(data)
    except OSError as error:
        raise LibraryIOError(f"cannot write {os.fspath(path)}: {error.strerror}") from error
