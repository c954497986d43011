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
"""

import os
import re

from cffi import FFI

from ._library import ffi, lib
from .errors import InvalidArgumentError, LibraryIOError

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


def open_function(library_path, symbol, entry):
    """(approxmul_function pointer, objects to keep alive) for a symbol in a library."""
    path = os.fspath(library_path)
    if not _IDENTIFIER.match(str(symbol)):
        raise InvalidArgumentError(f"symbol: {symbol!r} is not a C identifier")
    if not os.path.isfile(path):
        raise LibraryIOError(f"library_path: {path} does not exist (expected a compiled shared "
                             f"library, e.g. cc -shared -fPIC model.c -o model.so)")
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


def signature_enum(entry):
    return getattr(lib, entry[5])
