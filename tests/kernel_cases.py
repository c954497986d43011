"""Deterministic matmul cases that exercise every kernel path and its edges.

Shared by the ISA parity test (run once per instruction set in a
subprocess) and its reference check. Sizes include 0, 1, values off every
vector width (8, 16, 32, 64, 128), large inner sizes (int64 flushing; 70000 > the table kernel's 65536-step uint32 flush),
strided and transposed views, both signednesses and 1 or 2 threads.
"""

import itertools

import numpy as np

import approxmul_cffi as am

SHAPES = [(0, 3, 4), (1, 1, 1), (3, 0, 5), (7, 33, 5), (9, 65, 129), (33, 130, 17),
          (64, 200, 70), (5, 300, 257), (130, 40, 3), (2, 40000, 3), (3, 70000, 2),
          (300, 20, 2),
          # conv2d's im2col shape: pixels x taps (column-major: index 13 is
          # Fortran-ordered) against few channels, which the int16 GEMM flips so
          # that the pixels pack as B; odd inner sizes leave half pairs
          (16, 45, 700), (700, 45, 16)]
# Only for the multipliers of the byte (vpdpbusd) path: several row and
# column jobs on 2 threads, and A packed in more than one row block; B's
# quads packed once for several row jobs: a column-major A (flipped), then
# several column jobs and inner blocks on 2 threads (90 x 1100 x 300, its
# index odd and not a multiple of 3: C-ordered A, zero points).
BYTE_SHAPES = [(40, 100, 700), (72, 70000, 2), (96, 600, 40), (90, 1100, 300)]
BYTE_PATH = ("exact-u8", "exact-s8", "trunc4")
# Only for the byte path, B column-major (a Linear layer's x @ W.T; the
# flipped problem's A): whole 16-quad steps and fewer, inner off whole
# quads (the padded last quad), more than one inner block, columns off the
# 16-column groups and over several panels.
COLUMN_SHAPES = [(5, 37, 45), (64, 1023, 100), (3, 130, 70), (40, 64, 16), (1, 2, 33)]
COLUMN_PATH = ("exact-u8", "exact-s8", "drum", "trunc4")
# Only for table multipliers: the product-table-order kernel's edges (row
# blocks of 16 with a partial one, streamed columns off its 4-column step,
# inner off its 8-step block and past its 256-code packing, both orientations).
TABLE_SHAPES = [(40, 300, 203), (203, 37, 21)]
TABLE_PATH = ("table-u8", "table-s8", "table-u6", "table-max")
# Only for the nibble kernel (4-bit tables, and the low-nibble errors of 8-bit
# ones): column blocks of more than one 128-wide panel, several column jobs,
# the flipped problem, inner steps past its 256-step block.
NIBBLE_SHAPES = [(40, 600, 700), (701, 37, 3), (3, 520, 1030)]
NIBBLE_PATH = ("table-u4", "nibble-error-s8")


def drum_table(bits=8, k=3):
    f = np.arange(1 << bits)
    out = f.copy()
    for v in range(1 << bits):
        p = int(v).bit_length()
        if p > k:
            out[v] = ((v >> (p - k)) | 1) << (p - k)
    return np.outer(out, out)


def truncated_table(cut, bits=8):
    codes = np.arange(1 << bits)
    return truncated_values(codes[:, None], codes[None, :], cut, bits)


def drum_values(v, k):
    """DRUM's operand rounding of non-negative values, for any width."""
    v = np.asarray(v, np.int64)
    length = np.zeros_like(v)
    for bit in range(63):
        length = np.where(v >> bit != 0, bit + 1, length)
    cut = np.maximum(length - k, 0)
    return np.where(length > k, ((v >> cut) | 1) << cut, v)


