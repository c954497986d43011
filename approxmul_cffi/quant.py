"""Affine quantization (8-bit by default, 2 to 16 bits) and integer requantization.

A real value ``r`` is represented by an integer code ``q`` as
``r = scale * (q - zero_point)``. Two code domains exist, one per multiplier
signedness:

* unsigned: ``uint8`` codes 0..255 (TFApprox style),
* signed: ``int8`` codes -128..127 (TFLite / AdaPT style).

The same real grid can be written in both domains: a ``uint8`` tensor with
zero point ``z`` is the ``int8`` tensor with zero point ``z - 128`` and codes
``q - 128`` (:func:`convert_codes`), so layers whose multipliers differ in
signedness chain without loss. Other widths (``bits``, as an n-bit
multiplier needs) shift by 2^(bits-1) and keep their codes in 8-bit
integers up to 8 bits, 16-bit ones beyond (:func:`code_dtype`).

Requantization follows gemmlowp/TFLite: the real factor
``s_in * s_w / s_out`` is a positive int32 mantissa and a power-of-two shift
(:func:`quantize_multiplier`), applied with
:func:`multiply_by_quantized_multiplier` (both in :mod:`approxmul_cffi.requant`,
re-exported here). See docs/quantization.md.

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

from . import affine
from .errors import AccumulatorOverflowError, DTypeError, InvalidArgumentError, ShapeError
# requantization lives in its own module; its names are part of quant's API
from .layer_calls import conv2d_requantize
from .requant import (INT32_MAX, INT32_MIN, ROUNDINGS, _channel_shape, code_dtype,
                      multiply_by_quantized_multiplier, quantize_multiplier, requantize,
                      requantize_reference, round_half_away)
from .requant_float import REQUANTIZATIONS, quantize_float

__all__ = [
    "QParams", "QuantConfig", "activation_bounds", "conv2d_requantize", "choose_qparams",
    "code_dtype", "code_range", "convert_codes", "fold_batchnorm",
    "multiply_by_quantized_multiplier", "observe_range", "quantize_bias", "quantize_multiplier",
    "quantize_values", "quantize_weight", "requantize", "requantize_reference", "round_half_away",
]


def code_range(signed, narrow=False, bits=8):
    """(qmin, qmax) of the ``bits``-bit code domain (2..16 bits; 8 by default).

    ``narrow`` drops the most negative code so that a symmetric grid is
    symmetric (-127..127 or 1..255), as TFLite does for int8 weights.

    >>> code_range(True), code_range(False), code_range(True, narrow=True)
    ((-128, 127), (0, 255), (-127, 127))
    >>> code_range(False, bits=4), code_range(True, bits=12)
    ((0, 15), (-2048, 2047))
    """
    code_dtype(signed, bits)  # checks bits
    half = 1 << (bits - 1)
    qmin, qmax = (-half, half - 1) if signed else (0, 2 * half - 1)
    return (qmin + 1 if narrow else qmin), qmax


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
    #: code width: 8-bit codes are int8/uint8, 9 to 16 bits int16/uint16
    bits: int = 8

    def __post_init__(self):
        scale = np.asarray(self.scale, dtype=np.float64)
        zp = np.asarray(self.zero_point, dtype=np.int64)
        if scale.shape != zp.shape or scale.ndim > 1:
            raise ShapeError(f"scale {scale.shape} and zero_point {zp.shape} must be equal "
                             "0-d or 1-d shapes")
        if (scale.ndim == 1) != (self.axis is not None):
            raise InvalidArgumentError("per-channel parameters need an axis, per-tensor ones none")
        if not np.all(np.isfinite(scale) & (scale > 0)):
            raise InvalidArgumentError(f"scales must be finite and positive, got {scale}")
        qmin, qmax = code_range(self.signed, self.narrow, self.bits)
        if np.any(zp < qmin) or np.any(zp > qmax):
            raise InvalidArgumentError(f"zero point {zp} outside the code range {qmin}..{qmax}")
        # private read-only copies: the C parameters below are taken from them once
        scale, zp = np.array(scale), np.array(zp)
        scale.flags.writeable = zp.flags.writeable = False
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "zero_point", zp)
        object.__setattr__(self, "_c", affine.CParams(scale, zp, self.axis))
        object.__setattr__(self, "_codes", (qmin, qmax, code_dtype(self.signed, self.bits)))  # read per call

    def __reduce__(self):
        # rebuilt from the fields: the C parameters hold buffer exports, which do not pickle
        return QParams, (self.scale, self.zero_point, self.signed, self.axis, self.narrow,
                         self.bits)

    @property
    def dtype(self):
        return self._codes[2]

    @property
    def qmin(self):
        return self._codes[0]

    @property
    def qmax(self):
        return self._codes[1]

    @property
    def per_channel(self):
        return self.axis is not None

    def quantize(self, x, *, out=None, finite=False):
        """Codes for real values: round half away from zero, then clamp.

        Runs in the C library (:func:`approxmul_cffi.affine.quantize`), bit
        for bit as :meth:`quantize_reference`; a NaN raises
        :class:`~approxmul_cffi.errors.InvalidArgumentError`, and so does
        +-inf with ``finite`` (else it clamps). ``out``, a C-contiguous array
        of this grid's code type, receives the codes.
        """
        if isinstance(out, np.ndarray) and out.dtype != self.dtype:
            raise DTypeError(f"out: dtype {out.dtype}; this grid's codes are {self.dtype}")
        return self._c.quantize(x, *self._codes, out, finite)

    def quantize_reference(self, x):
        """NumPy statement of :meth:`quantize` (the tests' oracle)."""
        return affine.quantize_reference(x, self.scale, self.zero_point, self.qmin, self.qmax,
                                         axis=self.axis, dtype=self.dtype)

    def dequantize(self, codes, *, dtype=np.float64, out=None):
        """Real values of codes: float64, or float32 (``dtype``) rounded once from them.

        ``out`` receives them instead of a new array
        (:func:`approxmul_cffi.affine.dequantize`).
        """
        return self._c.dequantize(codes, dtype, out)

    def dequantize_reference(self, codes):
        """NumPy statement of :meth:`dequantize` (float64)."""
        return affine.dequantize_reference(codes, self.scale, self.zero_point, axis=self.axis)

    def to_domain(self, signed):
        """The same real grid in the other code domain (zero point -+2^(bits-1), 128 in 8 bits)."""
        if signed == self.signed:
            return self
        half = 1 << (self.bits - 1)
        return QParams(self.scale, self.zero_point + (-half if signed else half), signed,
                       self.axis, self.narrow, self.bits)

    def to_dict(self):
        return {
            "scale": self.scale.tolist(),
            "zero_point": self.zero_point.tolist(),
            "signed": self.signed,
            "axis": self.axis,
            "narrow": self.narrow,
            "bits": self.bits,
        }


def convert_codes(codes, signed, *, in_place=False, bits=8):
    """``bits``-bit codes in the requested domain: q -+ 2^(bits-1), exact.

    The shift is done on the container's unsigned bits, modulo 2^8 or 2^16
    (in 8 bits, q - 128 is q XOR 0x80). ``in_place=True`` converts in the
    codes' own buffer (which callers may have aligned for a framework to
    adopt) instead of a new array.

    >>> convert_codes(np.array([0, 128, 255], np.uint8), signed=True).tolist()
    [-128, 0, 127]
    >>> convert_codes(np.array([-8, 7], np.int8), signed=False, bits=4).tolist()
    [0, 15]
    """
    codes = np.asarray(codes)
    want = code_dtype(signed, bits)
    if codes.dtype == want:
        return codes
    other = code_dtype(not signed, bits)
    if codes.dtype != other:
        raise DTypeError(f"{bits}-bit codes must be {want} or {other}, got {codes.dtype}")
    unsigned = code_dtype(False, bits)
    raw = codes.view(unsigned)
    half = unsigned.type(1 << (bits - 1))
    out = raw if in_place else None
    moved = np.subtract(raw, half, out=out) if signed else np.add(raw, half, out=out)
    return moved.view(want)


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
        raise ShapeError("cannot observe the range of an empty array")
    if not np.all(np.isfinite(x)):
        raise InvalidArgumentError("calibration data contains NaN or infinity")
    reduce = None
    if axis is not None:
        axis = axis % x.ndim
        reduce = tuple(i for i in range(x.ndim) if i != axis)
    if method == "minmax":
        lo, hi = x.min(axis=reduce), x.max(axis=reduce)
    elif method == "percentile":
        if not 50 < percentile <= 100:
            raise InvalidArgumentError(f"percentile must be in (50, 100], got {percentile}")
        lo = np.percentile(x, 100 - percentile, axis=reduce)
        hi = np.percentile(x, percentile, axis=reduce)
    else:
        raise InvalidArgumentError(f"unknown calibration method {method!r}; use 'minmax' or 'percentile'")
    if axis is None:
        return float(lo), float(hi)
    return lo, hi


def choose_qparams(lo, hi, *, signed, symmetric=False, narrow=False, axis=None, bits=8,
                   min_scale=None):
    """QParams of ``bits``-bit codes covering [lo, hi] (scalars, or 1-d arrays for per channel).

    The range is widened to contain 0 so that real zero (ReLU output,
    padding) has an exact code. Asymmetric: the range maps onto the whole
    code range. Symmetric: zero point 0 (signed) or 128 (unsigned) and
    ``scale = max(|lo|, |hi|) / 127`` (2^(bits-1) and 2^(bits-1) - 1 in
    other widths). ``min_scale`` (a scalar, or one per channel) bounds the
    scale from below; the range then takes fewer codes.

    >>> qp = choose_qparams(-0.5, 1.0, signed=True, symmetric=True)
    >>> float(qp.scale * 127), int(qp.zero_point)
    (1.0, 0)
    >>> qp = choose_qparams(0.0, 1.5, signed=False, bits=4)
    >>> float(qp.scale), int(qp.zero_point), qp.dtype
    (0.1, 0, dtype('uint8'))
    """
    lo = np.minimum(np.asarray(lo, dtype=np.float64), 0.0)
    hi = np.maximum(np.asarray(hi, dtype=np.float64), 0.0)
    if lo.shape != hi.shape or lo.ndim > 1:
        raise ShapeError("lo and hi must be scalars or equal 1-d arrays")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise InvalidArgumentError("range bounds must be finite")
    qmin, qmax = code_range(signed, narrow, bits)
    half = 1 << (bits - 1)
    if symmetric:
        zp = np.full(lo.shape, 0 if signed else half, dtype=np.int64)
        amax = np.maximum(-lo, hi)
        scale = amax / (half - 1.0)
    else:
        scale = (hi - lo) / (qmax - qmin)
    if min_scale is not None:
        scale = np.maximum(scale, np.asarray(min_scale, dtype=np.float64))
    # An all-zero tensor: any positive scale represents it exactly.
    scale = np.where(scale > 0, scale, 1.0)
    if not symmetric:
        zp = np.clip(qmin - round_half_away(lo / scale), qmin, qmax).astype(np.int64)
    if axis is None and scale.ndim == 1:
        raise InvalidArgumentError("per-channel ranges need an axis")
    return QParams(scale, zp, signed, axis if scale.ndim == 1 else None, narrow, bits)


def quantize_weight(w, *, signed, per_channel=True, symmetric=True, axis=0, bits=8,
                    min_scale=None):
    """(codes, QParams) of a weight tensor in ``bits``-bit codes, min/max calibrated.

    Symmetric weights use the narrow grid (-127..127, or 1..255 unsigned).
    ``min_scale`` (one per channel, or a scalar) bounds the scales from
    below; per tensor, its largest value does.

    >>> w = np.array([[1.0, -0.5], [0.1, 0.25]])
    >>> codes, qp = quantize_weight(w, signed=True)
    >>> codes.tolist()
    [[127, -64], [51, 127]]
    """
    w = np.asarray(w, dtype=np.float64)
    lo, hi = observe_range(w, axis=axis if per_channel else None)
    if min_scale is not None and not per_channel:
        min_scale = float(np.max(min_scale))
    qp = choose_qparams(
        lo, hi, signed=signed, symmetric=symmetric, narrow=symmetric,
        axis=axis if per_channel else None, bits=bits, min_scale=min_scale,
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
        raise AccumulatorOverflowError("bias does not fit int32 in the accumulator scale s_x*s_w")
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
        raise ShapeError(
            f"batch norm has {factor.size} channels, the layer {weight.shape[0]} outputs"
        )
    bias = np.zeros(weight.shape[0]) if bias is None else np.asarray(bias, dtype=np.float64)
    w = weight * factor.reshape(_channel_shape(weight.ndim, 0))
    b = (bias - np.asarray(mean, dtype=np.float64)) * factor + np.asarray(beta, dtype=np.float64)
    return w, b


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
    raise InvalidArgumentError(f"unknown fused activation {activation!r}")


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
    #: "gemmlowp" (fixed point) or "onnxruntime" (float32 scale, ties to even)
    requantization: str = "gemmlowp"
    #: width of activation and weight codes, 2..16; each layer's multiplier has this width
    bits: int = 8

    def __post_init__(self):
        if self.calibration not in ("minmax", "percentile"):
            raise InvalidArgumentError(f"unknown calibration {self.calibration!r}; use 'minmax' or 'percentile'")
        if self.requantization not in REQUANTIZATIONS:
            raise InvalidArgumentError(f"unknown requantization {self.requantization!r}; use "
                                       f"one of {REQUANTIZATIONS}")
        if self.rounding not in ROUNDINGS:
            raise InvalidArgumentError(f"unknown rounding {self.rounding!r}; use one of {ROUNDINGS}")
        if not isinstance(self.bits, (int, np.integer)) or not 2 <= self.bits <= 16:
            raise InvalidArgumentError(f"bits must be an integer in 2..16, got {self.bits!r}")
        if self.bits != 8 and self.requantization != "gemmlowp":
            raise InvalidArgumentError("ONNX Runtime's float requantization is 8-bit only; "
                                       "other widths use requantization='gemmlowp'")
        for signed in (True, False):
            per_channel, symmetric = self.weight_scheme(signed)
            if per_channel and not symmetric:
                kind = "signed" if signed else "unsigned"
                raise InvalidArgumentError(
                    f"{kind} per-channel weights must be symmetric: the kernels take "
                    "one weight zero point per tensor"
                )

    def width_for(self, widths):
        """The codes' width for multipliers of these widths: ``bits`` when set to other
        than 8, else the multipliers' one common width (8 when they have none or several).

        >>> QuantConfig().width_for([4, 4]), QuantConfig(bits=6).width_for([4])
        (4, 6)
        """
        widths = set(widths)
        return widths.pop() if self.bits == 8 and len(widths) == 1 else self.bits

    def weight_scheme(self, signed):
        """(per_channel, symmetric) for weights of a signed/unsigned layer."""
        if signed:
            return self.signed_per_channel, self.signed_symmetric
        return self.unsigned_per_channel, self.unsigned_symmetric


def quantize_values(x, qparams, config):
    """Codes of real values with the rounding of ``config``'s requantization arithmetic.

    >>> qp = QParams(np.array(1.0), np.array(0), signed=True)
    >>> quantize_values([0.5, 2.5], qp, QuantConfig(requantization="onnxruntime")).tolist()
    [0, 2]
    """
    if config.requantization == "onnxruntime":
        return quantize_float(x, qparams)
    return qparams.quantize(x)
