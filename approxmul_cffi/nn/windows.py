"""Sliding windows over NCHW arrays, shared by convolution and pooling, float and integer.

Output sizes are never computed here: callers pass them, as the C library
computed them (:func:`approxmul_cffi.conv2d_output_shape`).

>>> import numpy as np
>>> x = np.arange(16.0).reshape(1, 1, 4, 4)
>>> pool(x, "max", (2, 2), (2, 2), (0, 0), (2, 2), -np.inf)[0, 0].tolist()
[[5.0, 7.0], [13.0, 15.0]]
"""

import numpy as np

# Bytes of im2col columns built at once by conv_by_columns.
IM2COL_BUDGET = 1 << 24


def pad(x, padding, value):
    """``x`` with ``padding = (ph, pw)`` rows/columns of ``value`` around H and W.

    >>> pad(np.ones((1, 1, 1, 1)), (1, 0), 0.0)[0, 0].tolist()
    [[0.0], [1.0], [0.0]]
    """
    ph, pw = padding
    if ph == 0 and pw == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def windows(x, kernel, stride, padding, dilation, out_hw, pad_value):
    """Read-only view (N, C, OH, OW, KH, KW) of the padded input's windows.

    >>> windows(np.arange(9).reshape(1, 1, 3, 3), (2, 2), (1, 1), (0, 0), (1, 1), (2, 2),
    ...         0)[0, 0, 1, 1].tolist()
    [[4, 5], [7, 8]]
    """
    x = pad(x, padding, pad_value)
    n, c = x.shape[:2]
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x, (n, c, *out_hw, kh, kw),
        (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw), writeable=False,
    )


def conv_by_columns(x, w, geometry, out_hw, pad_value, matmul, out_dtype):
    """Grouped convolution as im2col GEMMs, the batch in bounded chunks.

    ``geometry`` holds stride, padding, dilation and groups;
    ``matmul(cols (P, K), w_g.T (K, O_g))`` is float matmul or an
    approximate one (the multiplier sees (activation, weight) pairs).

    >>> x = np.ones((1, 1, 3, 3)); w = np.ones((1, 1, 2, 2))
    >>> geometry = dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
    >>> conv_by_columns(x, w, geometry, (2, 2), 0.0, np.matmul, np.float64)[0, 0].tolist()
    [[4.0, 4.0], [4.0, 4.0]]
    """
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    g = geometry["groups"]
    og = o // g
    oh, ow = out_hw
    out = np.empty((n, o, oh, ow), dtype=out_dtype)
    per_image = oh * ow * cg * kh * kw * x.itemsize
    chunk = max(1, IM2COL_BUDGET // max(per_image, 1))
    for i in range(0, n, chunk):
        win = windows(x[i:i + chunk], (kh, kw), geometry["stride"], geometry["padding"],
                      geometry["dilation"], out_hw, pad_value)
        b = win.shape[0]
        for gi in range(g):
            cols = win[:, gi * cg:(gi + 1) * cg].transpose(0, 2, 3, 1, 4, 5)
            cols = cols.reshape(b * oh * ow, cg * kh * kw)
            wg = w[gi * og:(gi + 1) * og].reshape(og, cg * kh * kw)
            acc = matmul(cols, wg.T)
            out[i:i + b, gi * og:(gi + 1) * og] = acc.reshape(b, oh, ow, og).transpose(0, 3, 1, 2)
    return out


def pool(x, kind, kernel, stride, padding, out_hw, pad_value):
    """Max (``kind="max"``) or sum of each window; integer sums are int64.

    >>> pool(np.arange(16).reshape(1, 1, 4, 4), "avg", (3, 3), (2, 2), (1, 1), (2, 2), 0)
    array([[[[10, 24],
             [51, 90]]]])
    """
    if kind != "max" and x.dtype.kind not in "iu":
        # float sums keep NumPy's reduction over the window (its pairwise rounding)
        return windows(x, kernel, stride, padding, (1, 1), out_hw, pad_value).sum(axis=(4, 5))
    # Max and integer sums do not depend on the order: the window in two passes,
    # along the rows then down the columns (kh + kw elementwise passes instead of
    # kh * kw; a reduction over a strided view's window axes runs ~10x slower).
    (kh, kw), (sh, sw), (oh, ow) = kernel, stride, out_hw
    x = pad(x, padding, pad_value)[:, :, :(oh - 1) * sh + kh, :(ow - 1) * sw + kw]
    step = np.maximum if kind == "max" else np.add
    # codes of up to 16 bits sum exactly in int32 along a row of any practical kernel
    rows_dtype = x.dtype if kind == "max" else np.int32 if x.itemsize <= 2 else np.int64
    rows = np.array(x[..., 0:(ow - 1) * sw + 1:sw], dtype=rows_dtype)
    for j in range(1, kw):
        step(rows, x[..., j:j + (ow - 1) * sw + 1:sw], out=rows)
    out = np.array(rows[..., 0:(oh - 1) * sh + 1:sh, :],
                   dtype=x.dtype if kind == "max" else np.int64)
    for i in range(1, kh):
        step(out, rows[..., i:i + (oh - 1) * sh + 1:sh, :], out=out)
    return out


def rounded_mean(centered_sum, count):
    """round_half_away(sum / count) for integer sums, exactly; ``count`` broadcasts.

    In float64, as trunc(sum / count +- 1/2): for |sum| < 2**50 the quotient
    is a half-integer exactly when the true one is, and otherwise at least
    1 / (2 count) away from one, far beyond float64's rounding; the int64
    floor division it replaces ran ~4x slower on pooled images.

    >>> rounded_mean(np.array([5, -5, 4, 0, -4]), 2).tolist()
    [3, -3, 2, 0, -2]
    """
    q = np.asarray(centered_sum, dtype=np.int64) / np.asarray(count, dtype=np.float64)
    q += np.copysign(0.5, q)
    return np.trunc(q, out=q).astype(np.int64)
