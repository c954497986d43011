"""What the framework adapters (approxmul_cffi.torch, approxmul_cffi.keras) share, framework-free.

The multiplier mapping (layer names or glob patterns -> multipliers), the
quantization scheme argument and the gradient names mean the same in every
adapter; this module is their one definition.

>>> from approxmul_cffi.adapters import assign
>>> sorted((k, m.spec) for k, m in assign(["conv1", "conv2", "fc"], {"conv*": "drum:k=4"}).items())
[('conv1', 'drum:bits=8,signed=0,k=4'), ('conv2', 'drum:bits=8,signed=0,k=4')]
>>> config_of("percentile").calibration
'percentile'
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Mapping

from . import quant
from .errors import ApproximationError

__all__ = ["GRADIENTS", "ApproximationError", "LayerInfo", "assign", "check_bits", "check_gradient",
           "config_of", "table2d_columns", "with_width"]

GRADIENTS = ("ste", "table", "table2d", "none")


@dataclasses.dataclass
class LayerInfo:
    """One approximable layer, as each adapter's ``layers(model)`` lists it: qualified
    name, kind, weight shape, and where known its per-sample input/output shapes and
    multiply-accumulates."""

    name: str
    kind: str
    weight_shape: tuple
    input_shape: tuple | None = None
    output_shape: tuple | None = None
    macs: int | None = None


def _resolve(m):
    from .multipliers import multiplier
    return multiplier(m)


def assign(names, multipliers, kinds="Conv1d, Conv2d or Linear"):
    """{layer name: Multiplier} for the approximable layer ``names``.

    One multiplier for all, or a mapping whose keys are exact names (which
    win) or glob patterns (first match in the given order); a key matching
    no layer is an error that lists the model's layers.
    """
    names = list(names)
    if not names:
        raise ApproximationError(f"the model has no {kinds} layer to approximate")
    if not isinstance(multipliers, Mapping):
        m = _resolve(multipliers)
        return {name: m for name in names}
    if not multipliers:
        raise ApproximationError(f"the multiplier mapping is empty: it selects no layer; the "
                                 f"model's layers: {', '.join(names)}")
    out, unmatched = {}, []
    resolved = {pattern: _resolve(m) for pattern, m in multipliers.items()}
    for pattern in multipliers:  # exact names first, then patterns in the given order
        hits = [pattern] if pattern in names else fnmatch.filter(names, pattern)
        if not hits:
            unmatched.append(pattern)
        for name in hits:
            if name not in out or pattern == name:
                out[name] = resolved[pattern]
    if unmatched:
        raise ApproximationError(
            f"{', '.join(map(repr, unmatched))} match(es) no approximable layer; "
            f"the model's layers: {', '.join(names)}")
    return out


def check_bits(name, m, bits=8):
    """The quantized layers run ``bits``-bit codes: other multipliers are refused by layer name."""
    if getattr(m, "bits", None) != bits:
        raise ApproximationError(f"layer {name!r}: the quantized layers use {bits}-bit codes, got a "
                                 f"{getattr(m, 'bits', '?')}-bit multiplier (one model has one "
                                 "width: scheme={'bits': N} or multipliers of one width)")


# The gradient tables tabulate every operand value (C library limit)
MAX_GRADIENT_BITS = 12


def with_width(config, assignment, gradient):
    """``config`` with the width of the codes: its own ``bits`` when not 8, else the
    multipliers' common width; each multiplier is checked against it.

    >>> from approxmul_cffi import multiplier
    >>> with_width(quant.QuantConfig(), {"fc": multiplier("drum:bits=4,k=2")}, "ste").bits
    4
    """
    bits = config.width_for(m.bits for m in assignment.values())
    for name, m in assignment.items():
        check_bits(name, m, bits)
    if gradient in ("table", "table2d") and bits > MAX_GRADIENT_BITS:
        raise ApproximationError(f"gradient={gradient!r} tabulates every operand value: at most "
                                 f"{MAX_GRADIENT_BITS} bits, the layers have {bits}; use 'ste'")
    return config if bits == config.bits else dataclasses.replace(config, bits=bits)


def check_gradient(gradient):
    if gradient not in GRADIENTS:
        raise ApproximationError(f"gradient must be one of {', '.join(GRADIENTS)}, got {gradient!r}")


def config_of(scheme):
    """A QuantConfig from None, a QuantConfig, a dict of its fields or 'minmax'/'percentile'."""
    if scheme is None:
        return quant.QuantConfig()
    if isinstance(scheme, quant.QuantConfig):
        return scheme
    if isinstance(scheme, Mapping):
        return quant.QuantConfig(**scheme)
    if scheme in ("minmax", "percentile"):
        return quant.QuantConfig(calibration=scheme)
    raise ApproximationError(f"scheme must be a quant.QuantConfig, a dict of its fields or "
                             f"'minmax'/'percentile', got {scheme!r}")


# Gathered (rows, K, O) gradient-table entries at once in table2d_columns.
_GATHER_BUDGET = 1 << 22


def table2d_columns(cols, w, dy, tables, s_x, z_x, s_w, z_w, groups=1):
    """The "table2d" backward on im2col columns, in NumPy (docs/retraining.md).

    cols: (R, groups*K) input codes' bit patterns; w: (O, K) weight codes' bit
    patterns; dy: (R, O) upstream gradient; tables: (dM/da, dM/db) 2^n x 2^n;
    s_w: per output channel. Returns (grad of the columns (R, groups*K),
    grad of the weights (O, K)):
    ``s_w[o] (dM/da(x, w) - z_w)`` and ``s_x (dM/db(x, w) - z_x)`` summed
    against dy.

    >>> import numpy as np
    >>> a = np.tile(np.arange(256.0), (256, 1))           # dM/da(x, w) = w: the exact product
    >>> gx, gw = table2d_columns(np.array([[3]]), np.array([[5]]), np.array([[1.0]]),
    ...                          (a, a.T), 1.0, 0, np.array([1.0]), 0)
    >>> gx.tolist(), gw.tolist()
    ([[5.0]], [[3.0]])
    """
    import numpy as np  # the adapters need NumPy; the package without it does not import this
    side = len(tables[0])  # 2^n rows: one per bit pattern of an n-bit code
    grad_a, grad_b = (np.asarray(t).reshape(-1) for t in tables)
    rows, (o, k) = cols.shape[0], w.shape
    og = o // groups
    gcols, gw = np.empty((rows, groups * k)), np.empty((o, k))
    step = max(1, _GATHER_BUDGET // max(1, k * og))
    for g in range(groups):
        ck, oo = slice(g * k, (g + 1) * k), slice(g * og, (g + 1) * og)
        wg, d = w[oo].T[None].astype(np.int64), dy[:, oo]
        ds = d * np.asarray(s_w)[oo]
        acc = np.zeros((og, k))
        for r in range(0, rows, step):
            idx = cols[r:r + step, ck, None].astype(np.int64) * side + wg     # (b, K, Og)
            gcols[r:r + step, ck] = (np.einsum("bko,bo->bk", grad_a[idx], ds[r:r + step])
                                     - z_w * ds[r:r + step].sum(1, keepdims=True))
            acc += np.einsum("bko,bo->ok", grad_b[idx], d[r:r + step]) - z_x * d[r:r + step].sum(0)[:, None]
        gw[oo] = s_x * acc
    return gcols, gw
