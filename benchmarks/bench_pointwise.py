"""Pointwise (1x1) convolutions against the matmul that computes the same sums.

    python benchmarks/bench_pointwise.py [--threads 2] [--samples 30] [--spec drum:k=4]

A 1x1 convolution with stride 1 and no padding is, image by image, the
matmul W (O x C) @ X (C x H*W): every network's pointwise layers
(ResNet-50's bottlenecks, MobileNet's expansions, the 1x1-image convs of
squeeze-excitation blocks and classifier heads). approxmul_cffi.conv2d runs
them through its im2col path; this prints, for such shapes, conv2d's time
against approxmul_cffi.matmul of the same codes laid out as rows of
pixels (NHWC, the layout copy not timed), single calls of the two
interleaved in a shuffled order (both on approxmul's pool), medians, and
checks that both give the same sums. A ratio above 1 is time conv2d loses.
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
        engines = {"conv2d": lambda: am.conv2d(x, w, m), "matmul": lambda: am.matmul(rows, weights, m)}
        sums = engines["conv2d"]().transpose(0, 2, 3, 1).reshape(-1, o)
        assert np.array_equal(sums, engines["matmul"]()), "conv2d and matmul sums differ"
        times = timing.interleaved_times(engines, args.samples)
        conv, mm = (statistics.median(times[k]) for k in ("conv2d", "matmul"))
        print(f"N={n:<3d} C={c:<5d} O={o:<5d} {side:>2d}x{side:<2d}  conv2d {conv * 1e3:8.3f} ms  "
              f"matmul {mm * 1e3:8.3f} ms  conv2d / matmul {conv / mm:5.2f}", flush=True)


if __name__ == "__main__":
    main()
