"""Vendor C models (EvoApproxLib style) opened with cffi's ``dlopen``.

A signature is given as the C prototype, for example
``"uint64_t f(uint64_t b, uint64_t a)"`` (the function name and ``const`` are
ignored; the parameter names ``a`` and ``b`` say which operand goes where),
or by its short name:

==========  ===========================================  ============  =====
short name  prototype                                    default bits  signed
==========  ===========================================  ============  =====
u8          ``uint16_t f(uint8_t a, uint8_t b)``         8             no
s8          ``int16_t f(int8_t a, int8_t b)``            8             yes
u64ba       ``uint64_t f(uint64_t b, uint64_t a)``       8             no
u64         ``uint64_t f(uint64_t a, uint64_t b)``       8             no
u16         ``uint32_t f(uint16_t a, uint16_t b)``       16            no
s16         ``int32_t f(int16_t a, int16_t b)``          16            yes
==========  ===========================================  ============  =====

Signed circuits declared with unsigned types: pass ``signed=True``; the
operands then go in as n-bit two's-complement patterns and the result is
read as a 2n-bit two's-complement value.

Isolation: a model of up to 8 bits is tabulated once (4^bits calls). By
default that happens in a child Python process, so a model that crashes,
calls ``exit``/``abort`` or never returns costs an error naming the symbol
(:func:`tabulate_isolated`), not the caller's process. Wider models are
called from the kernels inside the caller's process: their faults remain
the caller's risk (docs/security.md). A symbol that the library's ELF
symbol table marks as data, not code, is refused before it is called.
"""

import os
import re
import signal
import struct
import subprocess
import sys
import tempfile

from cffi import FFI

from ._buffers import as_int
from ._library import check, ffi, lib
from .errors import CallbackError, InvalidArgumentError, LibraryIOError

#: seconds a child process may take to tabulate an 8-bit model (65536 calls)
TABULATE_TIMEOUT = 60.0

# short name, return type, parameter type, parameter order, default bits, C enum
SIGNATURES = (
    ("u8", "uint16_t", "uint8_t", "ab", 8, "APPROXMUL_SIG_U16_U8_U8"),
    ("s8", "int16_t", "int8_t", "ab", 8, "APPROXMUL_SIG_I16_I8_I8"),
    ("u64ba", "uint64_t", "uint64_t", "ba", 8, "APPROXMUL_SIG_U64_U64B_U64A"),
    ("u64", "uint64_t", "uint64_t", "ab", 8, "APPROXMUL_SIG_U64_U64_U64"),
    ("u16", "uint32_t", "uint16_t", "ab", 16, "APPROXMUL_SIG_U32_U16_U16"),
    ("s16", "int32_t", "int16_t", "ab", 16, "APPROXMUL_SIG_I32_I16_I16"),
)