def truncated_values(a, b, cut, bits, hbl=0):
    """Unsigned products without the partial-product bits of columns below cut
    (and of the rows of b's bits below hbl: a broken array)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    total = np.zeros(np.broadcast(a, b).shape, np.int64)
    for i in range(bits):
        for j in range(max(cut - i, hbl, 0), bits):
            total += (((a >> i) & 1) * ((b >> j) & 1)) << (i + j)
    return total


def baugh_wooley_values(a, b, bits, cut, hbl=0):
    """Signed column truncation: the Baugh-Wooley array's bits in columns >= cut
    and rows >= hbl (NAND where exactly one index is the sign bit, ones in
    columns bits and 2 bits - 1), mod 2^(2 bits)."""
    mask, width = (1 << bits) - 1, 2 * bits
    pa, pb = np.asarray(a, np.int64) & mask, np.asarray(b, np.int64) & mask
    total = np.zeros(np.broadcast(pa, pb).shape, np.int64)
    total += sum(1 << c for c in (bits, width - 1) if c >= cut)
    for i in range(bits):
        for j in range(max(cut - i, hbl, 0), bits):
            bit = ((pa >> i) & 1) * ((pb >> j) & 1)
            total += (bit ^ int((i == bits - 1) != (j == bits - 1))) << (i + j)
    total &= (1 << width) - 1
    return np.where(total >> (width - 1) != 0, total - (1 << width), total)


def signed_drum(v, k):
    """Signed DRUM: the magnitude rounded, the sign kept."""
    v = np.asarray(v, np.int64)
    return np.sign(v) * drum_values(np.abs(v), k)


def mitchell_values(a, b):
    """Mitchell's products, any width, sign-magnitude for negative operands:
    with |x| = 2^k (1 + f), 2^(k1+k2) (1 + f1 + f2) if f1 + f2 < 1, else
    2^(k1+k2+1) (f1 + f2), in integers (all fraction bits kept)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    sign = np.sign(a) * np.sign(b)
    a, b = np.abs(a), np.abs(b)

    def leading_one(x):
        k = np.zeros_like(x)
        for bit in range(1, 63):
            k = np.where(x >> bit != 0, bit, k)
        return k
    k1, k2 = leading_one(a), leading_one(b)
    total = ((a - (1 << k1)) << k2) + ((b - (1 << k2)) << k1)  # 2^(k1+k2) (f1 + f2)
    power = np.int64(1) << (k1 + k2)
    return sign * np.where(total < power, power + total, 2 * total)


