"""Exhaustive error metrics and error maps of a multiplier handle (definitions: docs/metrics.md)."""

import array

from ._library import check, ffi, lib
from .errors import UnsupportedError

METRICS = ("mae", "mae_percent", "mse", "wce", "wce_percent", "wcre_percent", "mre_percent",
           "ep_percent", "bias", "error_std", "min_error", "max_error", "pairs",
           "zero_product_pairs")


def metrics(handle):
    """The metrics dict of :meth:`approxmul_cffi.Multiplier.metrics`.

    >>> from approxmul_cffi import Multiplier
    >>> metrics(Multiplier.from_spec("truncated:cut=8").handle)["wce"]
    1793
    """
    out = ffi.new("approxmul_metrics *")
    check(lib.approxmul_multiplier_metrics(handle, out))
    values = {name: getattr(out, name) for name in METRICS}
    values["wce"] = int(values["wce"])
    return values


def error_map(handle, bits):
    """The error map of :meth:`approxmul_cffi.Multiplier.error_map` (NumPy array or memoryview).

    >>> from approxmul_cffi import Multiplier
    >>> error_map(Multiplier.from_spec("mitchell:bits=2").handle, 2).tolist()[3]
    [0, 0, 0, -1]
    """
    if bits > 12:  # refused before allocating 8 * 4^bits bytes
        raise UnsupportedError(f"error_map: {bits}-bit operands make {4 ** bits} "
                               f"pairs; at most 12 bits (metrics() covers any width)")
    side = 1 << bits
    try:
        import numpy as np
    except ImportError:
        np = None
    out = (np.empty((side, side), dtype=np.int64) if np is not None
           else array.array("q", bytes(8 * side * side)))
    with ffi.from_buffer("int64_t[]", out) as pointer:
        check(lib.approxmul_multiplier_error_map(handle, pointer, side * side))
    return out if np is not None else memoryview(out).cast("B").cast("q", shape=[side, side])
