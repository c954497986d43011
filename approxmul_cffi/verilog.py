"""Multipliers from gate-level Verilog netlists, and netlists of the built-in families.

A hardware flow ends in a netlist; :func:`from_verilog` reads it and
tabulates the product of every operand pair by simulating the gates
bit-parallel in the C library (no compiler, no Verilog simulator):

>>> import approxmul_cffi as am
>>> text = '''
... module mul2 (A, B, O);
...   input [1:0] A, B;
...   output [3:0] O;
...   wire c;
...   and (O[0], A[0], B[0]);
...   assign c = A[1] & B[0] & A[0] & B[1];
...   assign O[1] = (A[1] & B[0]) ^ (A[0] & B[1]);
...   assign O[2] = (A[1] & B[1]) ^ c;
...   assign O[3] = c;
... endmodule'''
>>> from_verilog(text).product(3, 3)
9

The supported subset (docs/multipliers.md, "From a Verilog netlist"): one
module with two operand input vectors and one output vector; ``wire``
declarations, ``assign`` with ``~ & | ^ ~^`` (and ``~& ~| ~^``
reductions), ``?:``, bit and part selects, concatenation and constants; the
gate primitives ``and or nand nor xor xnor not buf``; standard-cell
instances when a cell map gives each cell's function. Other Verilog
(behavioural, hierarchical) is lowered to that subset by Yosys when it is
installed. Header comments ``// NAME = value unit`` become the multiplier's
:attr:`~approxmul_cffi.Multiplier.metadata` (area, power, delay...).

Spec strings: ``verilog:PATH?signed=1&module=M&a=A&b=B&out=O&cells=CELLMAP``
(all options optional), or just a path ending in ``.v``.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

from ._library import c_string, check, ffi, lib
from . import multipliers
from .errors import (ApproxmulError, FormatError, InvalidArgumentError, OperandRangeError,
                     UnsupportedError)

#: the ports a netlist is read with unless told otherwise
DEFAULT_PORTS = {"a": "A", "b": "B", "out": "O"}

_YOSYS_SECONDS = 600  # a flattened design far beyond any multiplier
_YOSYS_SCRIPT = ("read_verilog {source}; hierarchy {top}; proc; flatten; opt; techmap; opt; "
                 "abc -g AND,NAND,OR,NOR,XOR,XNOR,MUX; opt_clean; write_verilog -noattr {target}")


class NetlistSignednessWarning(UserWarning):
    """A netlist read unsigned (or signed) that looks written the other way.

    Its header says so (approxmul writes ``// spec = FAMILY:...,signed=1,...``),
    or, without such a header and up to 8 bits, its products are far from
    the exact product as read and much nearer read the other way. Read in
    the wrong signedness a good multiplier looks like noise (networks then
    run at chance). ``where`` names the netlist, ``signed`` is the reading
    and ``reason`` says why the other one looks right.
    """

    def __init__(self, where, signed, reason):
        other = "unsigned" if signed else "signed"
        super().__init__(f"{where}: read {'signed' if signed else 'unsigned'}, but {reason}: "
                         f"probably {other} (pass signed={not signed}, or "
                         f"?signed={int(not signed)} in a verilog: spec)")
        self.where, self.signed, self.reason = where, bool(signed), reason


class NetlistError(FormatError):
    """A malformed netlist; ``line`` is the line it concerns (None when none)."""

    def __init__(self, message, line=None):
        super().__init__(message)
        self.line = line


def _is_text(source):
    # Verilog has statements ending in ';' (and usually lines); paths have neither
    return isinstance(source, str) and ("\n" in source or ";" in source)


def _read(source, what):
    """(bytes, absolute path or None) of a path or a text."""
    if isinstance(source, bytes):
        return source, None
    if isinstance(source, str) and _is_text(source):
        return source.encode(), None
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidArgumentError(f"{what}: expected a path or Verilog text, got "
                                   f"{type(source).__name__}")
    path = os.path.abspath(os.fspath(source))
    with open(path, "rb") as handle:
        return handle.read(), path


def cell_map_text(cell_map):
    """The cell map as the C library reads it: lines ``CELL PIN = expression``.

    ``cell_map`` is such a text, a dict ``{cell: {output_pin: expression}}``,
    or a path to a text or ``.json`` file of either form.

    >>> print(cell_map_text({"NAND2X1": {"Y": "~(A & B)"}, "FAX1": {"S": "A ^ B ^ C"}}))
    NAND2X1 Y = ~(A & B)
    FAX1 S = A ^ B ^ C
    """
    if isinstance(cell_map, dict):
        lines = []
        for cell, pins in cell_map.items():
            if not isinstance(pins, dict):
                raise InvalidArgumentError(f"cell map: cell {cell!r} needs a dict of output "
                                           f"pin -> expression, got {type(pins).__name__}")
            for pin, expression in pins.items():
                if "\n" in str(expression):
                    raise InvalidArgumentError(f"cell map: {cell}.{pin}: one line per function")
                lines.append(f"{cell} {pin} = {expression}")
        return "\n".join(lines)
    if isinstance(cell_map, str) and "=" in cell_map:
        return cell_map
    path = os.fspath(cell_map)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if path.lower().endswith(".json"):
        try:
            return cell_map_text(json.loads(text))
        except json.JSONDecodeError as error:
            raise FormatError(f"cell map {path}: not JSON: {error}") from None
    return text


class Netlist:
    """A parsed, levelized netlist (a C handle); build multipliers with :meth:`multiplier`.

    ``source``, ``module``, ``a``, ``b``, ``out`` and ``cell_map`` as for
    :func:`from_verilog`; ``metadata`` holds the header comments.

    >>> netlist = Netlist("// AREA = 3.5 um2\\n" + family_verilog("exact:bits=3"))
    >>> netlist.metadata["AREA"], netlist.multiplier().product(7, 7)
    ((3.5, 'um2'), 49)
    """

    __slots__ = ("_handle", "path", "metadata")

    def __init__(self, source, module=None, a="A", b="B", out="O", cell_map=None):
        data, self.path = _read(source, "netlist")
        cells = cell_map_text(cell_map).encode() if cell_map is not None else None
        handle = ffi.new("approxmul_netlist **")
        names = [ffi.NULL if x is None else _name(x, key)
                 for x, key in ((module, "module"), (a, "a"), (b, "b"), (out, "out"))]
        try:
            _check_netlist(lib.approxmul_netlist_parse(
                data, len(data), *names, cells if cells is not None else ffi.NULL,
                len(cells) if cells is not None else 0, handle), self.path)
        except UnsupportedError as unsupported:
            lowered = _lower_with_yosys(data, module, self.path, unsupported)
            try:
                _check_netlist(lib.approxmul_netlist_parse(
                    lowered, len(lowered), *names, cells if cells is not None else ffi.NULL,
                    len(cells) if cells is not None else 0, handle), None)
            except ApproxmulError as error:  # what Yosys's output still has: said once
                raise _after_lowering(error, unsupported, self.path) from None
        self._handle = ffi.gc(handle[0], lib.approxmul_netlist_destroy)
        self.metadata = _metadata(self.info())

    def info(self):
        """Statistics as a dict: module, ports, bits, gates, gates by type, depth, metadata.

        >>> info = Netlist(family_verilog("exact:bits=2")).info()
        >>> info["bits"], info["out"], info["gates.and"]   # 4 partial products, 2 carries
        (2, 'O[3:0]', 6)
        """
        text = ffi.new("const char **")
        check(lib.approxmul_netlist_info(self._handle, text))
        result = {}
        for line in c_string(text[0]).splitlines():
            key, _, value = line.partition("=")
            result[key] = int(value) if re.fullmatch(r"-?\d+", value) else value
        return result

    def multiplier(self, signed=False):
        """The Multiplier this netlist computes (output read as two's complement if ``signed``).

        >>> Netlist(family_verilog("exact:bits=4,signed=1")).multiplier(signed=True).product(-8, 7)
        -56
        """
        out = ffi.new("approxmul_multiplier **")
        _check_netlist(lib.approxmul_multiplier_from_netlist(self._handle, bool(signed), out),
                       self.path)
        m = multipliers.Multiplier(out[0])
        m._metadata = dict(self.metadata)
        return m


def _name(value, key):
    if not isinstance(value, str) or not value or "\0" in value:
        raise InvalidArgumentError(f"{key}: expected a non-empty name, got {value!r}")
    return value.encode()


def _check_netlist(status, path):
    try:
        check(status)
    except FormatError as error:
        message = str(error)
        match = re.match(r"line (\d+):", message)
        prefix = f"{path}: " if path else ""
        raise NetlistError(prefix + message, int(match.group(1)) if match else None) from None
    except (UnsupportedError, InvalidArgumentError) as error:
        if path:
            raise type(error)(f"{path}: {error}") from None
        raise


def _after_lowering(error, unsupported, path):
    """The one error for a netlist that Yosys lowered but this reader still cannot take.

    Yosys dealt with the construct the first reading stopped at, so that
    reason is dropped, unless Yosys kept the very same construct (unknown
    standard cells, which it leaves as instances): then the first reading's
    message, which cites the user's line, is the one given. Line numbers of
    Yosys's output mean nothing to the user and are left out.
    """
    prefix = f"{path}: " if path else ""
    message = re.sub(r"^line \d+: ", "", str(error))
    first = re.sub(r"^line \d+: ", "", str(unsupported)[len(prefix):])
    if isinstance(error, UnsupportedError) and message == first:
        return unsupported
    if isinstance(error, InvalidArgumentError):  # ports or module: about the design itself
        return type(error)(prefix + message)
    return type(error)(f"{prefix}after lowering by Yosys: {message}")


def _metadata(info):
    """{NAME: (value, unit)} from the header comments; value a float when it is a number."""
    result = {}
    for key, value in info.items():
        if not key.startswith("meta."):
            continue
        text, _, unit = str(value).partition(" ")
        try:
            number = float(text)
        except ValueError:
            result[key[5:]] = (str(value), "")
        else:
            result[key[5:]] = (number, unit.strip())
    return result


def yosys_path():
    """The ``yosys`` executable, or None when Yosys is not installed.

    >>> path = yosys_path()
    >>> path is None or os.path.basename(path) == "yosys"
    True
    """
    return shutil.which("yosys")


def _lower_with_yosys(data, module, path, unsupported):
    """The design flattened and lowered to simple gates by Yosys.

    ``unsupported`` is why the plain reader refused it: raised with the
    advice to install Yosys when Yosys is not found, or with Yosys's own
    reason when Yosys fails too.
    """
    yosys = yosys_path()
    if yosys is None:
        raise UnsupportedError(f"{unsupported}; install Yosys (Debian package yosys) to "
                               "read other Verilog (behavioural code, hierarchies of modules)") \
            from None
    with tempfile.TemporaryDirectory(prefix="approxmul-yosys-") as work:
        source = os.path.join(work, "design.v")
        target = os.path.join(work, "lowered.v")
        with open(source, "wb") as handle:
            handle.write(data)
        top = f"-top {module}" if module else "-auto-top"
        script = _YOSYS_SCRIPT.format(source=source, top=top, target=target)
        try:
            result = subprocess.run([yosys, "-q", "-p", script], capture_output=True, text=True,
                                    timeout=_YOSYS_SECONDS)
        except subprocess.TimeoutExpired:
            raise FormatError(f"{unsupported}; Yosys did not finish lowering it within "
                              f"{_YOSYS_SECONDS} s") from None
        if result.returncode != 0:
            lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
            reason = lines[-1] if lines else f"exit status {result.returncode}"
            # Yosys names its copy of the design: the user knows it by their own name
            reason = reason.replace(source, path or "the netlist")
            raise FormatError(f"{unsupported}; Yosys could not lower it either: {reason}")
        with open(target, "rb") as handle:
            return handle.read()


def from_verilog(source, module=None, a="A", b="B", out="O", signed=False, cell_map=None):
    """A Multiplier from a gate-level Verilog netlist (a path or the text itself).

    ``a``, ``b`` and ``out`` name the operand and product ports (a clear error
    lists the module's ports when they do not match); ``module`` picks one
    module of several; ``signed`` reads operands and product as two's
    complement; ``cell_map`` gives the functions of standard cells (see
    :func:`cell_map_text`). From a path the multiplier keeps a spec
    ``verilog:PATH?...`` that rebuilds it (pickling, Dask workers). A
    netlist that looks written in the other signedness (its header, or its
    products) gives a :class:`NetlistSignednessWarning`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "trunc.v")
    >>> _ = open(path, "w").write(family_verilog("truncated:bits=8,cut=8"))
    >>> m = from_verilog(path)
    >>> m.product(200, 57), m.spec.endswith("trunc.v?signed=0")
    (11008, True)
    """
    netlist = Netlist(source, module=module, a=a, b=b, out=out, cell_map=cell_map)
    where = netlist.path or "the netlist"
    header = _header_signedness(netlist.metadata)
    try:
        m = netlist.multiplier(signed=signed)
    except OperandRangeError as error:
        if header is None or header[0] == bool(signed):
            raise
        raise OperandRangeError(f"{error}; {where}: {header[1]}") from None
    reason = header[1] if header is not None and header[0] != bool(signed) else None
    if header is None and m.bits <= 8:
        reason = _products_fit_the_other_signedness(netlist, m, signed)
    if reason is not None:
        warnings.warn(NetlistSignednessWarning(where, signed, reason), stacklevel=_user_level())
    if netlist.path is not None and (cell_map is None or not _is_inline(cell_map)):
        options = [f"signed={int(bool(signed))}"]
        for key, value, default in (("module", module, None), ("a", a, "A"), ("b", b, "B"),
                                    ("out", out, "O")):
            if value is not None and value != default:
                options.append(f"{key}={value}")
        if cell_map is not None:
            options.append(f"cells={os.path.abspath(os.fspath(cell_map))}")
        m._spec = f"verilog:{netlist.path}?" + "&".join(options)
    return m


def _user_level():
    """The warnings stacklevel, seen from its caller, of the first frame outside the package."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and \
            os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _header_signedness(metadata):
    """(signed, reason) from the header's ``// spec = ...`` (approxmul writes it), or None.

    >>> _header_signedness({"spec": ("bam:bits=8,signed=1,hbl=0,vbl=7", "")})
    (True, 'its header says it was written as bam:bits=8,signed=1,hbl=0,vbl=7')
    """
    spec = str(metadata.get("spec", ("", ""))[0])
    match = re.fullmatch(r"[a-z_0-9]+:(?:.*,)?signed=([01])(?:,.*)?", spec)
    if match is None:
        return None
    return match.group(1) == "1", f"its header says it was written as {spec}"


def _products_fit_the_other_signedness(netlist, m, signed):
    """Why the products look written in the other signedness, or None (as for table files)."""
    from . import conventions

    try:
        other = netlist.multiplier(signed=not signed)
    except ApproxmulError:  # products outside the other reading's range
        return None
    assessed = [(bool(signed), "raw", m.metrics()["mae_percent"]),
                (not signed, "raw", other.metrics()["mae_percent"])]
    found = conventions.mismatch(assessed, bool(signed), "raw")
    if found is None:
        return None
    return (f"its products are {found[0]:.3g} % (MAE, of 4^n) away from the exact product, "
            f"and {found[1][2]:.3g} % read {'unsigned' if signed else 'signed'}")


def _is_inline(cell_map):
    return isinstance(cell_map, dict) or (isinstance(cell_map, str) and "=" in cell_map)


def from_spec(spec):
    """A Multiplier from ``verilog:PATH?options`` (options: signed, module, a, b, out, cells).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "e.v")
    >>> _ = open(path, "w").write(family_verilog("exact:bits=4"))
    >>> from_spec(f"verilog:{path}?signed=0").product(15, 15)
    225
    """
    from .specs import _flag, _options

    path, _, query = spec[len("verilog:"):].partition("?")
    if not path:
        raise InvalidArgumentError(f"verilog spec {spec!r}: expected verilog:PATH[?options]")
    o = _options(query, ("signed", "module", "a", "b", "out", "cells"), "verilog spec")
    return from_verilog(path, module=o.get("module"), a=o.get("a", "A"), b=o.get("b", "B"),
                        out=o.get("out", "O"), signed=_flag(o.get("signed", "0"), "signed"),
                        cell_map=o.get("cells"))


def family_verilog(spec):
    """A gate-level netlist (ports A, B, O) of a built-in family: exact, truncated or bam.

    AND/NAND partial products (Baugh-Wooley when signed), Wallace-style
    full/half-adder reduction and a ripple-carry final adder; reading it back
    gives the family's table exactly.

    >>> text = family_verilog("bam:bits=4,hbl=1,vbl=3")
    >>> text.splitlines()[1]
    '// spec = bam:bits=4,signed=0,hbl=1,vbl=3'
    """
    if not isinstance(spec, str) or "\0" in spec:
        raise InvalidArgumentError(f"spec: expected a family spec string, got {spec!r}")
    length = ffi.new("int64_t *")
    check(lib.approxmul_family_verilog(spec.encode(), ffi.NULL, 0, length))
    buffer = ffi.new("char[]", length[0])
    check(lib.approxmul_family_verilog(spec.encode(), buffer, length[0], length))
    return ffi.string(buffer).decode()


multipliers.netlist_support.update(from_verilog=from_verilog, from_spec=from_spec,
                                   family_verilog=family_verilog)