def ilm_values(a, b, iterations):
    """ILM's products, any width, sign-magnitude: each round adds 2^(k1+k2) +
    m1 2^k2 + m2 2^k1 (|x| = 2^k + m) and goes on with m1, m2, for up to
    iterations + 1 rounds while both are nonzero."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    sign = np.sign(a) * np.sign(b)
    a, b = np.broadcast_arrays(np.abs(a), np.abs(b))
    total = np.zeros(a.shape, np.int64)

    def leading_one(x):
        k = np.zeros_like(x)
        for bit in range(1, 63):
            k = np.where(x >> bit != 0, bit, k)
        return k
    for _ in range(iterations + 1):
        live = (a != 0) & (b != 0)
        k1, k2 = leading_one(a), leading_one(b)
        m1, m2 = a - (np.int64(1) << k1), b - (np.int64(1) << k2)
        total += np.where(live, (np.int64(1) << (k1 + k2)) + (m1 << k2) + (m2 << k1), 0)
        a, b = np.where(live, m1, 0), np.where(live, m2, 0)
    return sign * total


def roba_rounded(v):
    """RoBA's operand rounding, any width: |v| to the nearest power of two (ties,
    1.5 * 2^p, up), the sign kept."""
    v = np.asarray(v, np.int64)
    m = np.abs(v)
    p = np.zeros_like(m)
    for bit in range(1, 63):
        p = np.where(m >> bit != 0, bit, p)
    up = np.where(m >= 3 << np.maximum(p - 1, 0), p + 1, p)
    return np.sign(v) * np.where(m <= 1, m, np.int64(1) << np.where(m <= 1, 0, up))


def roba_sums(a, b):
    """sum_k M(a[i, k], b[k, j]) for RoBA (sign-magnitude when signed), from its
    definition s_a s_b (A_r |b| + |a| B_r - A_r B_r) as three int64 matmuls."""
    ar, br = roba_rounded(a), roba_rounded(b)
    return ar @ b + a @ br - ar @ br


def multipliers():
    """(name, multiplier, signed, product): product(a, b) gives the products of
    operand values elementwise, from the test's own table or formula."""
    from reference import codes, exact_table
    rng = np.random.default_rng(7)

    def from_table(table, bits=8, signed=False):
        table = np.asarray(table, np.int64)
        return (am.Multiplier.from_table(table, signed=signed), signed,
                lambda a, b: table[codes(a, bits), codes(b, bits)])

    def exact(a, b):
        return np.asarray(a, np.int64) * np.asarray(b, np.int64)

    yield "exact-u8", am.Multiplier.exact(8), False, exact
    yield "exact-s8", am.Multiplier.exact(8, signed=True), True, exact
    yield "exact-u5", am.Multiplier.exact(5), False, exact
    yield ("drum", *from_table(drum_table()))
    # rank 2: exact plus a nibble table on AVX2, two GEMMs elsewhere
    yield ("trunc1", *from_table(truncated_table(1)))
    yield ("trunc2", *from_table(truncated_table(2)))
    # rank 5; bit-linear terms with negative u and powers of two to move
    yield ("trunc4", *from_table(truncated_table(4)))
    # ranks 7 and 8: byte GEMMs where they run on AMX tiles, else the table
    # kernel (signed: Baugh-Wooley's inverted bits, from the family)
    yield ("trunc6", *from_table(truncated_table(6)))
    trunc7s = am.multiplier("truncated:cut=7,signed=1")
    yield ("trunc7-s8", *from_table(np.asarray(trunc7s.table(), np.int64).reshape(256, 256),
                                    signed=True))
    # signed, bit-linear in the second operand only (factorized on the transpose)
    t = exact_table(8, signed=True)
    t[:, 1::2] += 3 * (np.arange(256)[:, None] % 2)
    yield ("linear-s8", *from_table(t, signed=True))
    # exact plus errors of small integer rank that no bit pattern explains:
    # the general lattice search finds them (rank 2: factorized on every
    # set; rank 4: only where APPROXMUL_MAX_FACTORIZED_RANK forces it, else
    # the table kernel)
    v8 = np.arange(256)
    yield ("lattice-u8", *from_table(v8[:, None] * v8 + (v8 % 5 - 2)[:, None] * (v8 % 7 - 3)))
    yield ("lattice-s8", *from_table(
        signed8_values()[:, None] * signed8_values() + (v8 * 3 % 11 - 5)[:, None] * (v8 >> 5)
        - (v8 % 6)[:, None] * (v8 * 5 % 9) + 2 * (v8 >> 4)[:, None] * (v8 % 3), signed=True))
    yield ("table-u8", *from_table(rng.integers(0, 65536, (256, 256))))
    yield ("table-s8", *from_table(rng.integers(-20000, 20000, (256, 256)), signed=True))
    yield ("table-u6", *from_table(rng.integers(-9, 60000, (64, 64)), bits=6))
    yield ("table-wide", *from_table(rng.integers(-2**30, 2**30, (256, 256))))
    # up to 4 bits: the nibble kernel when the products span a byte, else the
    # byte-plane table kernel
    yield ("table-u4", *from_table(rng.integers(-100, 156, (16, 16)), bits=4))
    yield ("table-s4", *from_table(rng.integers(-300, 300, (16, 16)), bits=4, signed=True))
    yield ("table-u3", *from_table(rng.integers(0, 256, (8, 8)), bits=3))
    # exact plus an arbitrary error of the low nibbles: exact-plus-table on
    # sets with a nibble kernel (a 7-bit one, whose high part is 3 bits)
    signed8 = signed8_values()
    nibble_error = rng.integers(-70, 71, (16, 16))
    yield ("nibble-error-s8", *from_table(
        signed8[:, None] * signed8 + nibble_error[(signed8 & 15)[:, None], signed8 & 15],
        signed=True))
    yield ("nibble-error-u7", *from_table(
        np.arange(128)[:, None] * np.arange(128) + nibble_error[(np.arange(128) & 15)[:, None],
                                                               np.arange(128) & 15], bits=7))
    # tables of 9-12 bits: an arbitrary one runs on the generic kernel, a
    # structured one is factorized from its entries
    yield ("table-s10", *from_table(exact_table(10, signed=True) + rng.integers(-40, 41, (1024, 1024)),
                                    bits=10, signed=True))
    yield ("drum-table-u10", *from_table(drum_table(bits=10, k=4), bits=10))
    # 9 to 16 bits: no table; exact GEMMs (split into byte GEMMs), factorized
    # families whose factors fit int16, and the function plan
    yield "exact-s12", am.Multiplier.exact(12, signed=True), True, exact
    yield "exact-u16", am.Multiplier.exact(16), False, exact
    yield "exact-s16", am.Multiplier.exact(16, signed=True), True, exact
    yield ("drum-u12", am.multiplier("drum:bits=12,k=4"), False,
           lambda a, b: drum_values(a, 4) * drum_values(b, 4))
    # factors beyond int16 (2^16 - 1; signed: 2^15): byte-split GEMMs of the factors
    yield ("drum-u16", am.multiplier("drum:bits=16,k=4"), False,
           lambda a, b: drum_values(a, 4) * drum_values(b, 4))
    yield ("drum-s16", am.multiplier("drum:bits=16,k=6,signed=1"), True,
           lambda a, b: signed_drum(a, 6) * signed_drum(b, 6))
    # RoBA's rank 2 from the family, factors up to 2^16 (signed: S-RoBA)
    yield ("roba-s16", am.multiplier("roba:bits=16,signed=1"), True,
           lambda a, b: roba_rounded(a) * b + np.asarray(a, np.int64) * roba_rounded(b)
           - roba_rounded(a) * roba_rounded(b))
    # rank 3 with factors beyond int16 (up to 40000), the longest split of
    # factors into bytes, found in a 12-bit table
    side = np.arange(4096)
    u = np.stack([rng.integers(0, 40000, 4096), side * 9, np.full(4096, 1)])
    v = np.stack([rng.integers(0, 12, 4096), side % 7, side * 3])
    yield ("rank3-table-u12", *from_table((u[:, :, None] * v[:, None, :]).sum(0), bits=12))
    # rows below hbl: a b minus the low byte's rows, a table GEMM for the low
    # byte pair and one for b's low byte under a's high byte (faster than
    # the rank-3 split factors a (b - b_0 - 2 b_1))
    yield ("bam2-u16", am.multiplier("bam:bits=16,hbl=2,vbl=0"), False,
           lambda a, b: np.asarray(a, np.int64) * (np.asarray(b, np.int64) & ~3))
    # error in the low bytes (cut <= 8): the exact GEMM plus an 8-bit table
    # GEMM of the error, from the family, or found in a 10-bit table
    yield ("trunc2-u16", am.multiplier("truncated:bits=16,cut=2"), False,
           lambda a, b: truncated_values(a, b, 2, 16))
    yield ("trunc8-u16", am.multiplier("truncated:bits=16,cut=8"), False,
           lambda a, b: truncated_values(a, b, 8, 16))
    yield ("trunc7-s16", am.multiplier("truncated:bits=16,cut=7,signed=1"), True,
           lambda a, b: baugh_wooley_values(a, b, 16, 7))
    values = np.arange(1024) - 1024 * (np.arange(1024) >= 512)
    yield ("trunc5-table-s10", *from_table(baugh_wooley_values(values[:, None], values, 10, 5),
                                           bits=10, signed=True))
    # Mitchell: the function plan, its products in vector lanes (mitchell_block)
    yield ("mitchell-u16", am.multiplier("mitchell:bits=16"), False, mitchell_values)
    yield ("mitchell-s12", am.multiplier("mitchell:bits=12,signed=1"), True, mitchell_values)
    yield ("ilm2-u16", am.multiplier("ilm:bits=16,iterations=2"), False,
           lambda a, b: ilm_values(a, b, 2))
    yield ("ilm0-s10", am.multiplier("ilm:bits=10,iterations=0,signed=1"), True,
           lambda a, b: ilm_values(a, b, 0))
    # cut > 8 reaches the cross byte pairs, rows below hbl every pair with
    # b's low byte: the exact GEMM plus a table GEMM for each such pair
    yield ("trunc9-u16", am.multiplier("truncated:bits=16,cut=9"), False,
           lambda a, b: truncated_values(a, b, 9, 16))
    yield ("trunc16-s16", am.multiplier("truncated:bits=16,cut=16,signed=1"), True,
           lambda a, b: baugh_wooley_values(a, b, 16, 16))
    yield ("bam3-s12", am.multiplier("bam:bits=12,hbl=3,vbl=10,signed=1"), True,
           lambda a, b: baugh_wooley_values(a, b, 12, 10, hbl=3))
    # products at the top of uint16 (one 0, so that the kernel's byte planes
    # are not offset): the table kernel's 16-bit sums of 256 steps reach
    # their bound (65280 in a byte plane)
    top = 65535 - rng.integers(0, 2, (256, 256))
    top[0, 0] = 0
    yield ("table-max", *from_table(top))


