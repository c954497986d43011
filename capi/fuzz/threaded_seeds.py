"""Writes the fuzz seeds of threaded problems (capi/fuzz/corpus/*/seed-threads-*).

The harnesses draw a large problem (fuzz_common.hpp, pick_large) once in 256
inputs; these seeds make the corpus replay reach the parallel paths every
time: the byte GEMM's row jobs with B packed per thread, the factorized and
exact-plus-table GEMMs on several threads (wide arrays: a table GEMM for each byte
pair), the logarithmic families' lanes, a 10-bit table's code-sorted blocks,
conv2d's jobs in parallel and
one-image convolutions threaded inside their GEMM. Each seed spells the
harness's draws in order (FuzzedDataProvider takes integers from the end of
the input, so the bytes are written reversed); run it again after a change
to the order of the draws: python3 capi/fuzz/threaded_seeds.py
"""

import pathlib

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"


class Draws:
    """The values a harness will draw, in order, as FuzzedDataProvider reads them."""

    def __init__(self):
        self.consumed = bytearray()

    def int_in_range(self, lo, hi, value):
        span, offset, size = hi - lo, 0, 0
        while offset < 64 and span >> offset > 0:
            offset, size = offset + 8, size + 1
        assert lo <= value <= hi
        self.consumed += (value - lo).to_bytes(size, "big")  # first byte drawn is the high one
        return self

    def byte(self, value):
        return self.int_in_range(0, 255, value)

    def data(self):
        return bytes(reversed(self.consumed))


def model(d, kind, bits, signed=False, cut=None, k=None, iterations=None, hbl=None, seed=7):
    """make_model's draws."""
    d.byte(kind == "exact").byte(signed)
    if kind == "exact":
        return d.int_in_range(1, 16, bits)
    if kind == "table":  # 9-10 bits: entries from a generator the seed starts
        assert bits in (9, 10)
        d.int_in_range(0, 6, 2).int_in_range(1, 8, 8).byte(1).int_in_range(9, 10, bits)
        d.consumed += seed.to_bytes(8, "big")
        return d
    if kind in ("mitchell", "ilm", "roba"):
        d.int_in_range(0, 6, 6 if kind == "roba" else 5).byte(bits > 8)
        d.int_in_range(9, 16, bits) if bits > 8 else d.int_in_range(2, 8, bits)
        if kind != "roba":
            d.byte(kind == "mitchell")
        return d.int_in_range(0, bits, iterations) if kind == "ilm" else d
    if kind == "truncated":  # hbl given: a wide array, any cut
        d.int_in_range(0, 6, 1).int_in_range(5, 16, bits).int_in_range(0, 8, min(cut, 8))
        if bits > 8:
            d.byte(hbl is not None)
        if hbl is not None:
            d.int_in_range(0, 2 * bits - 1, cut).int_in_range(0, bits - 1, hbl)
        return d
    assert kind == "drum"
    d.int_in_range(0, 6, 0).byte(bits == 16)
    if bits != 16:
        d.int_in_range(9, 15, bits)
    return d.int_in_range(2, min(12, bits), k)


def operand_range(bits, signed):
    return (-(1 << bits - 1), (1 << bits - 1) - 1) if signed else (0, (1 << bits) - 1)


def large(d, threads, seed):
    """pick_large's draws."""
    d.int_in_range(2, 4, threads)
    d.consumed += seed.to_bytes(8, "big")
    return d


def zero_points(d, bits, signed, x_zero, w_zero):
    lo, hi = operand_range(bits, signed)
    return d.byte(1).int_in_range(lo - 1, hi + 1, x_zero).int_in_range(lo - 1, hi + 1, w_zero)


def matmul(rows, cols, work, threads=2, seed=1, zeros=(3, 5), **m):
    d = Draws().int_in_range(-2, 6, 2)
    model(d, **m)
    low = 1 << 20 if m["bits"] <= 8 else 1 << 18
    large(d.byte(255), threads, seed)
    d.int_in_range(72, 256, rows).int_in_range(8, 160, cols).int_in_range(low, 2 * low, work)
    d.int_in_range(0, 7, 2).int_in_range(0, 7, 2)  # both operands in the narrow type
    d.int_in_range(0, 31, 1)                       # a multiplier
    zero_points(d, m["bits"], m.get("signed", False), *zeros)
    d.int_in_range(0, 7, 5)                        # int64 output
    for _ in range(3):                             # row-major a, b, c
        d.byte(0).int_in_range(0, 5, 0).int_in_range(0, 5, 0)
    for _ in range(3):                             # no NULL pointers
        d.int_in_range(0, 31, 1)
    return d.data()


