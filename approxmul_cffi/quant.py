"""Affine 8-bit quantization and integer requantization, NumPy only.

A real value ``r`` is represented by an integer code ``q`` as
``r = scale * (q - zero_point)``. Two code domains exist, one per multiplier
signedness:

* unsigned: ``uint8`` codes 0..255 (TFApprox style),
* signed: ``int8`` codes -128..127 (TFLite / AdaPT style).

The same real grid can be written in both domains: a ``uint8`` tensor with
zero point ``z`` is the ``int8`` tensor with zero point ``z - 128`` and codes
``q - 128`` (:func:`convert_codes`), so layers whose multipliers differ in
signedness chain without loss.

Requantization follows gemmlowp/TFLite: the real factor
``s_in * s_w / s_out`` is a positive int32 mantissa and a power-of-two shift
(:func:`quantize_multiplier`), applied with
:func:`multiply_by_quantized_multiplier`. See docs/quantization.md.

Example:
    >>> import numpy as np
    >>> from approxmul_cffi import quant
    >>> qp = quant.choose_qparams(-1.0, 3.0, signed=False)
    >>> qp.quantize(np.array([-1.0, 0.0, 3.0])).tolist()
    [0, 64, 255]
    >>> qp.to_domain(signed=True).zero_point.item()
    -64
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = [
    "QParams",
    "QuantConfig",
    "activation_bounds",
    "choose_qparams",
    "code_range",
    "convert_codes",
    "fold_batchnorm",
    "multiply_by_quantized_multiplier",
    "observe_range",
    "quantize_bias",
    "quantize_multiplier",
    "quantize_weight",
    "requantize",
    "round_half_away",
]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
ROUNDINGS = ("double", "single")


def code_range(signed, narrow=False):
    """(qmin, qmax) of the 8-bit code domain.

    ``narrow`` drops the most negative code so that a symmetric grid is
    symmetric (-127..127 or 1..255), as TFLite does for int8 weights.

    >>> code_range(True), code_range(False), code_range(True, narrow=True)
    ((-128, 127), (0, 255), (-127, 127))
    """
    qmin, qmax = (-128, 127) if signed else (0, 255)
    return (qmin + 1 if narrow else qmin), qmax


def round_half_away(x):
    """Round to nearest, ties away from zero (C ``round``, TFLite's choice).

    >>> round_half_away(np.array([-2.5, -0.5, 0.5, 1.5, 2.5])).tolist()
    [-3.0, -1.0, 1.0, 2.0, 3.0]
    """
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _channel_shape(ndim, axis):
    shape = [1] * ndim
    shape[axis] = -1
    return shape


@dataclasses.dataclass(frozen=True)
class QParams:
    """Scale(s) and zero point(s) of one tensor in one code domain.

    ``scale`` and ``zero_point`` are 0-d arrays (per tensor) or 1-d arrays
    along ``axis`` (per channel). ``narrow`` marks a grid that never uses the
    most negative code.

    >>> qp = QParams(np.array([0.5, 0.25]), np.array([0, 0]), signed=True, axis=0)
    >>> qp.quantize(np.array([[1.0, -1.0], [1.0, -1.0]])).tolist()
    [[2, -2], [4, -4]]
    """

    scale: np.ndarray
    zero_point: np.ndarray
    signed: bool
    axis: int | None = None
    narrow: bool = False

    def __post_init__(self):
        scale = np.asarray(self.scale, dtype=np.float64)
        zp = np.asarray(self.zero_point, dtype=np.int64)
        if scale.shape != zp.shape or scale.ndim > 1:
            raise ValueError(
                f"scale {scale.shape} and zero_point {zp.shape} must be equal "
                "0-d or 1-d shapes"
            )
        if (scale.ndim == 1) != (self.axis is not None):
            raise ValueError("per-channel parameters need an axis, per-tensor ones none")
        if not np.all(np.isfinite(scale) & (scale > 0)):
            raise ValueError(f"scales must be finite and positive, got {scale}")
        qmin, qmax = code_range(self.signed, self.narrow)
        if np.any(zp < qmin) or np.any(zp > qmax):
            raise ValueError(f"zero point {zp} outside the code range {qmin}..{qmax}")
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "zero_point", zp)

    @property
    def dtype(self):
        return np.dtype(np.int8 if self.signed else np.uint8)

    @property
    def qmin(self):
        return code_range(self.signed, self.narrow)[0]

    @property
    def qmax(self):
        return code_range(self.signed, self.narrow)[1]

    @property
    def per_channel(self):
        return self.axis is not None

    def _broadcast(self, ndim):
        if self.axis is None:
            return self.scale, self.zero_point
        shape = _channel_shape(ndim, self.axis)
        return self.scale.reshape(shape), self.zero_point.reshape(shape)

    def quantize(self, x):
        """Codes for real values: round half away from zero, then clamp."""
        x = np.asarray(x, dtype=np.float64)
        scale, zp = self._broadcast(x.ndim)
        q = round_half_away(x / scale) + zp
        return np.clip(q, self.qmin, self.qmax).astype(self.dtype)

    def dequantize(self, codes):
        """Real values (float64) of codes."""
        scale, zp = self._broadcast(np.ndim(codes))
        return scale * (np.asarray(codes, dtype=np.int64) - zp)

    def to_domain(self, signed):
        """The same real grid in the other code domain (zero point +-128)."""
        if signed == self.signed:
            return self
        shift = -128 if signed else 128
        return QParams(self.scale, self.zero_point + shift, signed, self.axis, self.narrow)

    def to_dict(self):
        return {
            "scale": self.scale.tolist(),
            "zero_point": self.zero_point.tolist(),
            "signed": self.signed,
            "axis": self.axis,
            "narrow": self.narrow,
        }


def convert_codes(codes, signed):
    """Codes in the requested domain; exact (q - 128 is q XOR 0x80 in 8 bits).

    >>> convert_codes(np.array([0, 128, 255], np.uint8), signed=True).tolist()
    [-128, 0, 127]
    """
    codes = np.asarray(codes)
    if codes.dtype == (np.int8 if signed else np.uint8):
        return codes
    if codes.dtype not in (np.int8, np.uint8):
        raise TypeError(f"codes must be int8 or uint8, got {codes.dtype}")
    return (codes.view(np.uint8) ^ np.uint8(0x80)).view(np.int8 if signed else np.uint8)


def observe_range(x, *, method="minmax", percentile=99.99, axis=None):
    """(lo, hi) of sample data, over all values or per channel along ``axis``.

    ``method="percentile"`` clips outliers: lo and hi are the
    ``100 - percentile`` and ``percentile`` percentiles.

    >>> x = np.arange(1001, dtype=float)
    >>> observe_range(x), observe_range(x, method="percentile", percentile=99)
    ((0.0, 1000.0), (10.0, 990.0))
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        raise ValueError("cannot observe the range of an empty array")
    if not np.all(np.isfinite(x)):
        raise ValueError("calibration data contains NaN or infinity")
    reduce = None
    if axis is not None:
        axis = axis % x.ndim
        reduce = tuple(i for i in range(x.ndim) if i != axis)
    if method == "minmax":
        lo, hi = x.min(axis=reduce), x.max(axis=reduce)
    elif method == "percentile":
        if not 50 < percentile <= 100:
            raise ValueError(f"percentile must be in (50, 100], got {percentile}")
        lo = np.percentile(x, 100 - percentile, axis=reduce)
        hi = np.percentile(x, percentile, axis=reduce)
    else:
        raise ValueError(f"unknown calibration method {method!r}; use 'minmax' or 'percentile'")
    if axis is None:
        return float(lo), float(hi)
    return lo, hi


def choose_qparams(lo, hi, *, signed, symmetric=False, narrow=False, axis=None):
    """QParams covering [lo, hi] (scalars, or 1-d arrays for per channel).

    The range is widened to contain 0 so that real zero (ReLU output,
    padding) has an exact code. Asymmetric: the range maps onto the whole
    code range. Symmetric: zero point 0 (signed) or 128 (unsigned) and
    ``scale = max(|lo|, |hi|) / 127``.

    >>> qp = choose_qparams(-0.5, 1.0, signed=True, symmetric=True)
    >>> float(qp.scale * 127), int(qp.zero_point)
    (1.0, 0)
    """
    lo = np.minimum(np.asarray(lo, dtype=np.float64), 0.0)
    hi = np.maximum(np.asarray(hi, dtype=np.float64), 0.0)
    if lo.shape != hi.shape or lo.ndim > 1:
        raise ValueError("lo and hi must be scalars or equal 1-d arrays")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError("range bounds must be finite")
    qmin, qmax = code_range(signed, narrow)
    if symmetric:
        zp = np.full(lo.shape, 0 if signed else 128, dtype=np.int64)
        amax = np.maximum(-lo, hi)
        scale = amax / 127.0
    else:
        scale = (hi - lo) / (qmax - qmin)
    # An all-zero tensor: any positive scale represents it exactly.
    scale = np.where(scale > 0, scale, 1.0)
    if not symmetric:
        zp = np.clip(qmin - round_half_away(lo / scale), qmin, qmax).astype(np.int64)
    if axis is None and scale.ndim == 1:
        raise ValueError("per-channel ranges need an axis")
    return QParams(scale, zp, signed, axis if scale.ndim == 1 else None, narrow)


def quantize_weight(w, *, signed, per_channel=True, symmetric=True, axis=0):
    """(codes, QParams) of a weight tensor, min/max calibrated.

    Symmetric weights use the narrow grid (-127..127, or 1..255 unsigned).

    >>> w = np.array([[1.0, -0.5], [0.1, 0.25]])
    >>> codes, qp = quantize_weight(w, signed=True)
    >>> codes.tolist()
    [[127, -64], [51, 127]]
    """
    w = np.asarray(w, dtype=np.float64)
    lo, hi = observe_range(w, axis=axis if per_channel else None)
    qp = choose_qparams(
        lo, hi, signed=signed, symmetric=symmetric, narrow=symmetric,
        axis=axis if per_channel else None,
    )
    return qp.quantize(w), qp


def quantize_bias(bias, input_scale, weight_scale):
    """int32 bias codes in the accumulator's scale ``s_x * s_w`` (zero point 0).

    >>> quantize_bias(np.array([0.5, -0.25]), 0.1, np.array([0.5, 0.25])).tolist()
    [10, -10]
    """
    scale = np.asarray(input_scale, dtype=np.float64) * np.asarray(weight_scale, dtype=np.float64)
    q = round_half_away(np.asarray(bias, dtype=np.float64) / scale)
    if np.any(q < INT32_MIN) or np.any(q > INT32_MAX):
        raise ValueError("bias does not fit int32 in the accumulator scale s_x*s_w")
    return q.astype(np.int32)


def fold_batchnorm(weight, bias, gamma, beta, mean, var, eps=1e-5):
    """Fold an inference-mode batch norm into the preceding conv/linear.

    ``BN(conv(x, w) + b) == conv(x, w') + b'`` with
    ``w' = w * gamma / sqrt(var + eps)`` per output channel (axis 0) and
    ``b' = (b - mean) * gamma / sqrt(var + eps) + beta``.

    >>> w, b = fold_batchnorm(np.ones((2, 1)), None, np.array([2.0, 1.0]),
    ...                       np.array([0.0, 1.0]), np.zeros(2), np.ones(2), eps=0.0)
    >>> w.ravel().tolist(), b.tolist()
    ([2.0, 1.0], [0.0, 1.0])
    """
    weight = np.asarray(weight, dtype=np.float64)
    factor = np.asarray(gamma, dtype=np.float64) / np.sqrt(np.asarray(var, dtype=np.float64) + eps)
    if factor.shape != (weight.shape[0],):
        raise ValueError(
            f"batch norm has {factor.size} channels, the layer {weight.shape[0]} outputs"
        )
    bias = np.zeros(weight.shape[0]) if bias is None else np.asarray(bias, dtype=np.float64)
    w = weight * factor.reshape(_channel_shape(weight.ndim, 0))
    b = (bias - np.asarray(mean, dtype=np.float64)) * factor + np.asarray(beta, dtype=np.float64)
    return w, b


def quantize_multiplier(real):
    """(mantissa, shift) with ``real ~= mantissa * 2**(shift - 31)``.

    The mantissa is an int32 in [2**30, 2**31) (0 for real 0), as in
    TFLite's ``QuantizeMultiplier``; a positive shift is a left shift.
    Works elementwise on arrays.

    >>> m, s = quantize_multiplier(0.75)
    >>> int(m), int(s), int(m) * 2.0 ** (int(s) - 31)
    (1610612736, 0, 0.75)
    """
    real = np.asarray(real, dtype=np.float64)
    if np.any(real < 0) or not np.all(np.isfinite(real)):
        raise ValueError("requantization factors must be finite and non-negative")
    frac, exp = np.frexp(real)
    mantissa = round_half_away(frac * 2.0**31).astype(np.int64)
    carry = mantissa == 2**31
    mantissa = np.where(carry, mantissa // 2, mantissa)
    exp = np.where(carry, exp + 1, exp).astype(np.int64)
    # Below 2**-31 every int32 accumulator rounds to 0 anyway.
    tiny = (exp < -31) | (mantissa == 0)
    mantissa = np.where(tiny, 0, mantissa)
    exp = np.where(tiny, 0, exp)
    if np.any(exp > 30):
        raise ValueError("requantization factor too large (>= 2**30)")
    return mantissa.astype(np.int32), exp.astype(np.int32)


def _trunc_shift(x, n):
    """x / 2**n truncated toward zero, like C integer division."""
    # Negative x: adding 2**n - 1 before the flooring shift makes it truncate.
    return (x + ((x >> 63) & ((1 << n) - 1))) >> n


def _saturate_int32(x):
    return np.clip(x, INT32_MIN, INT32_MAX)


def multiply_by_quantized_multiplier(x, mantissa, shift, rounding="double"):
    """Integer ``x * mantissa * 2**(shift - 31)`` rounded as TFLite does.

    ``rounding="double"`` is gemmlowp's
    ``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << left, m), right)``:
    two roundings: the doubling high multiply rounds ties upward, the
    power-of-two division rounds ties away from zero.
    ``rounding="single"`` is TFLite's ``TFLITE_SINGLE_ROUNDING``:
    ``(x * m + 2**(30 - shift)) >> (31 - shift)``, one rounding, ties up.
    ``x`` is saturated to int32 first (and again after a left shift), as a
    saturating int32 datapath would. Returns int64.

    >>> m, s = quantize_multiplier(0.25)
    >>> multiply_by_quantized_multiplier(np.array([-6, -2, 2, 6]), m, s).tolist()
    [-2, -1, 1, 2]
    >>> multiply_by_quantized_multiplier(np.array([-6, -2, 2, 6]), m, s, "single").tolist()
    [-1, 0, 1, 2]
    """
    x = _saturate_int32(np.asarray(x, dtype=np.int64))
    m = np.asarray(mantissa, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if rounding == "double":
        left = np.maximum(shift, 0)
        right = np.maximum(-shift, 0)
        x = _saturate_int32(x << left)
        prod = x * m  # |x|, |m| < 2**31: fits int64
        nudge = np.where(prod >= 0, 1 << 30, 1 - (1 << 30))
        high = _trunc_shift(prod + nudge, 31)
        mask = (np.int64(1) << right) - 1
        remainder = high & mask
        threshold = (mask >> 1) + (high < 0)
        return (high >> right) + (remainder > threshold)
    if rounding == "single":
        total = 31 - shift
        return (x * m + (np.int64(1) << (total - 1))) >> total
    raise ValueError(f"unknown rounding {rounding!r}; use one of {ROUNDINGS}")


def requantize(acc, bias, mantissa, shift, zero_point, qmin, qmax, *, axis=1,
               signed=True, rounding="double"):
    """Output codes from accumulators, as integer inference hardware does.

    ``codes = clamp(zero_point + MBQM(sat32(acc + bias), mantissa, shift), qmin, qmax)``
    where MBQM is :func:`multiply_by_quantized_multiplier`; ``bias``,
    ``mantissa`` and ``shift`` are scalars or per channel along ``axis``.
    A fused ReLU/ReLU6 is only a tighter ``qmin``/``qmax``
    (:func:`activation_bounds`). Runs in the C library
    (``approxmul_requantize``); :func:`requantize_reference` is the same
    arithmetic in NumPy.

    >>> m, s = quantize_multiplier(0.1)
    >>> requantize(np.array([[100, -100, 5000]]), 0, m, s, 3, -128, 127).tolist()
    [[13, -7, 127]]
    """
    from . import _library
    from ._buffers import DTYPES

    acc = np.asarray(acc)
    if acc.dtype not in (np.int32, np.int64) or acc.ndim < 2 or rounding not in ROUNDINGS:
        return requantize_reference(acc, bias, mantissa, shift, zero_point, qmin, qmax,
                                    axis=axis, signed=signed, rounding=rounding)
    axis = axis % acc.ndim
    acc = np.ascontiguousarray(np.moveaxis(acc, axis, 1)) if axis != 1 else \
        np.ascontiguousarray(acc)
    channels = acc.shape[1]

    def per_channel(v, name):
        if isinstance(v, np.ndarray) and v.dtype == np.int32:  # fits int32 by its type
            if v.shape == (channels,) and v.flags.c_contiguous:
                return v  # as QuantizedModel's layers keep them: no copy, no checks
            if not v.ndim:
                return np.full(channels, v, dtype=np.int32)
        v = np.asarray(v, dtype=np.int64)
        if v.ndim and v.shape != (channels,):
            raise ValueError(f"{name}: {v.shape[0]} values for {channels} channels")
        if np.any(v < INT32_MIN) or np.any(v > INT32_MAX):
            raise ValueError(f"{name}: values must fit int32")
        return np.ascontiguousarray(np.broadcast_to(v, (channels,)), dtype=np.int32)

    bias, mantissa, shift = (per_channel(v, n) for v, n in
                             ((bias, "bias"), (mantissa, "mantissa"), (shift, "shift")))
    out_dtype = np.int8 if signed else np.uint8
    out = np.empty(acc.shape, dtype=out_dtype)
    ffi, lib = _library.ffi, _library.lib
    rounding_code = {"double": lib.APPROXMUL_ROUND_DOUBLE,
                     "single": lib.APPROXMUL_ROUND_SINGLE}[rounding]
    # exports released right after the call (see _buffers.Tensor)
    with ffi.from_buffer(acc) as acc_p, ffi.from_buffer("int32_t[]", bias) as bias_p, \
            ffi.from_buffer("int32_t[]", mantissa) as mantissa_p, \
            ffi.from_buffer("int32_t[]", shift) as shift_p, \
            ffi.from_buffer(out, require_writable=True) as out_p:
        _library.check(lib.approxmul_requantize(
            acc.shape[0], channels, acc[0, 0].size if acc.size else 0,
            DTYPES[acc.dtype.name], acc_p, bias_p, mantissa_p, shift_p, int(zero_point),
            int(qmin), int(qmax), rounding_code, DTYPES[out.dtype.name], out_p))
    return np.moveaxis(out, 1, axis) if axis != 1 else out


def requantize_reference(acc, bias, mantissa, shift, zero_point, qmin, qmax, *, axis=1,
               signed=True, rounding="double"):
    """NumPy statement of :func:`requantize`: the arithmetic, spelled out.

    :func:`requantize` runs the same arithmetic in the C library; the two
    are tested to agree bit for bit. Use this one to read or to check.

    ``codes = clamp(zero_point + MBQM(sat32(acc + bias), mantissa, shift), qmin, qmax)``
    where MBQM is :func:`multiply_by_quantized_multiplier`; ``bias``,
    ``mantissa`` and ``shift`` are scalars or per channel along ``axis``.
    A fused ReLU/ReLU6 is only a tighter ``qmin``/``qmax``
    (:func:`activation_bounds`).

    >>> m, s = quantize_multiplier(0.1)
    >>> requantize(np.array([[100, -100, 5000]]), 0, m, s, 3, -128, 127).tolist()
    [[13, -7, 127]]
    """
    acc = np.asarray(acc, dtype=np.int64)

    def along(v):
        v = np.asarray(v, dtype=np.int64)
        return v.reshape(_channel_shape(acc.ndim, axis)) if v.ndim == 1 else v

    total = _saturate_int32(np.clip(acc, -2**32, 2**32) + along(bias))  # no int64 wrap
    y = multiply_by_quantized_multiplier(total, along(mantissa), along(shift), rounding)
    y = np.clip(y + zero_point, qmin, qmax)
    return y.astype(np.int8 if signed else np.uint8)


def activation_bounds(qparams, activation=None):
    """(qmin, qmax) of a layer output with a fused activation clamp.

    ReLU clamps at the code of 0.0; ReLU6 also at the code of 6.0.

    >>> qp = choose_qparams(-2.0, 8.0, signed=False)
    >>> activation_bounds(qp), activation_bounds(qp, "relu"), activation_bounds(qp, "relu6")
    ((0, 255), (51, 255), (51, 204))
    """
    qmin, qmax = qparams.qmin, qparams.qmax
    zp = int(qparams.zero_point)
    if activation is None:
        return qmin, qmax
    if activation == "relu":
        return max(qmin, zp), qmax
    if activation == "relu6":
        six = zp + int(round_half_away(6.0 / float(qparams.scale)))
        return max(qmin, zp), min(qmax, six)
    raise ValueError(f"unknown fused activation {activation!r}")


@dataclasses.dataclass(frozen=True)
class QuantConfig:
    """How a float model is quantized.

    Activations are always per tensor; ``activation_symmetric`` picks a
    zero point of 0 (int8) / 128 (uint8) instead of the calibrated one.
    Signed layers default to symmetric per-channel int8 weights (TFLite);
    unsigned layers to asymmetric per-tensor uint8 weights (TFApprox).
    Weight zero points must be one per tensor, since the kernels take a
    scalar zero point: per-channel weights are therefore symmetric.
    """

    calibration: str = "minmax"
    percentile: float = 99.99
    activation_symmetric: bool = False
    signed_per_channel: bool = True
    signed_symmetric: bool = True
    unsigned_per_channel: bool = False
    unsigned_symmetric: bool = False
    rounding: str = "double"

    def __post_init__(self):
        if self.calibration not in ("minmax", "percentile"):
            raise ValueError(f"unknown calibration {self.calibration!r}; use 'minmax' or 'percentile'")
        if self.rounding not in ROUNDINGS:
            raise ValueError(f"unknown rounding {self.rounding!r}; use one of {ROUNDINGS}")
        for signed in (True, False):
            per_channel, symmetric = self.weight_scheme(signed)
            if per_channel and not symmetric:
                kind = "signed" if signed else "unsigned"
                raise ValueError(
                    f"{kind} per-channel weights must be symmetric: the kernels take "
                    "one weight zero point per tensor"
                )

    def weight_scheme(self, signed):
        """(per_channel, symmetric) for weights of a signed/unsigned layer."""
        if signed:
            return self.signed_per_channel, self.signed_symmetric
        return self.unsigned_per_channel, self.unsigned_symmetric
