"""Plain NumPy references the kernels are checked against, bit for bit."""

import numpy as np  # noqa: I001


def codes(values, bits):
    """Raw bit patterns of operand values (two's complement for negatives)."""
    return np.asarray(values).astype(np.int64) & ((1 << bits) - 1)


def table_matmul(table, a, b, bits, a_zero_point=0, b_zero_point=0):
    """sum_k table[a[i,k], b[k,j]] with exact zero-point cross terms, in int64."""
    table = np.asarray(table, dtype=np.int64)
    products = table[codes(a, bits)[:, :, None], codes(b, bits)[None, :, :]].sum(axis=1)
    a64, b64 = np.asarray(a, np.int64), np.asarray(b, np.int64)
    k = a64.shape[1]
    return (products - b_zero_point * a64.sum(axis=1)[:, None]
            - a_zero_point * b64.sum(axis=0)[None, :] + k * a_zero_point * b_zero_point)


def exact_table(bits, signed):
    """The exact product table indexed by raw bit patterns."""
    patterns = np.arange(1 << bits)
    values = patterns - (1 << bits) * (patterns >= (1 << (bits - 1))) if signed else patterns
    return np.outer(values, values).astype(np.int64)


def accumulator_dtype(max_abs_product, bits, signed, inner, a_zero_point=0, b_zero_point=0):
    """The documented output dtype rule: int32 exactly when every sum of ``inner``
    zero-point adjusted terms |M(a,b) - zb*a - za*b + za*zb| fits it."""
    max_operand = 1 << (bits - 1) if signed else (1 << bits) - 1
    term = (int(max_abs_product) + (abs(a_zero_point) + abs(b_zero_point)) * max_operand
            + abs(a_zero_point * b_zero_point))
    return "int32" if term * max(inner, 1) <= 2**31 - 1 else "int64"


def product_matmul(product, a, b, a_zero_point=0, b_zero_point=0):
    """sum_k product(a[i,k], b[k,j]) with exact zero-point cross terms, in int64;
    ``product`` maps operand values to products elementwise (any width)."""
    a64, b64 = np.asarray(a, np.int64), np.asarray(b, np.int64)
    rows, inner = a64.shape
    out = np.zeros((rows, b64.shape[1]), np.int64)
    step = max(1, 2**21 // max(1, inner * b64.shape[1]))  # bounded temporaries
    for i in range(0, rows, step):
        out[i:i + step] = product(a64[i:i + step, :, None], b64[None, :, :]).sum(axis=1)
    return (out - b_zero_point * a64.sum(axis=1)[:, None]
            - a_zero_point * b64.sum(axis=0)[None, :] + inner * a_zero_point * b_zero_point)
