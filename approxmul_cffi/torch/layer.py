"""The approximate layer: the swapped module's forward, weights and gradient tables.

``approximate`` mixes :class:`ApproxLayer` into the class of each selected
torch layer, so the module keeps its parameters, state_dict and class
checks (``isinstance(layer, torch.nn.Linear)`` stays true).

>>> import torch
>>> from approxmul_cffi.torch import approximate
>>> net = approximate(torch.nn.Sequential(torch.nn.Linear(3, 2)), "drum:k=4",
...                   calibration=[torch.rand(8, 3)])
>>> isinstance(net[0], ApproxLayer), isinstance(net[0], torch.nn.Linear), net[0].q_multiplier.spec
(True, True, 'drum:bits=8,signed=0,k=4')
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from .. import nn, quant
from ..ops import conv2d_output_shape
from . import _op
from .._library import ffi as _ffi
from ..errors import InvalidArgumentError
from ._common import ApproximationError, check_input, nonfinite_error, refuses_nonfinite

class ApproxLayer:
    """Mixed into the swapped layer's own class (``ApproxConv2d`` etc.).

    The module keeps its parameters (same state_dict keys as before); its
    forward runs ``torch.ops.approxmul.layer``. ``q_node`` is the evaluator's
    integer layer; ``q_bn`` a batch norm folded into it (its module in the
    model became an identity that keeps its parameters).
    """

    def _setup(self, name, multiplier, node, bn, gradient, sample_shapes):
        self.q_name, self.q_multiplier, self.q_node, self.q_gradient = name, multiplier, node, gradient
        # per-sample input shapes seen in calibration (a layer called at several sites: each)
        self.q_sample_shapes = tuple(tuple(s) for s in sample_shapes)
        object.__setattr__(self, "_q_bn", bn)  # not a submodule: the BN keeps its place
        self.q_conv = not isinstance(self, torch.nn.Linear)
        self.q_conv1d = isinstance(self, torch.nn.Conv1d)
        if self.q_conv:
            geom = node.layer.geometry
            self.q_stride, self.q_padding = geom["stride"], geom["padding"]
            self.q_dilation, self.q_groups = geom["dilation"], geom["groups"]
        bits = node.in_qparams.bits
        # codes of the multiplier's domain and width: int8/uint8, or int16/uint16 above 8 bits
        self.code_dtype = torch.from_numpy(np.empty(0, quant.code_dtype(multiplier.signed, bits))).dtype
        self.q_mask = (1 << bits) - 1  # a code's bit pattern: its row in the multiplier's tables
        self._q_versions, self._q_cache, self._q_tables = None, {}, {}
        self._q_bound = None  # the C call bound to inference's last input layout (_bind)
        self._q_float = False
        if not hasattr(self, "q_key"):
            self.q_key = _op.register(self)

    def __deepcopy__(self, memo):
        # a copy is a layer of its own (own registry key); the multiplier is
        # immutable and shared (in-memory tables have no spec to rebuild from)
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            new.__dict__[key] = value if key == "q_multiplier" else copy.deepcopy(value, memo)
        new.q_key, new._q_bound = _op.register(new), None  # the bound call is the original's
        return new

    def __copy__(self):
        # a shallow copy shares the parameters, as copy.copy of a module does; a layer of
        # its own in the registry (pickling is what __getstate__ refuses)
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.q_key, new._q_bound = _op.register(new), None
        return new

    def __getstate__(self):
        # the multiplier is a handle into the C library: nothing to pickle
        raise ApproximationError(
            f"layer {self.q_name!r}: an approximated model cannot be pickled (torch.save of "
            "the whole module); save its state_dict and approximate the float model again")

    # ---- shapes
    def conv_in_shape(self, shape):
        return (shape[0], shape[1], 1, shape[2]) if self.q_conv1d else tuple(shape)

    def conv_out_shape(self, shape):
        return (shape[0], shape[1], 1, shape[2]) if self.q_conv1d else tuple(shape)

    def output_shape(self, x_shape):
        if not self.q_conv:
            return (*x_shape[:-1], self.q_node.layer.out_features)
        n, _, h, w = self.conv_in_shape(x_shape)
        layer = self.q_node.layer
        # the batch passes through untouched: under torch.export it may be symbolic
        _, o, oh, ow = conv2d_output_shape((1, layer.in_channels, h, w), layer.weight_shape,
                                           **layer.geometry)
        return (n, o, ow) if self.q_conv1d else (n, o, oh, ow)

    # ---- weights: quantized once per parameter version
    def _params(self):
        bn = self._q_bn
        # the parameters' own dict, not Module.__getattr__: this runs on every call
        own = self._parameters
        ps = [own["weight"] if "weight" in own else self.weight,
              own["bias"] if "bias" in own else self.bias]
        if bn is not None:
            ps += [bn.weight, bn.bias, bn.running_mean, bn.running_var]
        return ps

    def _refresh(self):
        versions = tuple((id(p), p._version) if p is not None else None for p in self._params())
        if versions == self._q_versions:
            return
        as32 = lambda t: t.detach().to(torch.float32).numpy()  # noqa: E731
        weight = as32(self.weight).astype(np.float64)
        if self.q_conv1d:
            weight = weight[:, :, None, :]
        bias = as32(self.bias) if self.bias is not None else np.zeros(weight.shape[0])
        bn = self._q_bn
        if bn is not None:
            weight, bias = quant.fold_batchnorm(weight, bias, as32(bn.weight), as32(bn.bias),
                                                as32(bn.running_mean), as32(bn.running_var), bn.eps)
        if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
            raise ApproximationError(f"layer {self.q_name!r}: parameters contain NaN or infinity")
        self.q_node.set_parameters(weight, bias)
        self._q_cache, self._q_versions, self._q_bound = {}, versions, None

    def quantized(self, signed):
        """Integer weights and the scales the backward needs, as tensors (cached)."""
        self._refresh()
        if signed not in self._q_cache:
            w = self.q_node.prepare(signed)
            wqp, in_qp = w.qparams, self.q_node.in_qparams.to_domain(signed)
            s_w = np.broadcast_to(wqp.scale, (w.codes.shape[0],))
            self._q_cache[signed] = dict(
                w_codes=torch.from_numpy(np.ascontiguousarray(w.codes)),
                w_dq=torch.from_numpy(wqp.dequantize(w.codes)),
                s_w=torch.from_numpy(np.array(s_w, dtype=np.float64)), z_w=int(w.zero_point),
                s_x=float(in_qp.scale), z_x=int(in_qp.zero_point))
        return self._q_cache[signed]

    def gradient_tables(self, kind, dtype):
        """(dM/da, dM/db) of the multiplier: 1-D slopes or 2-D tables, from the C library."""
        from ..gradients import gradient_slopes, gradient_table
        key = (kind, dtype)
        if key not in self._q_tables:
            m = self.q_multiplier
            if kind == "slopes":  # dM/da as a function of b, dM/db as a function of a
                pair = gradient_slopes(m, "a"), gradient_slopes(m, "b")
            else:
                pair = gradient_table(m, "a"), gradient_table(m, "b")
            self._q_tables[key] = tuple(torch.from_numpy(t).to(dtype) for t in pair)
        return self._q_tables[key]

    # ---- forward
    def _check_shape(self, x):
        """The input's device and dtype (check_input) and its per-sample shape."""
        check_input(x, f"input of layer {self.q_name!r}", values=False)  # NaN: quantize refuses it
        if not self.q_conv:  # any leading sizes (a sequence of any length), as torch's Linear
            features = self.q_sample_shapes[0][-1]
            if x.dim() == 0 or x.shape[-1] != features:
                raise ApproximationError(
                    f"layer {self.q_name!r} takes {features} input features, "
                    f"got an input of shape {tuple(x.shape)}")
        elif tuple(x.shape[1:]) not in self.q_sample_shapes:
            raise ApproximationError(
                f"layer {self.q_name!r} was calibrated on per-sample inputs of shape "
                f"{' or '.join(map(str, self.q_sample_shapes))}, got {tuple(x.shape[1:])}: "
                "calibrate again with inputs shaped as in use")

    def integer_forward(self, x, with_codes=True):
        """(dequantized output, input codes in the multiplier's domain, or None
        without ``with_codes``) of the integer layer for float ``x``."""
        what = f"input of layer {self.q_name!r}"
        self._check_shape(x)
        self._refresh()
        m = self.q_multiplier
        xs = x.detach()
        if xs.dtype not in (torch.float32, torch.float64):
            xs = xs.to(torch.float32)  # exact for bfloat16/float16
        xn = xs.numpy()
        if self.q_conv1d:
            xn = xn[:, :, None, :]
        in_qp = self.q_node.in_qparams
        # float32 straight from C: the same bits as float64 then .to(float32);
        # half types round once from float64, as before
        real = np.float32 if x.dtype == torch.float32 else np.float64
        try:
            if with_codes:
                codes = nn.QTensor(in_qp.quantize(xn, finite=True), in_qp)
                y = self.q_node.forward_codes(codes.codes, m, real=real)
            else:  # inference: the input quantized inside the layer's C call
                y = self.q_node.forward_real(xn, m, real)
        except InvalidArgumentError as error:  # "x[i] is NaN ..." (flat index)
            if not refuses_nonfinite(error):
                raise
            raise nonfinite_error(what, f" ({error})") from None
        y = torch.from_numpy(y).to(x.dtype)
        x_codes = torch.from_numpy(codes.to_domain(bool(m.signed)).codes) if with_codes else None
        if self.q_conv1d:
            y = y[:, :, 0]
            x_codes = x_codes[:, :, 0] if with_codes else None
        return y, x_codes

    def _infer(self, x):
        """``integer_forward(x, with_codes=False)[0]``, the same C call bound
        to x's layout once (dtype, shape, memory format): per call, the
        parameters' versions, an output tensor and the call. The Python
        between two 1 ms layers runs with caches the layers' data has
        emptied, and every object it touches costs: the general path took
        about a tenth of a 16->16 32x32 layer's time (docs/benchmarks.md)."""
        self._refresh()
        if x.is_contiguous():
            layout = torch.contiguous_format
        elif x.is_contiguous(memory_format=torch.channels_last):
            layout = torch.channels_last
        else:
            layout = None
        key = (x.dtype, x.shape, layout)
        bound = self._q_bound
        if bound is None or bound[0] != key or bound[1] is not self.q_multiplier:
            bound = self._bind(x, key, layout)
            if bound is None:
                return self.integer_forward(x, with_codes=False)[0]
        out = torch.empty(bound[2], dtype=x.dtype)
        try:
            bound[3](_ffi.cast("void *", x.data_ptr()), _ffi.cast("void *", out.data_ptr()))
        except InvalidArgumentError as error:  # "x[i] is NaN ..." (index in memory order)
            if not refuses_nonfinite(error):
                raise
            raise nonfinite_error(f"input of layer {self.q_name!r}", f" ({error})") from None
        return out if bound[4] is None else out.view(bound[4])

    def _bind(self, x, key, layout):
        """(key, multiplier, output shape, C call) for inputs like x, kept as
        the layer's bound call; None where _infer takes the general path
        (another dtype or layout, an empty batch)."""
        self._check_shape(x)
        channels_last = layout is torch.channels_last
        if layout is None or x.numel() == 0 or x.dtype not in (torch.float32, torch.float64) or \
                (channels_last and (not self.q_conv or self.q_conv1d)):
            return None
        real = np.float32 if x.dtype == torch.float32 else np.float64
        shape = self.conv_in_shape(tuple(x.shape)) if self.q_conv else tuple(x.shape)
        # the layout's own strides (a size-1 axis may carry any stride in torch)
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        if channels_last:
            _, c, h, w = shape
            strides = (h * w * c, 1, w * c, c)
        bound = self.q_node.bind_real(self.q_multiplier, real, real, shape, tuple(strides))
        if bound is None:
            return None
        out_shape, call = bound
        # a Conv1d's output, made 4-D for the call, is returned as the (N, O, L) view of it
        view = out_shape[:2] + out_shape[3:] if self.q_conv1d else None
        self._q_bound = (key, self.q_multiplier, out_shape, call, view)
        return self._q_bound

    def forward(self, x):
        # eager inference on a CPU tensor, tested first: every call of an
        # evaluated network takes it (the operator's dispatch, ~0.1 ms a layer, buys nothing)
        if type(x) is torch.Tensor and x.is_cpu and not self._q_float and \
                (self.q_gradient == "none" or not torch.is_grad_enabled()) and \
                not torch.compiler.is_compiling():
            return self._infer(x)
        if self._q_float:  # calibration runs the float model
            weight, bias = self._folded()
            if self.q_conv:
                return self._conv_forward(x, weight[:, :, 0] if self.q_conv1d else weight, bias)
            return torch.nn.functional.linear(x, weight, bias)
        if not isinstance(x, torch.Tensor):
            raise ApproximationError(f"layer {self.q_name!r}: input must be a tensor")
        if x.device.type != "cpu":  # before any op sees it
            check_input(x, f"input of layer {self.q_name!r}")
        if self.q_gradient == "none" or not torch.is_grad_enabled():
            # a tensor subclass, or a graph being traced or compiled: the opaque operator
            with torch.no_grad():
                bias = self.bias if self.bias is not None else self.weight.new_zeros(self.weight.shape[0])
                return _op.approx_layer(x, self.weight, bias, self.q_key, "none")[0]
        weight, bias = self._folded()
        return _op.approx_layer(x, weight, bias, self.q_key, self.q_gradient)[0]

    def _folded(self):
        """BN-folded float weight and bias, differentiable (the backward's inputs)."""
        w = self.weight if not self.q_conv1d else self.weight.unsqueeze(2)
        b = self.bias if self.bias is not None else w.new_zeros(w.shape[0])
        bn = self._q_bn
        if bn is not None:
            factor = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            w = w * factor.reshape(-1, *([1] * (w.dim() - 1)))
            b = (b - bn.running_mean) * factor + bn.bias
        return w, b

    def extra_repr(self):
        spec = getattr(self.q_multiplier, "spec", None) or getattr(self.q_multiplier, "name", "")
        return f"{super().extra_repr()}, multiplier={spec!r}, gradient={self.q_gradient!r}"


