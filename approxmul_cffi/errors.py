"""Exceptions raised by approxmul_cffi.

Every failure of the C library arrives as a status code and a message; the
message is kept and the status picks the class. Each class also derives from
the built-in exception a Python user would expect (ValueError, TypeError,
MemoryError, OSError), so ``except ValueError`` keeps working. Every
exception the package raises, from the C library or from Python (the
quantization and network modules included), is one of these classes.

>>> from approxmul_cffi import Multiplier, errors
>>> try:
...     Multiplier.exact(bits=99)
... except errors.InvalidArgumentError as error:
...     print(isinstance(error, ValueError), error.status)
True 1
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


class CancelledError(ApproxmulError, RuntimeError):
    """A long call stopped by ``approxmul_cancel()`` (Ctrl-C in another thread's wait)."""


class InternalError(ApproxmulError, RuntimeError):
    """A bug in approxmul; please report it with the message."""


class OutOfMemoryError(ApproxmulError, MemoryError):
    """The library could not allocate memory."""


class LibraryNotFoundError(ApproxmulError, ImportError):
    """The approxmul shared library could not be found or opened."""


class ModelError(ApproxmulError, ValueError):
    """A model, its files, its data or a multiplier assignment is invalid."""


class ApproximationError(InvalidArgumentError):
    """A framework model, layer, input or multiplier an adapter (torch, keras) cannot approximate."""


# The class of each approxmul_status, by the constant's name in the header;
# _library turns the names into the library's values (one source of truth).
STATUS_CLASSES = {
    "APPROXMUL_ERR_INVALID_ARGUMENT": InvalidArgumentError,
    "APPROXMUL_ERR_NULL_POINTER": InvalidArgumentError,
    "APPROXMUL_ERR_DTYPE": DTypeError,
    "APPROXMUL_ERR_SHAPE": ShapeError,
    "APPROXMUL_ERR_OVERFLOW": AccumulatorOverflowError,
    "APPROXMUL_ERR_OUT_OF_RANGE": OperandRangeError,
    "APPROXMUL_ERR_ALIASING": AliasingError,
    "APPROXMUL_ERR_OUT_OF_MEMORY": OutOfMemoryError,
    "APPROXMUL_ERR_UNSUPPORTED": UnsupportedError,
    "APPROXMUL_ERR_IO": LibraryIOError,
    "APPROXMUL_ERR_FORMAT": FormatError,
    "APPROXMUL_ERR_CALLBACK": CallbackError,
    "APPROXMUL_ERR_CANCELLED": CancelledError,
    "APPROXMUL_ERR_INTERNAL": InternalError,
}

__all__ = [
    "AccumulatorOverflowError", "AliasingError", "ApproximationError", "ApproxmulError", "CallbackError",
    "CancelledError", "DTypeError", "FormatError", "InternalError", "InvalidArgumentError", "LibraryIOError",
    "LibraryNotFoundError", "ModelError", "OperandRangeError", "OutOfMemoryError",
    "ShapeError", "UnsupportedError",
]
