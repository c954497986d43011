"""16-bit column truncation (cut 8) matmul against NumPy float32, same process.

Prints G products/s and the ratio to float32 for the library that
approxmul_cffi loads (APPROXMUL_LIBRARY picks a build: run it once against
an older build and once against this one to compare plans). NumPy is timed
first (best of 5), then approxmul after a pause and a warm-up call.
"""
import argparse

import numpy as np

import approxmul_cffi as am
from timing import best  # benchmarks/timing.py

SHAPES = {"square-512": (512, 512, 512), "conv-256x2304x196": (256, 2304, 196)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="truncated:bits=16,cut=8")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="approxmul timings (best kept)")
    args = parser.parse_args(argv)
    am.set_num_threads(args.threads)
    try:
        from threadpoolctl import threadpool_limits
        limits = threadpool_limits(args.threads, user_api="blas")
    except ImportError:
        limits = None
    rng = np.random.default_rng(0)
    m = am.multiplier(args.spec)
    for name, (rows, inner, cols) in SHAPES.items():
        af = rng.standard_normal((rows, inner), dtype=np.float32)
        bf = rng.standard_normal((inner, cols), dtype=np.float32)
        hi = m.operand_range[1] + 1
        a = rng.integers(0, hi, (rows, inner)).astype(np.uint16)
        b = rng.integers(0, hi, (inner, cols)).astype(np.uint16)
        t_float = best(lambda: af @ bf, 5, pause=0.5)
        am.matmul(a[:8], b, m)  # warm-up: a full call is long on the function plan
        t_approx = best(lambda: am.matmul(a, b, m), args.repeat, warmup=False)
        rate = rows * inner * cols / t_approx / 1e9
        print(f"{name:20s} {args.spec} plan={m.plan}: {rate:.2f} G/s, "
              f"{t_float / t_approx:.4f}x float32")
    if limits is not None:
        limits.unregister()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