def conv2d(groups, cg, og, kernel, size, work, stride=1, padding=1, dilation=1, threads=2,
           seed=1, zeros=(3, 5), **m):
    d = Draws().int_in_range(-2, 6, 2)
    model(d, **m)
    low = 1 << 20 if m["bits"] <= 8 else 1 << 18
    d.int_in_range(1, 3, 1).int_in_range(0, 3, 0).int_in_range(0, 3, 0)  # replaced below
    large(d.byte(255), threads, seed)
    d.int_in_range(1, 2, groups).int_in_range(4, 24, cg).int_in_range(2, 24, og)
    for _ in range(2):
        d.int_in_range(0, 31, 1).int_in_range(1, 3, kernel).int_in_range(0, 9, size - 8)
        d.int_in_range(1, 3, stride).int_in_range(0, 3, padding).int_in_range(1, 3, dilation)
    d.int_in_range(0, 5, 0).int_in_range(0, 5, 0)  # no extra pixels
    d.int_in_range(low // 4, low // 2, work)
    d.int_in_range(0, 15, 1)                       # breakages: none
    for _ in range(6):
        d.int_in_range(0, 31, 1)
    d.int_in_range(0, 15, 1).int_in_range(0, 31, 1).int_in_range(0, 15, 1)
    d.int_in_range(0, 7, 2).int_in_range(0, 7, 2)  # both operands in the narrow type
    d.int_in_range(0, 31, 1)                       # a multiplier
    zero_points(d, m["bits"], m.get("signed", False), *zeros)
    d.int_in_range(0, 7, 5)                        # int64 output
    for _ in range(3):                             # NCHW strides for x, w, out
        d.int_in_range(0, 3, 0)
    for _ in range(3):                             # no NULL pointers
        d.int_in_range(0, 31, 1)
    for _ in range(9):                             # no NULL arrays
        d.int_in_range(0, 63, 1)
    return d.data()


SEEDS = {
    "matmul/seed-threads-exact-u8": matmul(100, 20, 1_200_000, kind="exact", bits=8),
    "matmul/seed-threads-exact-s8": matmul(130, 28, 1_950_000, threads=3, kind="exact", bits=8,
                                           signed=True, zeros=(-7, 2)),
    "matmul/seed-threads-truncated-u8": matmul(130, 12, 1_500_000, kind="truncated", bits=8,
                                               cut=4),
    "matmul/seed-threads-truncated-s12": matmul(100, 90, 400_000, kind="truncated", bits=12,
                                                cut=6, signed=True, zeros=(-100, 77)),
    # a 10-bit table: the generic kernel's blocks sorted by code, row chunks on two threads
    "matmul/seed-threads-table-s10": matmul(100, 40, 300_000, kind="table", bits=10,
                                            signed=True, zeros=(-300, 200)),
    # wide arrays with dropped cells in every byte pair: a table GEMM for each
    "matmul/seed-threads-bam-u16": matmul(100, 60, 300_000, kind="truncated", bits=16, cut=20,
                                          hbl=9),
    "matmul/seed-threads-truncated-s16": matmul(90, 80, 300_000, kind="truncated", bits=16,
                                                cut=16, hbl=0, signed=True, zeros=(-300, 1000)),
    "matmul/seed-threads-drum-s16": matmul(120, 40, 500_000, threads=4, kind="drum", bits=16, k=4,
                                           signed=True, zeros=(-300, 1000)),
    # wide logarithmic families: GEMM blocks in vector lanes on several threads
    "matmul/seed-threads-mitchell-u16": matmul(100, 70, 300_000, kind="mitchell", bits=16),
    "matmul/seed-threads-ilm-s12": matmul(90, 50, 300_000, kind="ilm", bits=12, iterations=2,
                                          signed=True, zeros=(-100, 77)),
    "matmul/seed-threads-roba-s16": matmul(110, 30, 300_000, kind="roba", bits=16, signed=True,
                                           zeros=(-300, 1000)),
    # 6 images of 12x12: four jobs of whole images on two threads
    "conv2d/seed-threads-exact-u8": conv2d(1, 8, 8, 3, 12, 500_000, kind="exact", bits=8),
    "conv2d/seed-threads-exact-s8-groups": conv2d(2, 6, 5, 3, 17, 400_000, stride=2, padding=2,
                                                  dilation=2, threads=3, kind="exact", bits=8,
                                                  signed=True, zeros=(-3, 4)),
    "conv2d/seed-threads-truncated-u8": conv2d(1, 10, 7, 3, 14, 450_000, kind="truncated",
                                               bits=8, cut=4),
    # one 8x8 image: the GEMM on all threads instead of jobs
    "conv2d/seed-threads-truncated-one-image": conv2d(1, 24, 24, 3, 16, 300_000,
                                                      kind="truncated", bits=8, cut=3),
}

if __name__ == "__main__":
    for name, data in SEEDS.items():
        (CORPUS / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")
