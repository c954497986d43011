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

import fnmatch
from collections.abc import Mapping

from . import quant
from .errors import ApproximationError

__all__ = ["GRADIENTS", "ApproximationError", "assign", "check_bits", "check_gradient", "config_of"]

GRADIENTS = ("ste", "table", "table2d", "none")


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


def check_bits(name, m):
    """The quantized layers run 8-bit codes: other multipliers are refused by layer name."""
    if getattr(m, "bits", None) != 8:
        raise ApproximationError(f"layer {name!r}: the quantized layers use 8-bit codes, got a "
                                 f"{getattr(m, 'bits', '?')}-bit multiplier")


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
