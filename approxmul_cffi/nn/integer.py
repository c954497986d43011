"""The integer forward of one layer: the building blocks of integer inference.

:class:`QuantizedLayer` is the one integer path of a Conv2d or Linear
layer (with a folded batch norm and a fused ReLU/ReLU6): weight codes,
int32 bias and requantization factors prepared once per code domain, the
layer's products through a multiplier, requantization in the C library.
:class:`QuantizedModel <approxmul_cffi.nn.QuantizedModel>` wires such nodes
into a graph; framework adapters call the same objects per layer, so their
integer results are bit-identical. docs/quantization.md states the
arithmetic, docs/api.md the contract.

>>> import numpy as np, approxmul_cffi as am
>>> from approxmul_cffi import nn, quant
>>> layer = nn.Linear(2, 1)
>>> in_qp = quant.choose_qparams(0.0, 1.0, signed=False)
>>> out_qp = quant.choose_qparams(-1.0, 1.0, signed=False)
>>> q = nn.QuantizedLayer(layer, [[1.0, -1.0]], [0.0], in_qp, out_qp)
>>> codes = in_qp.quantize(np.array([[1.0, 0.0], [0.0, 1.0]]))
>>> out = q.forward_codes(codes, am.Multiplier.exact(8))
>>> q.output_qparams(False).dequantize(out).round(2).tolist()
[[1.0], [-1.0]]
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import ops, quant
from .._buffers import REAL_TYPES, dtype_name
from ..errors import ModelError
from ..multipliers import Multiplier
from ..requant_float import float_scale, requantize_float

# The largest bias code a calibrated layer's weight scale leaves room for:
# int32's, less 1 for the rounding of bias / (s_x s_w).
BIAS_LIMIT = 2.0**31 - 2

__all__ = ["CodeOp", "PreparedWeights", "QTensor", "QuantizedLayer", "QuantizedMatMul"]


@dataclasses.dataclass
class QTensor:
    """Integer codes with the QParams of their domain (int8 or uint8).

    >>> qp = quant.choose_qparams(0.0, 2.55, signed=False)
    >>> QTensor(np.array([0, 100], np.uint8), qp).to_domain(True).codes.tolist()
    [-128, -28]
    """

    codes: np.ndarray
    qparams: quant.QParams

    def to_domain(self, signed):
        """The same values in the int8 (``signed``) or uint8 code domain."""
        if signed == self.qparams.signed:
            return self
        return QTensor(quant.convert_codes(self.codes, signed, bits=self.qparams.bits),
                       self.qparams.to_domain(signed))

    def dequantize(self, dtype=np.float64):
        """The real values: float64, or float32 rounded once from them."""
        return self.qparams.dequantize(self.codes, dtype=dtype)


def in_own_domains(fn, inputs, in_qparams, out_qparams):
    """``fn(*codes)`` with each input's codes in its own grid's domain, as a QTensor on
    ``out_qparams`` in the first input's domain. For ONNX Runtime's float arithmetic
    (requant_float), whose rounding is not the same after the +-128 domain shift.

    >>> qp = quant.QParams(0.5, 0, signed=True)
    >>> x = QTensor(np.array([130], np.uint8), qp.to_domain(False))
    >>> in_own_domains(lambda c: c * 2, [x], [qp], qp).codes.tolist()
    [132]
    """
    codes = [quant.convert_codes(x.codes, q.signed, bits=q.bits) for x, q in zip(inputs, in_qparams)]
    signed = inputs[0].qparams.signed
    return QTensor(quant.convert_codes(fn(*codes), signed, bits=out_qparams.bits),
                   out_qparams.to_domain(signed))


@dataclasses.dataclass(frozen=True)
class PreparedWeights:
    """What a :class:`QuantizedLayer` needs in one code domain, computed once."""

    codes: np.ndarray       # weight codes, the layer's weight layout
    qparams: quant.QParams  # their scale(s) and zero point
    zero_point: int         # one per tensor (the kernels take a scalar)
    bias: np.ndarray        # int32, per output channel, in the accumulator's scale
    mantissa: np.ndarray    # int32 requantization factors per output channel
    shift: np.ndarray
    scale: np.ndarray = None  # float32 factors (requantization="onnxruntime")


class QuantizedLayer:
    """The integer forward of a Conv2d or Linear layer.

    ``layer`` gives the geometry and the product (its ``accumulate``);
    ``weight`` and ``bias`` are the float parameters to quantize (a batch
    norm already folded in); ``in_qparams`` and ``out_qparams`` are the
    per-tensor activation grids of the input and the output (either
    domain); ``activation`` is None, "relu" or "relu6", fused as the
    output clamp; ``config`` a :class:`~approxmul_cffi.quant.QuantConfig`.
    """

    takes_multiplier = True

    def __init__(self, layer, weight, bias, in_qparams, out_qparams, activation=None,
                 config=None, given=None):
        if not hasattr(layer, "accumulate"):
            raise ModelError(f"{type(layer).__name__} has no integer product (accumulate)")
        self.layer = layer
        self._prepared = {}
        self.set_parameters(weight, bias)
        self.in_qparams, self.out_qparams = in_qparams, out_qparams
        self.activation = activation
        self.config = quant.QuantConfig() if config is None else config
        quant.activation_bounds(out_qparams, activation)  # an unknown activation fails now
        # (weight codes, their QParams, int32 bias): a pre-quantized model's own
        self.given = given
        # per domain: (input zero point, output QParams, output clamp)
        self._grids = {}
        # (multiplier, int64 per-channel accumulator offset): bias correction, off by default
        self._correction = None

    def __getstate__(self):
        # copies and pickles (a sweep's workers) prepare their own call: it
        # holds the multiplier, which may not pickle (an in-memory table)
        return {**self.__dict__, "_requantizer": None}

    def set_parameters(self, weight, bias):
        """New float weight and bias (retraining changed them): prepared weights are redone."""
        self.weight = np.asarray(weight, dtype=np.float64)
        self.bias = (np.zeros(self.weight.shape[0]) if bias is None
                     else np.asarray(bias, dtype=np.float64))
        self._prepared.clear()
        # (multiplier, real type, the layer's prepared fused call), kept while
        # neither the parameters nor the correction change
        self._requantizer = None

    def prepare(self, signed):
        """The :class:`PreparedWeights` of the int8 (``signed``) or uint8 domain (cached)."""
        signed = bool(signed)
        if signed not in self._prepared:
            s_x = float(self.in_qparams.scale)
            if self.given is None:
                per_channel, symmetric = self.config.weight_scheme(signed)
                # no weight scale so small that the bias leaves int32 in the
                # accumulator's scale s_x s_w: a channel of near-zero weights
                # (1e-35 in the bundled mnist-lenet5) would otherwise refuse
                # every per-channel quantization; its weights, negligible
                # beside its bias, then take code 0
                codes, wqp = quant.quantize_weight(
                    self.weight, signed=signed, per_channel=per_channel, symmetric=symmetric,
                    bits=self.config.bits, min_scale=np.abs(self.bias) / (s_x * BIAS_LIMIT))
                bias = quant.quantize_bias(self.bias, s_x, wqp.scale)
            else:
                codes, wqp, bias = self.given
                codes, wqp = quant.convert_codes(codes, signed, bits=wqp.bits), wqp.to_domain(signed)
                if np.unique(wqp.zero_point).size != 1:
                    raise ModelError("per-channel weight zero points must be equal (the "
                                     "kernels take one per tensor)")
            mantissa, shift = quant.quantize_multiplier(
                s_x * wqp.scale / float(self.out_qparams.scale))
            self._prepared[signed] = PreparedWeights(
                codes=codes, qparams=wqp, zero_point=int(np.ravel(wqp.zero_point)[0]),
                bias=np.asarray(bias, np.int32), mantissa=mantissa, shift=shift,
                scale=float_scale(s_x, wqp.scale, self.out_qparams.scale))
        return self._prepared[signed]

    def _grid(self, signed):
        if signed not in self._grids:
            out_qp = self.out_qparams.to_domain(signed)
            self._grids[signed] = (int(self.in_qparams.to_domain(signed).zero_point), out_qp,
                                   quant.activation_bounds(out_qp, self.activation))
        return self._grids[signed]

    def output_qparams(self, signed):
        """The output codes' QParams in the domain of a (``signed``) multiplier."""
        return self._grid(bool(signed))[1]

    def set_correction(self, multiplier, correction):
        """Add ``correction`` (integers, one per output channel) to the accumulators
        whenever ``multiplier`` (the same object or spec) runs the layer; None: no more.

        >>> import approxmul_cffi as am
        >>> from approxmul_cffi import nn
        >>> layer = QuantizedLayer(nn.Linear(1, 2), [[1.0], [1.0]], [0.0, 0.0],
        ...                        quant.QParams(1.0, 0, False), quant.QParams(1.0, 0, False))
        >>> m = am.Multiplier.exact(8)
        >>> layer.set_correction(m, [765, -255])  # accumulator units: s_x s_w = 1/255
        >>> layer.forward_codes(np.array([[5]], np.uint8), m).tolist()
        [[8, 4]]
        >>> layer.forward_codes(np.array([[5]], np.uint8), am.Multiplier.exact(8, True)).tolist()
        [[-123, -123]]
        """
        self._requantizer = None
        if correction is None:
            self._correction = None
            return
        correction = np.rint(np.asarray(correction, dtype=np.float64)).astype(np.int64)
        if correction.shape != self.bias.shape:
            raise ModelError(f"correction of shape {correction.shape}: the layer has "
                             f"{self.bias.shape[0]} output channels")
        self._correction = (multiplier, correction)

    def correction(self, multiplier):
        """The accumulator correction applied with ``multiplier``, or None."""
        if self._correction is None:
            return None
        owner, value = self._correction
        spec = getattr(multiplier, "spec", None)
        return value if owner is multiplier or (spec is not None and spec == owner.spec) else None

    def accumulators(self, codes, multiplier):
        """The integer accumulators (before bias and any correction) for input codes."""
        signed = bool(multiplier.signed)
        prepared = self.prepare(signed)
        return self.layer.accumulate(quant.convert_codes(codes, signed, bits=self.in_qparams.bits),
                                     prepared.codes,
                                     multiplier, self._grid(signed)[0], prepared.zero_point)

    def error_sums(self, codes, multiplier):
        """(per output channel sum of exact minus ``multiplier``'s accumulators, count of
        positions summed) for input codes: what bias correction averages."""
        exact = Multiplier.exact(bits=multiplier.bits, signed=bool(multiplier.signed))
        error = self.accumulators(codes, exact).astype(np.int64) - self.accumulators(codes, multiplier)
        axis = getattr(self.layer, "channel_axis", 1) % error.ndim
        per_channel = np.moveaxis(error, axis, -1).reshape(-1, error.shape[axis])
        return per_channel.sum(axis=0), len(per_channel)

    def forward_codes(self, codes, multiplier, real=None):
        """Output codes (the multiplier's domain) from input codes (int8 or uint8);
        with ``real`` (float32 or float64) their real values, bit for bit as
        ``QTensor.dequantize`` gives them, without the codes in between."""
        if real is not None and (self.config.requantization == "onnxruntime"
                                 or self.out_qparams.axis is not None):
            out = self.forward_codes(codes, multiplier)
            return self.output_qparams(multiplier.signed).dequantize(out, dtype=real)
        signed = bool(multiplier.signed)
        call = self._fused_call(multiplier, real)
        if call is not None:
            return call(quant.convert_codes(codes, signed, bits=self.in_qparams.bits))
        stage, options = self._stage(multiplier, signed, real)
        acc = self.accumulators(codes, multiplier)
        axis = getattr(self.layer, "channel_axis", 1)
        if self.config.requantization == "onnxruntime":
            bias, _, _, zero_point, lo, hi = stage
            return requantize_float(acc, bias, self.prepare(signed).scale, zero_point,
                                    lo, hi, axis=axis).astype(self._grid(signed)[1].dtype)
        return quant.requantize(acc, *stage, axis=axis, signed=signed, **options)

    def forward_real(self, x, multiplier, real):
        """Real outputs (``real``: float32 or float64) for real inputs ``x``:
        ``forward_codes(self.in_qparams.quantize(x, finite=True), multiplier,
        real=real)``, bit for bit. A convolution quantizes inside its C call
        (``approxmul_conv2d_real``): one pass over ``x``, no codes array.
        NaN or infinity in ``x`` raises
        :class:`~approxmul_cffi.errors.InvalidArgumentError`."""
        in_qp, x = self.in_qparams, np.asarray(x)
        call = None  # where forward_codes takes the fused call, and x is a C real type
        if not in_qp.per_channel and self.out_qparams.axis is None and \
                dtype_name(x.dtype) in REAL_TYPES and x.dtype.isnative:
            call = self._fused_call(multiplier, real)
        if getattr(call, "run_real", None) is None:
            return self.forward_codes(in_qp.quantize(x, finite=True), multiplier, real=real)
        grid = in_qp.to_domain(bool(multiplier.signed))
        return call.run_real(x, float(grid.scale), grid.qmin, grid.qmax, grid.dtype)

    def bind_real(self, multiplier, real, x_type, shape, strides):
        """:meth:`forward_real` for the inputs of one layout (``x_type``,
        ``shape``, ``strides`` in elements), prepared once: ``(out_shape,
        call)`` as the layer's stage gives them
        (:meth:`~approxmul_cffi.layer_calls.Conv2dRequantizer.bind_real`: the
        one fused C call; ``LinearRequantizer.bind_real``: quantize, matmul
        and output stage), the bits of forward_real; None where the layer has
        no such stage (per-channel grids, onnxruntime's requantization)."""
        in_qp = self.in_qparams
        if in_qp.per_channel or self.out_qparams.axis is not None:
            return None
        call = self._fused_call(multiplier, real)
        if getattr(call, "bind_real", None) is None:
            return None
        grid = in_qp.to_domain(bool(multiplier.signed))
        return call.bind_real(x_type, shape, strides, float(grid.scale), grid.qmin, grid.qmax,
                              grid.dtype)

    def _fused_call(self, multiplier, real):
        """The layer's integer call with its output stage, prepared once for
        ``multiplier`` and ``real`` (Conv2d: one pass of the C library in which
        the accumulators never exist whole), or None where the layer has none."""
        fused = getattr(self.layer, "requantizer", None)
        if fused is None or self.config.requantization == "onnxruntime":
            return None
        real_type = None if real is None else np.dtype(real)
        cached = self._requantizer
        if cached is None or cached[0] is not multiplier or cached[1] != real_type:
            signed = bool(multiplier.signed)
            stage, options = self._stage(multiplier, signed, real)
            prepared = self.prepare(signed)
            cached = (multiplier, real_type, fused(prepared.codes, multiplier,
                                                   self._grid(signed)[0],
                                                   prepared.zero_point, *stage, **options))
            self._requantizer = cached
        return cached[2]

    def _stage(self, multiplier, signed, real):
        """(bias, mantissa, shift, zero point, qmin, qmax) of the output stage with
        ``multiplier`` (its bias correction folded in), and the requantization's options."""
        prepared = self.prepare(signed)
        _, out_qp, (lo, hi) = self._grid(signed)
        bias, correction = prepared.bias, self.correction(multiplier)
        if correction is not None:  # folded into the int32 bias, saturating
            info = np.iinfo(np.int32)
            bias = np.clip(bias.astype(np.int64) + correction, info.min, info.max).astype(np.int32)
        stage = (bias, prepared.mantissa, prepared.shift, int(out_qp.zero_point), lo, hi)
        options = dict(rounding=self.config.rounding, bits=out_qp.bits,
                       real=None if real is None else (float(out_qp.scale), real))
        return stage, options

    def forward(self, inputs, multiplier):
        """Graph form: one input QTensor -> output QTensor."""
        codes = self.forward_codes(inputs[0].codes, multiplier)
        return QTensor(codes, self.output_qparams(multiplier.signed))


