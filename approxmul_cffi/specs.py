"""One string (or path) for every way to bring a multiplier.

``approxmul_cffi.multiplier(spec)`` accepts:

- a built-in family, parsed by the C library: ``"drum:k=4"``,
  ``"truncated:bits=8,cut=6,correct=1"``, ``"exact:bits=16,signed=1"``;
- a table file: ``"file:PATH?signed=1&order=offset&format=text&bits=8"``
  (options optional: signed=0, order=raw, format from the extension), or
  simply a path ending in a table extension (.bin .h .c .txt .csv .tsv .dat
  .npy .npz), read unsigned in raw order;
- a vendor C model: ``"c:LIBRARY:SYMBOL:SIGNATURE?bits=8&signed=1"`` with
  SIGNATURE a short name (u8, s8, u64ba, u64, u16, s16; see
  :mod:`approxmul_cffi.vendor`).

Every multiplier's :attr:`~approxmul_cffi.Multiplier.spec` is such a string,
so ``multiplier(m.spec)`` rebuilds it (e.g. on a distributed worker).
"""

import os

from ._library import c_string, check, ffi, lib
from .errors import InvalidArgumentError
from .formats import EXTENSIONS, read_table
from .multipliers import Multiplier, _int

_HINT = ("; or a table file (file:PATH?signed=..&order=..), a C model "
         "(c:LIBRARY:SYMBOL:SIGNATURE) or a Verilog netlist (verilog:PATH?signed=..)")


def families():
    """The built-in families: a list of dicts with name, parameters and description (paper).

    >>> [f["name"] for f in families()][:3]
    ['exact', 'truncated', 'bam']
    """
    result = []
    for index in range(lib.approxmul_family_count()):
        name, params, description = (ffi.new("const char **") for _ in range(3))
        check(lib.approxmul_family_info(index, name, params, description))
        result.append({"name": c_string(name[0]), "parameters": c_string(params[0]),
                       "description": c_string(description[0])})
    return result


def _options(text, allowed, where):
    options = {}
    for item in filter(None, text.split("&")):
        key, sep, value = item.partition("=")
        if not sep or key not in allowed:
            raise InvalidArgumentError(
                f"{where}: option {item!r}; expected key=value with key in {', '.join(allowed)}")
        options[key] = value
    return options


def _flag(value, name):
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    raise InvalidArgumentError(f"{name}={value!r}: expected 0 or 1")


def load_multiplier(path, signed=False, order="raw", format=None, bits=None):
    """A multiplier from a table file; the operand order is stated, never guessed.

    ``format``: binary, c, text, npy or npz, from the extension when None;
    the content is checked either way. ``order``: raw, twos or offset (see
    :mod:`approxmul_cffi.formats`). ``bits``: the operand width, inferred
    from the entry count when None.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.txt")
    >>> rows = [[a * b for b in range(-2, 2)] for a in range(-2, 2)]  # offset order
    >>> _ = open(path, "w").write("\\n".join(" ".join(map(str, r)) for r in rows))
    >>> m = load_multiplier(path, signed=True, order="offset")
    >>> m.product(-2, -1), int(m.table()[3][2])   # raw pattern 3 is -1, 2 is -2
    (2, 2)
    """
    table, found = read_table(path, signed=signed, order=order, format=format, bits=bits)
    m = Multiplier.from_table(table, signed=signed)
    fmt = format or EXTENSIONS[os.path.splitext(os.fspath(path))[1].lower()]
    m._spec = (f"file:{os.path.abspath(os.fspath(path))}?format={fmt}&order={order}"
               f"&signed={int(bool(signed))}&bits={found}")
    return m


def multiplier(spec):
    """A Multiplier from a spec string, a table path or a C model spec (module docs).

    >>> multiplier("drum:k=4").product(200, 57)
    12480
    >>> multiplier(multiplier("ilm:iterations=1").spec).product(200, 57)
    11328
    """
    if isinstance(spec, Multiplier):
        return spec
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise InvalidArgumentError(f"spec: expected a string or path, got {type(spec).__name__}")
    if spec.startswith("file:"):
        path, _, query = spec[5:].partition("?")
        o = _options(query, ("signed", "order", "format", "bits"), "file spec")
        return load_multiplier(path, signed=_flag(o.get("signed", "0"), "signed"),
                               order=o.get("order", "raw"), format=o.get("format"),
                               bits=_int(int(o["bits"]), "bits") if "bits" in o else None)
    if spec.startswith("c:"):
        body, _, query = spec[2:].partition("?")
        parts = body.rsplit(":", 2)
        if len(parts) != 3 or not all(parts):
            raise InvalidArgumentError(
                f"C model spec {spec!r}: expected c:LIBRARY:SYMBOL:SIGNATURE[?bits=..&signed=..]")
        o = _options(query, ("bits", "signed"), "C model spec")
        try:
            bits = int(o["bits"]) if "bits" in o else None
        except ValueError:
            raise InvalidArgumentError(f"C model spec: bits={o['bits']!r} is not an integer") from None
        signed = _flag(o["signed"], "signed") if "signed" in o else None
        return Multiplier.from_c_function(parts[0], parts[1], parts[2], bits=bits, signed=signed)
    if spec.startswith("verilog:") or os.path.splitext(spec)[1].lower() == ".v":
        from . import verilog  # gate-level netlists: verilog:PATH?options, or a .v path

        return verilog.from_spec(spec) if spec.startswith("verilog:") else verilog.from_verilog(spec)
    if os.path.splitext(spec)[1].lower() in EXTENSIONS:
        return load_multiplier(spec)
    try:
        return Multiplier.from_spec(spec)
    except InvalidArgumentError as error:
        if str(error).startswith("unknown multiplier family"):
            raise InvalidArgumentError(str(error) + _HINT) from None
        raise