_PROTOTYPE = re.compile(
    r"^\s*(\w+)\s*(?:\w+\s*)?\(\s*(\w+)\s+(\w+)\s*,\s*(\w+)\s+(\w+)\s*\)\s*;?\s*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


def prototype(entry):
    short, ret, param, order, *_ = entry
    return f"{ret} f({param} {order[0]}, {param} {order[1]})"


def parse_signature(signature):
    """The SIGNATURES entry a short name or C prototype denotes.

    >>> prototype(parse_signature("uint16_t mul8u(const uint8_t a, const uint8_t b)"))
    'uint16_t f(uint8_t a, uint8_t b)'
    """
    text = str(signature)
    for entry in SIGNATURES:
        if text.strip() == entry[0]:
            return entry
    match = _PROTOTYPE.match(re.sub(r"\bconst\b", " ", text))
    if match:
        ret, type_a, name_a, type_b, name_b = match.groups()
        order = (name_a + name_b).lower()
        for entry in SIGNATURES:
            if (ret, type_a, type_b, order) == (entry[1], entry[2], entry[2], entry[3]):
                return entry
    known = "; ".join(f"{e[0]}: {prototype(e)}" for e in SIGNATURES)
    raise InvalidArgumentError(
        f"signature: {text!r} is not a supported prototype; supported (short name: "
        f"prototype; parameter names a and b give the operand order): {known}")


def check_library(library_path, symbol):
    """The library's path, after the checks that need no dlopen (which runs its code)."""
    path = os.fspath(library_path)
    if not _IDENTIFIER.match(str(symbol)):
        raise InvalidArgumentError(f"symbol: {symbol!r} is not a C identifier")
    if os.path.isdir(path):
        raise LibraryIOError(f"library_path: {path} is a directory, not a shared library "
                             f"(e.g. cc -shared -fPIC model.c -o model.so)")
    if not os.path.isfile(path):
        raise LibraryIOError(f"library_path: {path} does not exist (expected a compiled shared "
                             f"library, e.g. cc -shared -fPIC model.c -o model.so)")
    kind = elf_symbol_kind(path, str(symbol))
    if kind not in (None, "function"):
        raise InvalidArgumentError(f"symbol {symbol!r} in {path} is {kind}, not a function; "
                                   f"calling it would crash")
    return path


def open_function(library_path, symbol, entry):
    """(approxmul_function pointer, objects to keep alive) for a symbol in a library."""
    path = check_library(library_path, symbol)
    model_ffi = FFI()  # one per model: the symbol's name and prototype are the user's
    _, ret, param, *_ = entry
    try:
        model_ffi.cdef(f"{ret} {symbol}({param}, {param});")
    except Exception as error:  # e.g. a symbol named like a C keyword
        raise InvalidArgumentError(f"symbol: cannot declare {symbol!r}: {error}") from None
    try:
        model_lib = model_ffi.dlopen(path)
    except OSError as error:
        raise LibraryIOError(f"cannot open {path} as a shared library: {error}") from None
    try:
        function = getattr(model_lib, symbol)
    except (AttributeError, NotImplementedError) as error:
        raise InvalidArgumentError(f"symbol {symbol!r} not found in {path}: {error}") from None
    address = int(model_ffi.cast("uintptr_t", function))
    return ffi.cast("approxmul_function", address), (model_ffi, model_lib)


# ELF st_info types (the low 4 bits): what a dynamic symbol names
_ELF_SYMBOL_KINDS = {0: "function", 1: "a data object", 2: "function", 3: "a section",
                     4: "a file name", 5: "a common data block", 6: "thread-local data",
                     10: "function"}  # 0: untyped (hand-written assembly); 10: GNU ifunc


def elf_symbol_kind(path, symbol):
    """What the ELF dynamic symbol table of ``path`` says ``symbol`` is.

    "function", a description of what else it is ("a data object", ...), or
    None when the file is not ELF (Mach-O, PE) or the table does not list
    the symbol; dlopen then stays the only check.

    >>> import os, subprocess, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "m.c"), "w").write("int table[4]; int f(void) { return 0; }")
    >>> _ = subprocess.run(["cc", "-shared", "-fPIC", "-o", os.path.join(d, "m.so"),
    ...                     os.path.join(d, "m.c")], check=True)
    >>> elf_symbol_kind(os.path.join(d, "m.so"), "f"), elf_symbol_kind(os.path.join(d, "m.so"), "table")
    ('function', 'a data object')
    """
    try:
        with open(path, "rb") as f:
            data = f.read(64 << 20)  # the dynamic tables sit near the start of any sane library
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] not in (1, 2) or data[5] not in (1, 2):
        return None
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    try:
        if wide:
            shoff, = struct.unpack_from(order + "Q", data, 0x28)
            shentsize, shnum = struct.unpack_from(order + "HH", data, 0x3A)
        else:
            shoff, = struct.unpack_from(order + "I", data, 0x20)
            shentsize, shnum = struct.unpack_from(order + "HH", data, 0x2E)
        sections = []
        for i in range(shnum):
            at = shoff + i * shentsize
            if wide:
                _, kind, _, _, offset, size, link, _, _, entsize = struct.unpack_from(
                    order + "IIQQQQIIQQ", data, at)
            else:
                _, kind, _, _, offset, size, link, _, _, entsize = struct.unpack_from(
                    order + "IIIIIIIIII", data, at)
            sections.append((kind, offset, size, link, entsize))
        wanted = symbol.encode()
        for kind, offset, size, link, entsize in sections:
            if kind != 11 or not entsize:  # SHT_DYNSYM
                continue
            _, strings_at, strings_size, _, _ = sections[link]
            strings = data[strings_at:strings_at + strings_size]
            for at in range(offset, offset + size, entsize):
                if wide:
                    name, info, _, shndx = struct.unpack_from(order + "IBBH", data, at)
                else:
                    name, _, _, info, _, shndx = struct.unpack_from(order + "IIIBBH", data, at)
                if shndx == 0 or strings[name:strings.find(b"\0", name)] != wanted:
                    continue  # undefined here (imported), or another name
                return _ELF_SYMBOL_KINDS.get(info & 0xF, "not a function")
    except (struct.error, IndexError):
        return None  # a truncated or odd file: dlopen has accepted it, leave it to that
    return None


