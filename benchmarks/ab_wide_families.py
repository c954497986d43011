"""16-bit Mitchell, ILM and RoBA matmuls against NumPy's float32 matmul, in one process.

    APPROXMUL_LIBRARY=OLD.so python benchmarks/ab_wide_families.py [--threads 2]
    APPROXMUL_LIBRARY=NEW.so python benchmarks/ab_wide_families.py [--threads 2]

Run once per library build for an A/B (the library is chosen when the
package loads). Random 16-bit codes over the whole range on bench_gemm's
three shapes; each matmul writes a preallocated int64 output; best of 2
timings of at least 50 ms (float32: 3 of 200 ms). Prints G products/s, the
plan and the ratio to float32. bench_gemm.py checks Mitchell's and RoBA's
results against their formulas, the tests every family's; this script
only times them.
"""

import argparse

import numpy as np

import approxmul_cffi as am
from bench_gemm import best_rate  # benchmarks/bench_gemm.py

SHAPES = {"square-512": (512, 512, 512), "64x576x3136": (64, 576, 3136),
          "256x2304x196": (256, 2304, 196)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    am.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    print(f"library {am.info()['library']}, isa {am.info()['isa']}")
    for name, (m, k, n) in SHAPES.items():
        a = rng.integers(0, 65536, (m, k)).astype(np.uint16)
        b = rng.integers(0, 65536, (k, n)).astype(np.uint16)
        af, bf = a.astype(np.float32), b.astype(np.float32)
        f32 = best_rate(lambda: af @ bf, m * k * n, 3, 0.2)
        row = [f"{name:13s} float32 {f32:6.1f} G/s"]
        for spec in ("mitchell:bits=16", "ilm:bits=16", "ilm:bits=16,iterations=3",
                     "roba:bits=16"):
            mult = am.multiplier(spec)
            out = np.empty((m, n), np.int64)
            rate = best_rate(lambda: am.matmul(a, b, mult, out=out), m * k * n, 2, 0.05)
            row.append(f"{spec} [{mult.plan}] {rate:7.3f} G/s ({rate / f32:.4f}x)")
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