def signed8_values():
    """Signed 8-bit values by raw bit pattern (0..127, then -128..-1)."""
    return np.arange(256) - 256 * (np.arange(256) >= 128)


def products():
    """Multiplier name -> its reference product function."""
    return {name: product for name, _, _, product in multipliers()}


def operands(rng, shape, bits, signed, wide):
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    wide = wide or bits > 8
    dtype = (np.int16 if signed else np.uint16) if wide else (np.int8 if signed else np.uint8)
    return rng.integers(low, high, size=shape).astype(dtype)


def cases():
    rng = np.random.default_rng(11)
    for mname, mult, signed, _ in multipliers():
        bits = mult.bits
        extra = (BYTE_SHAPES if mname in BYTE_PATH else
                 TABLE_SHAPES if mname in TABLE_PATH else
                 NIBBLE_SHAPES if mname in NIBBLE_PATH else [])
        for index, (rows, inner, cols) in enumerate(SHAPES + extra):
            if inner > 1000 and mname not in ("exact-u8", "exact-s8", "trunc4", "table-u8",
                                              "table-u4", "nibble-error-s8",
                                              "drum", "table-wide", "exact-u16", "exact-s16",
                                              "drum-u12", "drum-s16", "trunc7-s16"):
                continue
            wide = index % 4 == 3
            a = operands(rng, (rows, inner), bits, signed, wide)
            b = operands(rng, (inner, cols), bits, signed, wide)
            if index % 3 == 1:
                a = np.asfortranarray(a)
            if index % 3 == 2:
                b = np.ascontiguousarray(b[::-1])[::-1]
            low, high = mult.operand_range
            za, zb = (0, 0) if index % 2 == 0 else (int(rng.integers(low, high + 1)),
                                                     int(rng.integers(low, high + 1)))
            yield (f"{mname}-{rows}x{inner}x{cols}", mult, a, b, za, zb, 1 + index % 2)
        if mname in COLUMN_PATH:
            for index, (rows, inner, cols) in enumerate(COLUMN_SHAPES):
                a = operands(rng, (rows, inner), bits, signed, False)
                b = np.asfortranarray(operands(rng, (inner, cols), bits, signed, False))
                low, high = mult.operand_range
                za, zb = (int(rng.integers(low, high + 1)), int(rng.integers(low, high + 1)))
                yield (f"{mname}-{rows}x{inner}x{cols}_b_columns", mult, a, b, za, zb, 1 + index % 2)