class GridAveragePool:
    """Mixed into an ``AvgPool2d`` or ``AdaptiveAvgPool2d(1)`` between approximate
    layers: the evaluator's integer mean of its input's codes.

    torch's mean of dequantized values lands a rounding error to either side
    of a tie between two codes, where ``approxmul evaluate`` rounds the
    integer mean half away from zero. So the pool quantizes its input with
    its grid (the evaluator's: the scale its input carries), averages the
    codes as the evaluator's ``nn.AvgPool2d``/``nn.GlobalAvgPool`` do (exact
    integers in float64), and returns their real values; the gradient is
    torch's own pool's (straight through the rounding). In torch operations,
    so ``torch.compile`` traces it.
    """

    def _setup_grid(self, name, qparams):
        self.q_name = name
        self.q_grid = None if qparams is None else (
            float(qparams.scale), int(qparams.zero_point), int(qparams.qmin), int(qparams.qmax))
        self._q_float = False

    def forward(self, x):
        y = super().forward(x)
        if self._q_float or self.q_grid is None:
            return y
        return _SnapToGrid.apply(y, self._grid_mean(x).reshape(y.shape))

    def _grid_mean(self, x):
        scale, zero, lo, hi = self.q_grid
        with torch.no_grad():
            # codes by QParams.quantize's rule, round half away from zero in float64,
            # clamped as codes (centered: the mean of q - z is the same in both domains);
            # in place, a pass fewer each (the pool runs on every forward)
            v = x.detach().to(torch.float64) / scale
            centered = v.abs().add_(0.5).floor_().copysign_(v).clamp_(lo - zero, hi - zero)
            if isinstance(self, torch.nn.AdaptiveAvgPool2d):
                total, count = centered.sum(dim=(-2, -1)), x.shape[-2] * x.shape[-1]
            else:  # padded taps hold the zero point: centered 0
                window = (self.kernel_size, self.stride, self.padding)
                total = torch.nn.functional.avg_pool2d(centered, *window, divisor_override=1)
                kh, kw = (self.kernel_size,) * 2 if isinstance(self.kernel_size, int) \
                    else self.kernel_size
                # the taps inside the input where the padding does not count
                count = kh * kw if self.count_include_pad else torch.nn.functional.avg_pool2d(
                    torch.ones((1, 1, *x.shape[-2:]), dtype=torch.float64), *window,
                    divisor_override=1)
            # nn.windows.rounded_mean: sign(t) floor((2|t| + n) / 2n), exact in float64
            mean = torch.sign(total) * torch.floor((2 * total.abs() + count) / (2 * count))
            return (scale * mean).to(x.dtype)


class _SnapToGrid(torch.autograd.Function):
    """``exact``'s values with ``y``'s gradient."""

    @staticmethod
    def forward(ctx, y, exact):
        return exact.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _FoldedBatchNorm:
    """A batch norm folded into the approximate layer before it: identity here,
    its parameters stay in place (state_dict unchanged)."""

    def forward(self, x):
        return x


_CLASSES = {}


def swap_class(module, mixin, prefix):
    base = type(module)
    key = (mixin, base)
    if key not in _CLASSES:
        _CLASSES[key] = type(prefix + base.__name__, (mixin, base),
                             {"__module__": __name__, "_q_base": base})
    module.__class__ = _CLASSES[key]