class QuantizedMatMul:
    """Integer ``a @ b`` of two activations: products through the multiplier, per-tensor scale.

    Leading (batch) dimensions broadcast as in NumPy; the accumulators pass
    the same requantization as :class:`QuantizedLayer`'s.
    """

    takes_multiplier = True

    def __init__(self, in_qparams, out_qparams, config=None):
        self.in_qparams, self.out_qparams = list(in_qparams), out_qparams
        self.config = quant.QuantConfig() if config is None else config
        scale = float(in_qparams[0].scale) * float(in_qparams[1].scale) / float(out_qparams.scale)
        self.mantissa, self.shift = quant.quantize_multiplier(scale)
        self.scale = float_scale(in_qparams[0].scale, in_qparams[1].scale, out_qparams.scale)

    def prepare(self, signed):
        """Nothing to prepare: both operands arrive as codes."""

    def output_qparams(self, signed):
        return self.out_qparams.to_domain(bool(signed))

    def forward(self, inputs, multiplier):
        signed = bool(multiplier.signed)
        a, b = (x.to_domain(signed) for x in inputs)
        lead = np.broadcast_shapes(a.codes.shape[:-2], b.codes.shape[:-2])
        av, bv = (np.broadcast_to(c, (*lead, *c.shape[-2:])).reshape(-1, *c.shape[-2:])
                  for c in (a.codes, b.codes))
        acc = ops.bmm(av, bv, multiplier, a_zero_point=int(a.qparams.zero_point),
                  b_zero_point=int(b.qparams.zero_point))
        out_qp = self.output_qparams(signed)
        if self.config.requantization == "onnxruntime":
            codes = requantize_float(acc, 0, self.scale, int(out_qp.zero_point), out_qp.qmin,
                                     out_qp.qmax).astype(out_qp.dtype)
        else:
            codes = quant.requantize(acc, 0, self.mantissa, self.shift, int(out_qp.zero_point),
                                     out_qp.qmin, out_qp.qmax, signed=signed,
                                     rounding=self.config.rounding, bits=out_qp.bits)
        return QTensor(codes.reshape(*lead, acc.shape[-2], acc.shape[-1]), out_qp)


class CodeOp:
    """A layer computed on codes alone, with no multiplier (pooling, ReLU, ...).

    The layer's ``forward_codes(QTensor) -> QTensor`` is its integer forward.
    """

    takes_multiplier = False

    def __init__(self, layer, in_qparams):
        self.layer, self.out_qparams = layer, in_qparams

    def forward(self, inputs, multiplier=None):
        return self.layer.forward_codes(*inputs)
