"""Plain integer reference of a quantized Conv/Pool/Linear network.

Written independently of approxmul_cffi.nn and approxmul_cffi.quant: Python
integers for the gemmlowp requantization, int64 NumPy loops for the layers,
products looked up in the multiplier's table by raw bit pattern. It reads
only the quantized network's parameters (scales, zero points, weight codes,
float biases) and recomputes everything else.
"""

import math

import numpy as np


def round_half_away(v):
    return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)


def quantize_multiplier(real):
    """(mantissa, shift): real = mantissa * 2**(shift - 31), mantissa in [2**30, 2**31)."""
    if real == 0:
        return 0, 0
    frac, exp = math.frexp(real)
    mantissa = round_half_away(frac * 2**31)
    if mantissa == 2**31:
        mantissa, exp = mantissa // 2, exp + 1
    if exp < -31:
        return 0, 0
    return mantissa, exp


def gemmlowp_scale(x, mantissa, shift):
    """RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << left, m), right)."""
    x = max(-2**31, min(2**31 - 1, int(x)))
    left, right = max(shift, 0), max(-shift, 0)
    x = max(-2**31, min(2**31 - 1, x * 2**left))
    ab = x * mantissa
    nudge = 2**30 if ab >= 0 else 1 - 2**30
    q = ab + nudge
    high = abs(q) // 2**31 * (1 if q >= 0 else -1)  # C division truncates toward 0
    mask = 2**right - 1
    remainder = high & mask
    threshold = (mask >> 1) + (1 if high < 0 else 0)
    return (high >> right) + (1 if remainder > threshold else 0)


def requantize(acc, bias, s_x, s_w, s_y, zp_y, lo, hi, offset=None):
    """acc (N, C, ...) int64 -> output codes, per output channel on axis 1; ``offset``:
    integers added to each channel's int32 bias (bias correction)."""
    out = np.empty(acc.shape, dtype=np.int64)
    for c in range(acc.shape[1]):
        b = round_half_away(float(bias[c]) / (s_x * float(s_w[c])))
        b += 0 if offset is None else int(offset[c])
        m, s = quantize_multiplier(s_x * float(s_w[c]) / s_y)
        flat = acc[:, c].ravel()
        vals = [min(hi, max(lo, zp_y + gemmlowp_scale(int(a) + b, m, s))) for a in flat]
        out[:, c] = np.array(vals, dtype=np.int64).reshape(acc[:, c].shape)
    return out


def table_products(table, x, w):
    """table[x, w] for codes by their bit patterns (signed codes wrap), the table
    being 2^n x 2^n for n-bit codes; a None table: the exact products."""
    x, w = np.asarray(x, np.int64), np.asarray(w, np.int64)
    if table is None:
        return x * w
    mask = len(table) - 1
    return table[x & mask, w & mask]


def conv2d(table, x, w, zx, zw, padding):
    """Stride-1, groups-1 conv; padded taps hold the code zx and are multiplied too."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.full((n, c, h + 2 * padding, wd + 2 * padding), zx, dtype=np.int64)
    xp[:, :, padding:padding + h, padding:padding + wd] = x
    oh, ow = h + 2 * padding - kh + 1, wd + 2 * padding - kw + 1
    acc = np.zeros((n, o, oh, ow), dtype=np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + oh, j:j + ow]  # (n, c, oh, ow)
            for oc in range(o):
                prods = table_products(table, patch, w[oc, :, i, j][None, :, None, None])
                acc[:, oc] += prods.sum(axis=1)
                acc[:, oc] -= zw * patch.sum(axis=1)
                acc[:, oc] -= zx * int(w[oc, :, i, j].astype(np.int64).sum())
                acc[:, oc] += c * zx * zw
    return acc


def linear(table, x, w, zx, zw):
    """x (N, K) codes, w (O, K) codes."""
    k = x.shape[1]
    prods = table_products(table, x[:, None, :], w[None, :, :])  # (N, O, K)
    acc = prods.sum(axis=2)
    acc -= zw * x.astype(np.int64).sum(axis=1, keepdims=True)
    acc -= zx * w.astype(np.int64).sum(axis=1)[None, :]
    return acc + k * zx * zw


def maxpool2(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))
