"""approxmul_cffi: approximate integer multipliers for neural-network studies.

A cffi ABI-mode binding of the approxmul C library: no compiler is needed at
import, it runs on CPython and PyPy, and NumPy is optional (any buffer works).

>>> import numpy as np, approxmul_cffi as am
>>> m = am.Multiplier.exact(bits=8)
>>> am.matmul(np.full((2, 3), 2, np.uint8), np.full((3, 2), 5, np.uint8), m).tolist()
[[30, 30], [30, 30]]
"""

from ._library import c_string as _c_string
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
from . import errors
from .multipliers import Multiplier, load_multiplier, multiplier
from .ops import accumulator_dtype, bmm, conv2d, conv2d_output_shape, linear, matmul, multiply
from .runtime import get_num_threads, info, library_path, set_num_threads
from .specs import families
from . import verilog  # noqa: F401,E402 (plugs the netlist readers into multiplier())
from . import threads  # noqa: F401,E402 (registers approxmul with threadpoolctl)

__version__ = _c_string(_lib.approxmul_version_string())


# NumPy-based parts load on first use, so importing the package never needs NumPy.
_LAZY_MODULES = ("datasets", "evaluation", "nn", "quant", "requant")
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
    "conv2d_output_shape", "errors", "families",
    "get_num_threads", "info", "library_path", "linear", "load_multiplier", "matmul",
    "multiplier", "multiply", "set_num_threads", "threads",
]
