"""Derivatives of a multiplier's product table, for training through it.

Computed by the C library (``approxmul_multiplier_gradient_table`` and
``_slopes``); docs/retraining.md gives the definitions. Results are NumPy
float64 arrays indexed like :meth:`Multiplier.table`: by the operands' raw bit
patterns (for signed operands, index ``v & 0xFF`` holds value ``v``).

Example:
    >>> import approxmul_cffi as am
    >>> from approxmul_cffi.gradients import gradient_slopes, gradient_table
    >>> exact = am.Multiplier.exact(bits=8)
    >>> float(gradient_table(exact, "a")[200, 7])     # dM/da at (200, 7) = 7
    7.0
    >>> round(float(gradient_slopes(exact, "b")[9]), 9)   # dM/db for a = 9
    9.0
"""

from ._library import check, ffi, lib
from .errors import InvalidArgumentError

__all__ = ["DEFAULT_HALF_WINDOW", "gradient_slopes", "gradient_table"]

# Half width of the central-difference window of the 2-D tables.
DEFAULT_HALF_WINDOW = 2

_OPERANDS = {"a": 0, "b": 1}


def _operand(operand):
    if operand not in _OPERANDS:
        raise InvalidArgumentError(f"operand must be 'a' (activation, first) or 'b' "
                                   f"(weight, second), got {operand!r}")
    return _OPERANDS[operand]


def _handle(m):
    from .multipliers import multiplier
    return (multiplier(m) if isinstance(m, str) else m).handle


def gradient_table(m, operand, half_window=DEFAULT_HALF_WINDOW):
    """dM/d(operand) at every operand pair, 2^n x 2^n, by smoothed central differences.

    ``operand`` "a" differentiates along the first (row, activation) operand,
    "b" along the second (weight). ``m``: a Multiplier or a spec string.

    >>> g = gradient_table("drum:k=3", "b", half_window=1)
    >>> g.shape, g.dtype.name
    ((256, 256), 'float64')
    """
    import numpy as np

    handle, which = _handle(m), _operand(operand)
    side = 1 << _bits(handle)
    out = np.empty((side, side), dtype=np.float64)
    with ffi.from_buffer("double[]", out) as pointer:
        check(lib.approxmul_multiplier_gradient_table(handle, which, int(half_window), pointer,
                                                      side * side))
    return out


def gradient_slopes(m, operand):
    """Least-squares slope of M along ``operand``, one per value of the other operand.

    ``gradient_slopes(m, "a")[b]`` is the slope of ``a -> M(a, b)``; the
    exact multiplier gives ``b``.

    >>> import approxmul_cffi as am
    >>> round(float(gradient_slopes(am.Multiplier.exact(bits=8, signed=True), "a")[255]), 9)
    -1.0
    """
    import numpy as np

    handle, which = _handle(m), _operand(operand)
    side = 1 << _bits(handle)
    out = np.empty(side, dtype=np.float64)
    with ffi.from_buffer("double[]", out) as pointer:
        check(lib.approxmul_multiplier_gradient_slopes(handle, which, pointer, side))
    return out


def _bits(handle):
    """Operand width of a multiplier handle."""
    bits = ffi.new("int *")
    check(lib.approxmul_multiplier_bits(handle, bits))
    return bits[0]
