"""Independent int64 / float64 references for the torch adapter tests.

Written without approxmul_cffi.nn, quant or torch.nn.grad: explicit loops
over kernel taps on padded NumPy arrays, products looked up in the
multiplier's table by raw bit pattern, the gemmlowp requantization of
tests/nn_reference.py in Python integers.
"""

import numpy as np

import nn_reference


def quantize(x, scale, zero_point, lo, hi):
    """round half away from zero, then clamp (float64 arithmetic)."""
    v = np.asarray(x, dtype=np.float64) / scale
    return np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5) + zero_point, lo, hi).astype(np.int64)


def _taps(xp, kh, kw, stride, dilation, oh, ow):
    """Yield (i, j, patch) with patch (N, C, OH, OW) the input under tap (i, j)."""
    for i in range(kh):
        for j in range(kw):
            y0, x0 = i * dilation[0], j * dilation[1]
            yield i, j, xp[:, :, y0:y0 + stride[0] * (oh - 1) + 1:stride[0],
                           x0:x0 + stride[1] * (ow - 1) + 1:stride[1]]


def conv_geometry(x_shape, w_shape, stride, padding, dilation):
    n, c, h, w = x_shape
    o, cg, kh, kw = w_shape
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    return oh, ow


def pad(x, padding, value):
    n, c, h, w = x.shape
    xp = np.full((n, c, h + 2 * padding[0], w + 2 * padding[1]), value, dtype=x.dtype)
    xp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w] = x
    return xp


def conv2d_acc(table, x, w, zx, zw, stride, padding, dilation, groups):
    """Accumulators of the approximate convolution (int64)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    oh, ow = conv_geometry(x.shape, w.shape, stride, padding, dilation)
    xp = pad(np.asarray(x, np.int64), padding, zx)
    acc = np.zeros((n, o, oh, ow), dtype=np.int64)
    for i, j, patch in _taps(xp, kh, kw, stride, dilation, oh, ow):
        for oc in range(o):
            g = oc // og
            px = patch[:, g * cg:(g + 1) * cg]
            wv = np.asarray(w[oc, :, i, j], np.int64)
            acc[:, oc] += nn_reference.table_products(table, px, wv[None, :, None, None]).sum(1)
            acc[:, oc] -= zw * px.sum(1) + zx * int(wv.sum()) - cg * zx * zw
    return acc


def layer_codes(table, x_codes, w_codes, bias, s_x, zx, s_w, zw, s_y, zy, lo, hi, geometry=None):
    """Output codes of a Conv2d (geometry given) or Linear layer."""
    if geometry is None:
        acc = nn_reference.linear(table, np.asarray(x_codes, np.int64), np.asarray(w_codes, np.int64), zx, zw)
    else:
        acc = conv2d_acc(table, x_codes, w_codes, zx, zw, **geometry)
    return nn_reference.requantize(acc, bias, s_x, s_w, s_y, zy, lo, hi)


def conv2d_grads(g, x_codes, w_codes, da, db, s_x, zx, s_w, zw, stride, padding, dilation, groups):
    """(grad_x, grad_w) with dy/dx = s_w (da[x, w] - zw), dy/dw = s_x (db[x, w] - zx).

    ``da``/``db`` are callables (x codes, w codes) -> float64 arrays.
    """
    n, c, h, wd = x_codes.shape
    o, cg, kh, kw = w_codes.shape
    og = o // groups
    oh, ow = conv_geometry(x_codes.shape, w_codes.shape, stride, padding, dilation)
    xp = pad(np.asarray(x_codes, np.int64), padding, zx)
    gxp = np.zeros(xp.shape)
    gw = np.zeros(w_codes.shape)
    for i, j, patch in _taps(xp, kh, kw, stride, dilation, oh, ow):
        y0, x0 = i * dilation[0], j * dilation[1]
        ys = slice(y0, y0 + stride[0] * (oh - 1) + 1, stride[0])
        xs = slice(x0, x0 + stride[1] * (ow - 1) + 1, stride[1])
        for oc in range(o):
            grp = oc // og
            cs = slice(grp * cg, (grp + 1) * cg)
            wv = np.asarray(w_codes[oc, :, i, j], np.int64)[None, :, None, None]
            go = g[:, oc][:, None]                                   # (N, 1, OH, OW)
            gxp[:, cs, ys, xs] += go * s_w[oc] * (da(patch[:, cs], wv) - zw)
            gw[oc, :, i, j] += (go * s_x * (db(patch[:, cs], wv) - zx)).sum(axis=(0, 2, 3))
    return gxp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + wd], gw
