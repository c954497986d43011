"""The approximate layer as one torch operator, with its autograd formulas.

``approxmul::layer(x, weight, bias, key, gradient) -> (y, x_codes)`` runs
the evaluator's integer Conv2d/Linear node (``nn.QuantizedLayer``) registered
under ``key``: quantize ``x`` with the layer's input QParams, integer layer
through approxmul's kernels, requantize, dequantize to ``x``'s dtype.
``weight`` and ``bias`` are the layer's float (BN-folded) parameters: the
forward reads the cached integer weights; they are inputs so that autograd
and torch.compile see the dependency. ``x_codes`` (the layer's input codes)
feed the backward.
"""

import itertools
import weakref

import torch
import torch.nn.functional as F

from ..adapters import GRADIENTS  # noqa: F401 (re-exported)

# key -> the approximate module (weakly: a dropped model frees its layers)
_LAYERS = weakref.WeakValueDictionary()
_KEYS = itertools.count(1)


def register(module):
    key = next(_KEYS)
    _LAYERS[key] = module
    return key


def layer_of(key):
    module = _LAYERS.get(key)
    if module is None:
        raise RuntimeError(f"approximate layer #{key} no longer exists")
    return module


@torch.library.custom_op("approxmul::layer", mutates_args=())
def approx_layer(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, key: int,
                 gradient: str) -> tuple[torch.Tensor, torch.Tensor]:
    return layer_of(key).integer_forward(x)


@approx_layer.register_fake
def _(x, weight, bias, key, gradient):
    module = layer_of(key)
    out_shape = module.output_shape(tuple(x.shape))
    return x.new_empty(out_shape), x.new_empty(tuple(x.shape), dtype=module.code_dtype)


def _setup(ctx, inputs, output):
    x, weight, bias, key, gradient = inputs
    ctx.key, ctx.gradient = key, gradient
    ctx.x_shape, ctx.x_dtype = list(x.shape), x.dtype
    ctx.save_for_backward(output[1], weight, bias)


def _backward(ctx, grad_y, grad_codes):
    if ctx.gradient == "none":
        raise RuntimeError("this approximate layer was built with gradient='none' "
                           "(inference only); approximate(..., gradient='ste') to train")
    codes, weight, bias = ctx.saved_tensors
    gx, gw, gb = approx_layer_backward(codes, grad_y, weight, bias, ctx.key, ctx.gradient,
                                       ctx.x_shape)
    return gx.to(ctx.x_dtype), gw, gb, None, None


