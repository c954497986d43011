"""Pointwise (1x1) convolutions against the matmul that computes the same sums.

    python benchmarks/bench_pointwise.py [--threads 2] [--samples 30] [--spec drum:k=4]

A 1x1 convolution with stride 1 and no padding is, image by image, the
matmul W (O x C) @ X (C x H*W): every network's pointwise layers
(ResNet-50's bottlenecks, MobileNet's expansions, the 1x1-image convs of
squeeze-excitation blocks and classifier heads). approxmul_cffi.conv2d reads
x's pixels in place for them; this prints, for such shapes, conv2d's time
on NCHW x and out, and on channels_last x and out (where its GEMM is the
matmul's), against approxmul_cffi.matmul of the same codes laid out as rows
of pixels (NHWC, the layout copy not timed): single calls of the three
interleaved in a shuffled order (all on approxmul's pool), medians, sums
compared. A ratio above 1 is time conv2d loses.
"""

import argparse
import statistics

import numpy as np

import approxmul_cffi as am
import timing  # benchmarks/timing.py

# (batch, in channels, out channels, image side)
SHAPES = [(8, 256, 64, 28), (8, 64, 256, 56), (1, 1024, 256, 14), (64, 1024, 1024, 1),
          (64, 96, 24, 1)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--samples", type=int, default=30)
    p.add_argument("--spec", default="drum:k=4")
    args = p.parse_args()
    am.set_num_threads(args.threads)
    m = am.multiplier(args.spec)
    rng = np.random.default_rng(0)
    for n, c, o, side in SHAPES:
        x = rng.integers(0, 256, (n, c, side, side)).astype(np.uint8)
        w = rng.integers(0, 256, (o, c, 1, 1)).astype(np.uint8)
        rows = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(-1, c)
        weights = np.ascontiguousarray(w.reshape(o, c).T)
        x_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        sums = am.conv2d(x, w, m)
        out_last = np.empty((n, side, side, o), sums.dtype).transpose(0, 3, 1, 2)
        engines = {"conv2d": lambda: am.conv2d(x, w, m),
                   "conv2d NHWC": lambda: am.conv2d(x_last, w, m, out=out_last),
                   "matmul": lambda: am.matmul(rows, weights, m)}
        engines["conv2d NHWC"]()
        for got in (sums, out_last):
            assert np.array_equal(got.transpose(0, 2, 3, 1).reshape(-1, o), engines["matmul"]()), \
                "conv2d and matmul sums differ"
        times = timing.interleaved_times(engines, args.samples)
        conv, last, mm = (statistics.median(times[k]) for k in ("conv2d", "conv2d NHWC", "matmul"))
        print(f"N={n:<3d} C={c:<5d} O={o:<5d} {side:>2d}x{side:<2d}  conv2d {conv * 1e3:8.3f} ms  "
              f"NHWC {last * 1e3:8.3f} ms  matmul {mm * 1e3:8.3f} ms  conv2d / matmul "
              f"{conv / mm:5.2f}  NHWC / matmul {last / mm:5.2f}", flush=True)


if __name__ == "__main__":
    main()
