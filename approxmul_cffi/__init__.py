"""approxmul_cffi: approximate integer multipliers for neural-network studies.

A cffi ABI-mode binding of the approxmul C library: no compiler is needed at
import, it runs on CPython and PyPy, and NumPy is optional (any buffer works).

>>> import numpy as np, approxmul_cffi as am
>>> m = am.Multiplier.exact(bits=8)
>>> am.matmul(np.full((2, 3), 2, np.uint8), np.full((3, 2), 5, np.uint8), m).tolist()
[[30, 30], [30, 30]]
"""

from ._library import LIBRARY_PATH as _LIBRARY_PATH
from ._library import c_string as _c_string
from ._library import check as _check
from ._library import lib as _lib
from .errors import (
    AccumulatorOverflowError,
    AliasingError,
    ApproxmulError,
    CallbackError,
    DTypeError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    LibraryIOError,
    LibraryNotFoundError,
    OperandRangeError,
    OutOfMemoryError,
    ShapeError,
    UnsupportedError,
)
from .multipliers import Multiplier
from .ops import accumulator_dtype, bmm, conv2d, conv2d_output_shape, linear, matmul, multiply
from .specs import families, load_multiplier, multiplier
from . import threads  # noqa: F401  (registers approxmul with threadpoolctl)

__version__ = _c_string(_lib.approxmul_version_string())


def library_path():
    """Path of the shared library in use (APPROXMUL_LIBRARY or the packaged copy)."""
    return _LIBRARY_PATH


def set_num_threads(num_threads):
    """Threads for approxmul's kernels; 0 means one per core. Leaves OpenMP's own setting alone."""
    _check(_lib.approxmul_set_num_threads(num_threads))


def get_num_threads():
    """Threads approxmul's kernels use."""
    return _lib.approxmul_get_num_threads()


def info():
    """Build and CPU dispatch facts as a dict.

    Keys: version, abi, openmp, isa (the instruction set the kernels run on,
    or "unavailable" with isa_error when APPROXMUL_ISA forces one the CPU
    lacks), cpu_features, kernel.<plan> (the kernel each plan runs on),
    library, threads.

    >>> import approxmul_cffi as am
    >>> am.info()["isa"] in ("generic", "avx2", "avx512", "unavailable")
    True
    """
    text = _c_string(_lib.approxmul_build_info())
    facts = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    facts["library"] = _LIBRARY_PATH
    facts["threads"] = str(get_num_threads())
    return facts


# NumPy-based parts load on first use, so importing the package never needs NumPy.
_LAZY_MODULES = ("datasets", "evaluation", "nn", "quant")
_LAZY_FUNCTIONS = {"evaluate": "evaluation"}


def __getattr__(name):
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_FUNCTIONS:
        return getattr(importlib.import_module(f".{_LAZY_FUNCTIONS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AccumulatorOverflowError", "AliasingError", "ApproxmulError", "CallbackError",
    "DTypeError", "FormatError", "InternalError", "InvalidArgumentError", "LibraryIOError",
    "LibraryNotFoundError", "Multiplier", "OperandRangeError", "OutOfMemoryError",
    "ShapeError", "UnsupportedError", "accumulator_dtype", "bmm", "conv2d",
    "conv2d_output_shape", "families", "get_num_threads", "info", "library_path", "linear",
    "load_multiplier", "matmul", "multiplier", "multiply", "set_num_threads",
]