def tabulate_isolated(library_path, symbol, entry, bits, signed, timeout=TABULATE_TIMEOUT):
    """The product table (bytes of 4^bits int32) of a model, computed in a child process.

    The child opens the library and tabulates the model through the same C
    function as the in-process route, so values and checks are identical. A
    crash, ``exit``, ``abort`` or a run longer than ``timeout`` seconds is a
    CallbackError naming the symbol; the library's own errors (a product out
    of range, ...) arrive with their usual class and message.
    """
    from . import errors
    from ._library import LIBRARY_PATH

    path = os.path.abspath(check_library(library_path, symbol))
    what = f"vendor model {symbol!r} in {path}"
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, APPROXMUL_LIBRARY=LIBRARY_PATH)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="approxmul-vendor-") as folder:
        result = os.path.join(folder, "result")
        command = [sys.executable, "-m", "approxmul_cffi.vendor", path, str(symbol), entry[0],
                   str(bits), str(int(signed)), result]
        try:
            child = subprocess.run(command, capture_output=True, timeout=timeout, env=env,
                                   cwd=folder)
        except subprocess.TimeoutExpired:  # run() has killed it
            raise CallbackError(f"{what}: tabulating {4 ** bits} products took more than "
                                f"{timeout:g} s (an endless loop?); the child process was "
                                f"killed") from None
        if os.path.exists(result):
            with open(result, "rb") as f:
                outcome = f.read()
        else:
            outcome = None
    if child.returncode < 0:
        try:
            name = signal.Signals(-child.returncode).name
        except ValueError:
            name = f"signal {-child.returncode}"
        raise CallbackError(f"{what} crashed with {name} while being tabulated in a child "
                            f"process")
    if outcome is None or child.returncode != 0:
        said = child.stderr.decode("utf-8", "replace").strip().splitlines()
        raise CallbackError(f"{what} ended its process (exit status {child.returncode}) while "
                            f"being tabulated" + (f": {said[-1]}" if said else ""))
    if outcome[:1] == b"E":  # the checks' own error, as the in-process route raises it
        name, message = outcome[1:].decode("utf-8", "replace").split("\n", 1)
        raise getattr(errors, name, CallbackError)(message)
    return outcome[1:]


def _child(path, symbol, short, bits, signed, result):
    """Tabulate in this (child) process: writes b"T" + table or b"E" + error class + message."""
    from ._library import check
    from .errors import ApproxmulError

    try:
        entry = parse_signature(short)
        function, keepalive = open_function(path, symbol, entry)
        out = ffi.new("approxmul_multiplier **")
        check(lib.approxmul_multiplier_from_c_function(function, signature_enum(entry), bits,
                                                       signed, symbol.encode(), out))
        size = 4 ** bits
        table = ffi.new("int32_t[]", size)
        check(lib.approxmul_multiplier_table(out[0], table, size))
        lib.approxmul_multiplier_destroy(out[0])
        payload = b"T" + bytes(ffi.buffer(table))
    except ApproxmulError as error:
        payload = b"E" + f"{type(error).__name__}\n{error}".encode()
    with open(result + ".part", "wb") as f:
        f.write(payload)
    os.replace(result + ".part", result)  # all or nothing



def signature_enum(entry):
    return getattr(lib, entry[5])


if __name__ == "__main__":
    _path, _symbol, _short, _bits, _signed, _result = sys.argv[1:7]
    _child(_path, _symbol, _short, int(_bits), bool(int(_signed)), _result)


def load_model(library_path, symbol, signature, *, bits=None, signed=None, isolate=True,
               timeout=TABULATE_TIMEOUT):
    """What :meth:`approxmul_cffi.Multiplier.from_c_function` wraps, as a dict.

    Keys: spec, signed, and either table (int32 bytes, from a child process:
    ``isolate`` and at most 8 bits) or handle and keepalive (the library,
    kept loaded only for models wider than 8 bits, which the kernels call).
    """
    entry = parse_signature(signature)
    bits = entry[4] if bits is None else as_int(bits, "bits")
    signed = entry[2].startswith("int") if signed is None else bool(signed)
    spec = (f"c:{os.path.abspath(os.fspath(library_path))}:{symbol}:{entry[0]}"
            f"?bits={bits}&signed={int(signed)}")
    if isolate and 1 <= bits <= 8:
        table = tabulate_isolated(library_path, symbol, entry, bits, signed, timeout)
        return {"spec": spec, "signed": signed, "table": table}
    function, keepalive = open_function(library_path, symbol, entry)
    out = ffi.new("approxmul_multiplier **")
    check(lib.approxmul_multiplier_from_c_function(
        function, signature_enum(entry), bits, signed, str(symbol).encode(), out))
    return {"spec": spec, "signed": signed, "handle": out[0],
            "keepalive": keepalive if bits > 8 else None}