# The backward is an operator of its own, opaque as the forward is: it reads
# the layer's cached integer weights and gradient tables, which AOT autograd
# (torch.compile of a training step) must not trace with fake tensors.
@torch.library.custom_op("approxmul::layer_backward", mutates_args=())
def approx_layer_backward(codes: torch.Tensor, grad_y: torch.Tensor, weight: torch.Tensor,
                          bias: torch.Tensor, key: int, gradient: str,
                          x_shape: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return layer_backward(layer_of(key), gradient, codes, grad_y, tuple(x_shape))


@approx_layer_backward.register_fake
def _(codes, grad_y, weight, bias, key, gradient, x_shape):
    dtype = _grad_dtype(grad_y)
    return (grad_y.new_empty(x_shape, dtype=dtype), weight.new_empty(weight.shape, dtype=dtype),
            bias.new_empty(bias.shape, dtype=dtype))


approx_layer.register_autograd(_backward, setup_context=_setup)


def _grad_dtype(grad_y):
    """The type the backward computes in: float32 or float64."""
    return grad_y.dtype if grad_y.dtype in (torch.float32, torch.float64) else torch.float32


# --------------------------------------------------------------------------
# Backward formulas (docs/retraining.md). The layer computes
#   y = s_x s_w[o] acc + b,  acc = sum M(x, w) - z_w sum x - z_x sum w + K z_x z_w
# on codes x = x_real / s_x + z_x, w = w_real / s_w + z_w (rounding passes
# straight through), so
#   dy/dx_real = s_w[o] (dM/da(x, w) - z_w),  dy/dw_real = s_x (dM/db(x, w) - z_x).
# "ste" takes M(a, b) = a b: dM/da = w, dM/db = x, the gradients of the exact
# layer on dequantized operands. "table" takes dM/da(x, w) = slope_a[w] and
# dM/db(x, w) = slope_b[x]; "table2d" the full smoothed tables.


def _geometry(module):
    return dict(stride=module.q_stride, padding=module.q_padding, dilation=module.q_dilation,
                groups=module.q_groups)


def _conv_backward(x_like, w_like, grad, x_shape, w_shape, pad_value, geom):
    """(grad_x, grad_w) of a conv with input x_like and weight w_like (grouped, padded)."""
    gx = torch.nn.grad.conv2d_input(x_shape, w_like, grad, **geom)
    if pad_value:
        # padded taps hold the code z_x, which maps to pad_value, not 0
        ph, pw = geom["padding"]
        x_like = F.pad(x_like, (pw, pw, ph, ph), value=pad_value)
        geom = dict(geom, padding=(0, 0))
    gw = torch.nn.grad.conv2d_weight(x_like, w_shape, grad, **geom)
    return gx, gw


def layer_backward(module, gradient, codes, grad_y, x_shape):
    """(grad_x, grad_w, grad_b) in the layer's (4-D for convs) shapes."""
    q = module.quantized(bool(module.q_multiplier.signed))
    dtype = _grad_dtype(grad_y)
    g = grad_y.to(dtype)
    if module.q_conv:
        g = g.reshape(module.conv_out_shape(g.shape))
    else:  # a Linear on (..., features): every leading index is a sample
        g = g.reshape(-1, g.shape[-1])
    s_x, z_x, s_w, z_w = q["s_x"], q["z_x"], q["s_w"].to(dtype), q["z_w"]
    grad_b = g.sum(dim=(0, 2, 3) if module.q_conv else 0)
    w_codes = q["w_codes"]
    w_shape = tuple(w_codes.shape)
    sw = s_w.reshape(-1, *([1] * (w_codes.dim() - 1)))
    if gradient == "table2d":
        gx, gw = _table2d(module, q, codes, g, dtype)
    else:
        if gradient == "ste":
            w_map, x_map = q["w_dq"].to(dtype), s_x * (codes.to(dtype) - z_x)
            pad = 0.0
        else:  # 1-D slope tables
            slope_a, slope_b = module.gradient_tables("slopes", dtype)
            mask = module.q_mask
            w_map = sw * (slope_a[w_codes.long() & mask] - z_w)
            x_map = s_x * (slope_b[codes.long() & mask] - z_x)
            pad = float(s_x * (slope_b[z_x & mask] - z_x))
        if module.q_conv:
            gx, gw = _conv_backward(x_map.reshape(module.conv_in_shape(codes.shape)), w_map, g,
                                    module.conv_in_shape(codes.shape), w_shape, pad,
                                    _geometry(module))
        else:
            gx, gw = g @ w_map, g.t() @ x_map.reshape(-1, x_map.shape[-1])  # gx: reshaped below
    return gx.reshape(x_shape), gw, grad_b


# Elements of the gathered (chunk, K, L, O) gradient entries at once.
_GATHER_BUDGET = 1 << 24


def _table2d(module, q, codes, g, dtype):
    """Backward through the full 2^n x 2^n gradient tables, by columns (im2col)."""
    grad_a, grad_b = module.gradient_tables("tables", dtype)
    s_x, z_x, s_w, z_w = q["s_x"], q["z_x"], q["s_w"].to(dtype), q["z_w"]
    mask = module.q_mask
    w_codes = q["w_codes"].long() & mask
    if module.q_conv:
        x4 = codes.reshape(module.conv_in_shape(codes.shape))
        geom = _geometry(module)
        n, c, h, w = x4.shape
        kh, kw = w_codes.shape[2:]
        groups = geom["groups"]
        # unfold the codes (padding with z_x) as small floats: exact below 2^24
        padded = F.pad(x4.to(torch.float32), (geom["padding"][1],) * 2 + (geom["padding"][0],) * 2,
                       value=float(z_x))
        cols = F.unfold(padded, (kh, kw), dilation=geom["dilation"], stride=geom["stride"])
        cols = cols.round().long() & mask                      # (N, C*kh*kw, L)
        gl = g.reshape(n, g.shape[1], -1)                      # (N, O, L)
    else:
        groups = 1
        cols = (codes.long() & mask).reshape(-1, codes.shape[-1], 1)
        gl = g.reshape(-1, g.shape[-1], 1)
        n = cols.shape[0]
    o = w_codes.shape[0]
    og, k = o // groups, w_codes[0].numel()
    wflat = w_codes.reshape(o, k)
    sw_g = (gl * s_w.reshape(1, -1, 1))                        # g * s_w[o]
    gcols = torch.empty(cols.shape, dtype=dtype)
    gw = torch.empty((o, k), dtype=dtype)
    step = max(1, _GATHER_BUDGET // max(1, k * cols.shape[2] * og))
    for gi in range(groups):
        ci, oi = slice(gi * k, (gi + 1) * k), slice(gi * og, (gi + 1) * og)
        wg = wflat[oi].t()                                     # (K, Og)
        acc_w = torch.zeros((og, k), dtype=dtype)
        for i in range(0, n, step):
            idx = cols[i:i + step, ci].unsqueeze(-1) * (mask + 1) + wg[None, :, None, :]  # (b, K, L, Og)
            ga, gb = grad_a.reshape(-1)[idx], grad_b.reshape(-1)[idx]
            gg, gs = gl[i:i + step, oi], sw_g[i:i + step, oi]
            gcols[i:i + step, ci] = (torch.einsum("bklo,bol->bkl", ga, gs)
                                     - z_w * gs.sum(1, keepdim=True))
            acc_w += torch.einsum("bklo,bol->ok", gb, gg) - z_x * gg.sum((0, 2))[:, None]
        gw[oi] = s_x * acc_w
    if module.q_conv:
        geom = _geometry(module)
        ph, pw = geom["padding"]
        full = F.fold(gcols, (h + 2 * ph, w + 2 * pw), (kh, kw), dilation=geom["dilation"],
                      stride=geom["stride"])
        gx = full[:, :, ph:ph + h, pw:pw + w]
        return gx, gw.reshape(w_codes.shape)
    return gcols.reshape(n, -1), gw
