"""Time exhaustive error metrics: 8x8 tables (target < 10 ms) and 16x16
built-in families over all 2^32 pairs (target < 60 s on 2 cores).

    APPROXMUL_LIBRARY=build/capi/libapproxmul.so PYTHONPATH=. \\
        python benchmarks/bench_metrics.py --threads 2 [--wide drum:bits=16,k=4 ...] [--skip-wide]

Figures go in docs/benchmarks.md, section "Multiplier metrics".
"""

import argparse
import os
import platform

import approxmul_cffi as am
import timing  # benchmarks/timing.py

NARROW = ["exact", "drum:k=4", "mitchell", "truncated:cut=8,correct=1", "ilm:iterations=1",
          "roba:signed=1"]
WIDE = ["drum:bits=16,k=4", "mitchell:bits=16"]


def best_of(function, repeats):
    return timing.best(function, repeats, warmup=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--wide", nargs="*", default=WIDE, metavar="SPEC")
    parser.add_argument("--skip-wide", action="store_true")
    args = parser.parse_args()
    am.set_num_threads(args.threads)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, "
          f"approxmul threads={args.threads}, {am.info().get('isa')}")
    print(f"{'spec':40s} {'pairs':>12s} {'seconds':>10s} {'ns/pair':>8s}")
    for spec in NARROW:
        m = am.multiplier(spec)
        seconds = best_of(m.metrics, 20)
        print(f"{m.spec:40s} {2**16:12d} {seconds:10.6f} {seconds / 2**16 * 1e9:8.2f}")
    if not args.skip_wide:
        for spec in args.wide:
            m = am.multiplier(spec)
            seconds = best_of(m.metrics, 1)
            print(f"{m.spec:40s} {2**32:12d} {seconds:10.3f} {seconds / 2**32 * 1e9:8.2f}")


if __name__ == "__main__":
    main()
