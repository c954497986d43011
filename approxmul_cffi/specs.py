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

This module is the grammar: :func:`parse` says what a spec names, and
:func:`approxmul_cffi.multiplier` builds it.

>>> parse("drum:k=4")
('family', 'drum:k=4')
>>> parse("file:/tmp/t.txt?signed=1&order=offset")
('file', '/tmp/t.txt', {'signed': True, 'order': 'offset'})
"""

import os

from ._buffers import as_int
from ._library import c_string, check, ffi, lib
from .errors import InvalidArgumentError
from .formats import EXTENSIONS

__all__ = ["families", "parse"]

# added to the C parser's "unknown multiplier family" message
HINT = ("; or a table file (file:PATH?signed=..&order=..), a C model "
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


def _bits(text, where):
    try:
        return as_int(int(text), "bits")
    except ValueError:
        raise InvalidArgumentError(f"{where}: bits={text!r} is not an integer") from None


def is_table_path(text):
    """True when a string ends in a table-file extension.

    >>> is_table_path("lut.H"), is_table_path("drum:k=4")
    (True, False)
    """
    return os.path.splitext(text)[1].lower() in EXTENSIONS


def parse(spec):
    """What a spec string names, as a tuple (see the module docs).

    ``("family", spec)``: a built-in family for the C parser; ``("verilog", spec)``:
    a gate-level netlist (verilog:PATH?options or a .v path);
    ``("file", path, options)``: a table file, options among signed, order,
    format and bits; ``("c", library, symbol, signature, options)``: a vendor
    C model, options among bits and signed.
    """
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise InvalidArgumentError(f"spec: expected a string or path, got {type(spec).__name__}")
    if spec.startswith("file:"):
        path, _, query = spec[5:].partition("?")
        o = _options(query, ("signed", "order", "format", "bits"), "file spec")
        if "signed" in o:
            o["signed"] = _flag(o["signed"], "signed")
        if "bits" in o:
            o["bits"] = _bits(o["bits"], "file spec")
        return "file", path, o
    if spec.startswith("c:"):
        body, _, query = spec[2:].partition("?")
        parts = body.rsplit(":", 2)
        if len(parts) != 3 or not all(parts):
            raise InvalidArgumentError(
                f"C model spec {spec!r}: expected c:LIBRARY:SYMBOL:SIGNATURE[?bits=..&signed=..]")
        o = _options(query, ("bits", "signed"), "C model spec")
        if "signed" in o:
            o["signed"] = _flag(o["signed"], "signed")
        if "bits" in o:
            o["bits"] = _bits(o["bits"], "C model spec")
        return ("c", *parts, o)
    if spec.startswith("verilog:") or os.path.splitext(spec)[1].lower() == ".v":
        return "verilog", spec
    if is_table_path(spec):
        return "file", spec, {}
    return "family", spec
