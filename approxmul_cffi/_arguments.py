"""Python values that cannot become a C argument, reported by the parameter's name.

cffi converts each argument to its C type; a float, a string or an integer
beyond the type's range fails there with a TypeError or OverflowError that
names neither the function nor the parameter ("an integer is required").
The header's parameter names are the ones the Python functions use
(``a_zero_point``, ``bits``, ...), so the message can say which value is
wrong and what would fit.
"""

import re

from .errors import DTypeError, InvalidArgumentError

_PROTOTYPE = re.compile(r"(\w+)\s*\(([^()]*)\)\s*;")
_INTEGER_TYPES = {"int": 32, "int32_t": 32, "int64_t": 64}


def parameters(cdef):
    """{function name: [(C type, parameter name), ...]} from cdef text.

    >>> parameters("int approxmul_f(const int64_t *shape, int bits);")
    {'approxmul_f': [('const int64_t *', 'shape'), ('int', 'bits')]}
    """
    out = {}
    for name, params in _PROTOTYPE.findall(" ".join(cdef.split())):
        entries = []
        for param in filter(None, (p.strip() for p in params.split(","))):
            match = re.match(r"(.*?)(\w+)$", param)
            if match and param != "void":
                entries.append((match.group(1).strip(), match.group(2)))
        out[name] = entries
    return out


def _integer_range(ctype):
    if ctype in _INTEGER_TYPES:
        bits = _INTEGER_TYPES[ctype]
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if ctype.startswith("approxmul_") and "*" not in ctype:  # an enum: a C int
        return -(1 << 31), (1 << 31) - 1
    return None


def argument_error(ffi, function, params, args, error):
    """The error to raise for a conversion failure of ``function(*args)``.

    >>> from approxmul_cffi._library import ffi
    >>> p = {"approxmul_g": [("int64_t", "a_zero_point")]}["approxmul_g"]
    >>> str(argument_error(ffi, "approxmul_g", p, (1.5,), TypeError("x")))
    'a_zero_point: 1.5 is not an integer (float)'
    >>> str(argument_error(ffi, "approxmul_g", p, (2**70,), OverflowError("x")))
    'a_zero_point: 1180591620717411303424 is outside the int64_t range -2^63..2^63-1'
    """
    for (ctype, name), value in zip(params or (), args):
        limits = _integer_range(ctype)
        if limits is None:
            continue
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            return DTypeError(f"{name}: {value!r} is not an integer ({type(value).__name__})")
        low, high = limits
        if not low <= int(value) <= high:
            bits = (high + 1).bit_length() - 1
            return InvalidArgumentError(f"{name}: {int(value)} is outside the {ctype} range "
                                        f"-2^{bits}..2^{bits}-1")
    # not an integer parameter: keep cffi's words, with the function's name
    return DTypeError(f"{function}: an argument has the wrong type: {error}")