def requantize_cases():
    """(name, args, kwargs) of quant.requantize: both roundings, int32/int64
    accumulators, per-tensor and per-channel factors from 2^-35 to 2^29
    (shifts -31..30), rows long (channel by channel in C) and short
    (per-element parameters), saturating values and exact ties."""
    from approxmul_cffi import quant
    rng = np.random.default_rng(77)
    out = []
    for shape in [(3, 4), (2, 6, 16), (2, 3, 70), (1, 1, 99)]:
        channels = shape[1]
        for acc_dtype in ("int32", "int64"):
            span = 2**40 if acc_dtype == "int64" else 2**31
            acc = rng.integers(-span, span, size=shape)
            flat = acc.reshape(-1)
            flat[::3] = rng.integers(-5000, 5000, size=flat[::3].shape)  # unsaturated
            flat[:4] = [-(2**31), 2**31 - 1, -6, 6]
            acc = acc.astype(acc_dtype)
            reals = np.exp2(rng.uniform(-35, 29, size=channels))
            reals[0] = 0.25  # ties at +-6 * 0.25 rounds
            mantissa, shift = quant.quantize_multiplier(reals)
            bias = rng.integers(-2**20, 2**20, size=channels).astype(np.int32)
            bias[0] = 0  # channel 0's -6, 6 (where its row holds them) are ties
            for rounding in quant.ROUNDINGS:
                for signed, zp, lo, hi in ((True, -3, -128, 127), (False, 100, 20, 255)):
                    name = f"requantize {shape} {acc_dtype} {rounding} {signed}"
                    out.append((name, (acc, bias, mantissa, shift, zp, lo, hi),
                                dict(signed=signed, rounding=rounding)))
                    out.append((name + " per-tensor",
                                (acc, int(bias[0]), mantissa[0], shift[0], zp, lo, hi),
                                dict(signed=signed, rounding=rounding)))
    # long rows (the vector loops) of consecutive accumulators: every tie of
    # factors 2^-1 .. 2^-6, of 0.75 and of 1.5 and 3 (left shifts), near zero
    # and near saturation
    reals = np.array([0.5, 0.25, 2.0**-6, 0.75, 1.5, 3.0])
    mantissa, shift = quant.quantize_multiplier(reals)
    base = np.arange(-1500, 1500)
    acc = np.stack([base + offset for offset in (0, 2**31 - 1600, -(2**31) + 1500)])
    acc = np.repeat(acc[:, None, :], len(reals), axis=1).astype(np.int32)
    bias = np.array([0, 1, -1, 7, 2**20, -(2**20)], np.int32)
    for rounding in quant.ROUNDINGS:
        for signed, zp, lo, hi in ((True, 5, -128, 127), (False, 128, 0, 255)):
            out.append((f"requantize consecutive {rounding} {signed}",
                        (acc, bias, mantissa, shift, zp, lo, hi),
                        dict(signed=signed, rounding=rounding)))
    return out


