"""Exceptions raised by approxmul_cffi.

Every failure of the C library arrives as a status code and a message; the
message is kept and the status picks the class. Each class also derives from
the built-in exception a Python user would expect (ValueError, TypeError,
MemoryError, OSError), so ``except ValueError`` keeps working.

>>> import approxmul_cffi as am
>>> try:
...     am.Multiplier.exact(bits=0)
... except ValueError as error:
...     print(type(error).__name__, error.status, error)
InvalidArgumentError 1 bits: 0 is not an operand width in 1..16
"""


class ApproxmulError(Exception):
    """Base class of every error approxmul_cffi raises."""

    #: the approxmul_status code from the C library, or None for Python-side checks
    status = None


class InvalidArgumentError(ApproxmulError, ValueError):
    """An argument's value makes no sense (including a NULL pointer at the C level)."""


class DTypeError(ApproxmulError, TypeError):
    """An element type the operation does not accept."""


class ShapeError(ApproxmulError, ValueError):
    """Sizes that do not match, or a negative size."""


class AccumulatorOverflowError(ApproxmulError, ValueError, OverflowError):
    """A size computation or an accumulator would overflow."""


class OperandRangeError(ApproxmulError, ValueError):
    """An operand value outside the multiplier's operand width."""


class AliasingError(ApproxmulError, ValueError):
    """An output overlaps an input or itself."""


class UnsupportedError(ApproxmulError, ValueError):
    """A valid request this build or this CPU cannot serve."""


class FormatError(ApproxmulError, ValueError):
    """A file or text whose content is malformed."""


class LibraryIOError(ApproxmulError, OSError):
    """A file could not be read or written."""


class CallbackError(ApproxmulError, RuntimeError):
    """A user-supplied function failed."""


class InternalError(ApproxmulError, RuntimeError):
    """A bug in approxmul; please report it with the message."""


class OutOfMemoryError(ApproxmulError, MemoryError):
    """The library could not allocate memory."""


class LibraryNotFoundError(ApproxmulError, ImportError):
    """The approxmul shared library could not be found or opened."""


# approxmul_status value -> exception class (see capi/include/approxmul.h)
STATUS_ERRORS = {
    1: InvalidArgumentError,
    2: InvalidArgumentError,
    3: DTypeError,
    4: ShapeError,
    5: AccumulatorOverflowError,
    6: OperandRangeError,
    7: AliasingError,
    8: OutOfMemoryError,
    9: UnsupportedError,
    10: LibraryIOError,
    11: FormatError,
    12: CallbackError,
    99: InternalError,
}
