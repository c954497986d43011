"""Wide multipliers' matmuls (16-bit Mitchell, ILM and RoBA unless --specs
says others; random-table:bits=N for a random N-bit table) against NumPy's
float32 matmul, in one process.

    APPROXMUL_LIBRARY=OLD.so python benchmarks/ab_wide_families.py [--threads 2] [--specs S ...]
    APPROXMUL_LIBRARY=NEW.so python benchmarks/ab_wide_families.py [--threads 2] [--specs S ...]

Run once per library build for an A/B (the library is chosen when the
package loads). Random codes over each model's whole range on bench_gemm's
three shapes; each matmul writes a preallocated int64 output; best of 2
timings of at least 50 ms (float32: 3 of 200 ms). Prints G products/s, the
plan and the ratio to float32. bench_gemm.py checks its rows' results
against their formulas, the tests every family's; this script only times
them.
"""

import argparse

import numpy as np

import approxmul_cffi as am
from bench_gemm import best_rate  # benchmarks/bench_gemm.py

SHAPES = {"square-512": (512, 512, 512), "64x576x3136": (64, 576, 3136),
          "256x2304x196": (256, 2304, 196)}


def model(spec):
    """A multiplier spec, or random-table:bits=N: a table of N-bit random
    products (the seed fixed), what bench_gemm's random wide table rows time."""
    if spec.startswith("random-table:bits="):
        bits = int(spec.split("=")[1])
        rng = np.random.default_rng(bits)
        return am.Multiplier.from_table(rng.integers(0, 1 << 20, (1 << bits, 1 << bits)))
    return am.multiplier(spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--specs", nargs="+", default=["mitchell:bits=16", "ilm:bits=16",
                                                        "ilm:bits=16,iterations=3", "roba:bits=16"])
    args = parser.parse_args()
    models = [model(spec) for spec in args.specs]
    am.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    print(f"library {am.info()['library']}, isa {am.info()['isa']}")
    for name, (m, k, n) in SHAPES.items():
        codes = {}  # by signedness, from the same draws
        raw_a = rng.integers(0, 65536, (m, k))
        raw_b = rng.integers(0, 65536, (k, n))
        af, bf = raw_a.astype(np.float32), raw_b.astype(np.float32)
        f32 = best_rate(lambda: af @ bf, m * k * n, 3, 0.2)
        row = [f"{name:13s} float32 {f32:6.1f} G/s"]
        for spec, mult in zip(args.specs, models):
            low, high = mult.operand_range
            key = (low, high)
            if key not in codes:
                dtype = np.int16 if mult.signed else np.uint16
                codes[key] = ((raw_a % (high - low + 1) + low).astype(dtype),
                              (raw_b % (high - low + 1) + low).astype(dtype))
            a, b = codes[key]
            out = np.empty((m, n), np.int64)
            rate = best_rate(lambda: am.matmul(a, b, mult, out=out), m * k * n, 2, 0.05)
            row.append(f"{spec} [{mult.plan}] {rate:7.3f} G/s ({rate / f32:.4f}x)")
        print(" | ".join(row), flush=True)

if __name__ == "__main__":
    main()