def stage_cases():
    """(name, x, w, multiplier, conv2d keywords, requantize args, keywords with real=)
    of quant.conv2d_requantize to codes (the evaluator's path) and to real
    values (the torch adapter's):
    the wide-pixel and per-row gathers, blocks cut inside images, zero
    points folded or not, both roundings, per-channel factors with left
    shifts, 8- and 16-bit codes, float32 and float64, rows long enough for
    the vector loops and tails."""
    import approxmul_cffi as am
    from approxmul_cffi import quant
    rng = np.random.default_rng(79)
    out = []
    multipliers = [("u8", am.Multiplier.exact(8)), ("s8", am.Multiplier.exact(8, signed=True)),
                   ("drum", am.Multiplier.from_table(drum_table())),
                   # depthwise only: the table kernel's lookups per kernel row
                   ("table", am.Multiplier.from_table(
                       rng.integers(-30000, 30000, (256, 256)), signed=True))]
    # "cut": a 64x64 image's 4224 wide pixels exceed a block (3584 for 72
    # taps), so blocks end and start inside images, mid-row
    # "pointwise" (1x1 kernel, channels_last x) and "images" (1x1 images):
    # x read in place, the 1x1 images' stage one span of rows
    # "depthwise": a channel per group, the taps' rows added by tap_rows;
    # "lanes": small planes, 16 channels as vector lanes (tap_lanes32) and a
    # block of 3
    geometries = [("wide", dict(padding=1)), ("rows", dict(stride=2, padding=1, dilation=2)),
                  ("small", dict(padding=0)), ("cut", dict(padding=1)), ("pointwise", {}),
                  ("images", {}), ("depthwise", dict(padding=1, groups=8)),
                  ("lanes", dict(padding=1, groups=19))]
    for (mname, m), (gname, geom) in itertools.product(multipliers, geometries):
        if mname == "table" and gname not in ("depthwise", "lanes"):
            continue  # its GEMMs are cases() above
        signed = bool(m.signed)
        # (depthwise: past the 1024 outputs of the lanes path)
        size = {"small": 7, "cut": 64, "images": 1, "lanes": 9, "depthwise": 34}.get(gname, 19)
        channels = 19 if gname == "lanes" else 8
        batch = 70 if gname == "images" else 3
        k = 1 if gname in ("pointwise", "images") else 3
        lo, hi = (-128, 127) if signed else (0, 255)
        x = rng.integers(lo, hi + 1, (batch, channels, size, size)).astype(np.int8 if signed else np.uint8)
        if gname == "pointwise":
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        o, cg = (channels, 1) if gname in ("depthwise", "lanes") else (6, 8)
        w = rng.integers(lo, hi + 1, (o, cg, k, k)).astype(x.dtype)
        zx, zw = (0, 0) if gname == "small" else (int(rng.integers(0, 4)), int(rng.integers(1, 4)))
        if signed:
            zx, zw = -zx, -zw
        conv = dict(geom, x_zero_point=zx, w_zero_point=zw)
        factors = np.exp2(rng.uniform(-16, -8, size=o))
        factors[0] = 3.0  # a left shift
        mantissa, shift = quant.quantize_multiplier(factors)
        bias = rng.integers(-5000, 5000, size=o)
        for rounding, real, bits in (("double", np.float32, 8), ("single", np.float64, 8),
                                     ("double", np.float64, 16), ("double", None, 8),
                                     ("single", None, 16)):
            clo, chi = quant.code_range(signed, bits=bits)
            args = (bias, mantissa, shift, int(rng.integers(clo // 2, chi // 2)), clo + 3, chi)
            kw = dict(rounding=rounding, bits=bits, real=None if real is None else (0.0371, real))
            kind = "codes" if real is None else np.dtype(real).name
            out.append((f"stage {mname} {gname} {rounding} {kind} {bits}", x, w, m, conv, args, kw))
    return out


def affine_cases():
    """(name, kind, args, kwargs) of affine.quantize / affine.dequantize: float32 and
    float64 values with exact ties, +-inf and huge values, 8/16-bit codes, per tensor and
    per channel with long rows (scalar parameters) and short ones (per element),
    lengths that leave vector remainders."""
    rng = np.random.default_rng(78)
    ranges = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-2**15, 2**15 - 1),
              "uint16": (0, 2**16 - 1)}
    out = []
    for shape, axis in [((1000,), None), ((3, 5, 67), 1), ((7, 13), 1), ((4, 3, 9), 0)]:
        channels = 1 if axis is None else shape[axis]
        scale = np.exp2(rng.integers(-12, 12, size=channels).astype(float))
        scale[::2] *= 0.37  # not only powers of two
        zero_point = rng.integers(-40, 40, size=channels)
        if axis is None:
            scale, zero_point = scale[0], zero_point[0]
        along = np.resize(np.max(scale), int(np.prod(shape)))
        k = rng.integers(-40000, 40000, size=along.size)
        x = np.where(rng.random(along.size) < 0.3, (k + 0.5) * along,
                     rng.normal(0, 300, size=along.size) * along)
        x[:4] = [np.inf, -np.inf, 1e300, -0.0]
        x = x.reshape(shape)
        for code, (lo, hi) in ranges.items():
            for real in ("float32", "float64"):
                name = f"quantize {shape} axis={axis} {real} {code}"
                with np.errstate(over="ignore"):  # 1e300 is inf in float32, on purpose
                    values = x.astype(real)
                out.append((name, "quantize", (values, scale, zero_point, lo, hi),
                            dict(axis=axis, dtype=code)))
            codes = rng.integers(lo, hi + 1, size=shape).astype(code)
            for real in ("float32", "float64"):
                out.append((f"dequantize {shape} axis={axis} {code} {real}", "dequantize",
                            (codes, scale, zero_point), dict(axis=axis, dtype=real)))
    for scale in (0.1, 7.3, 0.37 * 2**-5):
        # float64 values 0 and +-1 ulp from ties, where x * (1/s) and x / s
        # round to different codes (a reciprocal shortcut would get them wrong)
        k = rng.integers(-30000, 30000, size=300).astype(np.float64)
        ties = (k + 0.5) * scale
        x = np.concatenate([ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
        out.append((f"quantize near ties scale={scale}", "quantize",
                    (x, scale, 3, -2**15, 2**15 - 1), dict(dtype="int16")))
    return out


def nonfinite_cases():
    """(name, x) for affine.quantize(finite=True): one infinity or NaN at the
    start, inside a vector, at a vector remainder's end, or none, in float32
    and float64, in arrays shorter and longer than the C library's 16k-element
    blocks (the first block holding a bad value decides)."""
    out = []
    for size, positions in ((70, (None, 0, 13, 69)), (40000, (None, 16383, 16384, 39999))):
        base = np.linspace(-3.0, 3.0, size)
        for position in positions:
            for bad in ((np.inf, -np.inf, np.nan) if position is not None else (None,)):
                x = base.copy()
                if position is not None:
                    x[position] = bad
                    x[-1 if position < size - 1 else 0] = -np.inf  # a later or earlier one
                for real in ("float32", "float64"):
                    out.append((f"finite {size} {position} {bad} {real}", x.astype(real)))
    return out


def real_input_cases():
    """(name, x, Conv2dRequantizer, (scale, qmin, qmax, dtype)) for run_real
    (approxmul_conv2d_real): nonfinite_cases' values and the per-tensor
    affine_cases' float values of 8-bit codes, as one row of an image through
    a 1x1 convolution whose output stage hands back the codes' real values
    (so every code shows)."""
    from approxmul_cffi import quant
    from approxmul_cffi.layer_calls import Conv2dRequantizer
    one = quant.quantize_multiplier(1.0)
    out = []
    for signed, dtype, zero in ((False, np.uint8, 3), (True, np.int8, -5)):
        m = am.Multiplier.exact(8, signed=signed)
        lo, hi = quant.code_range(signed)
        call = Conv2dRequantizer(np.ones((1, 1, 1, 1), dtype), m, 0, *one, 0, lo, hi,
                                 x_zero_point=zero, real=(1.0, np.float32))
        cases = [(name, x, 0.01) for name, x in nonfinite_cases()]
        # (without the infinities and the float32 overflow they start with)
        cases += [(name, args[0].ravel()[4:], float(args[1]))
                  for name, kind, args, kw in affine_cases()
                  if kind == "quantize" and kw.get("axis") is None and
                  kw["dtype"] in ("int8", "int16")]
        for name, x, scale in cases:
            out.append((f"real input {name} {dtype.__name__}", x.reshape(1, 1, 1, -1), call,
                        (scale, lo, hi, dtype)))
    return out
