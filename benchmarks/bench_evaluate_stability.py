"""Spread of `approxmul evaluate`'s images/s over identical runs, each in its own process.

    python benchmarks/bench_evaluate_stability.py [--runs 5]

Runs the default `approxmul evaluate` (bundled digits LeNet, default
multipliers) --runs times and prints every row's images/s, its median and
the largest deviation from the median (the reliability target: +-20 % on
an idle machine).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            out = os.path.join(tmp, f"run{i}.json")
            subprocess.run([sys.executable, "-m", "approxmul_cffi.cli", "evaluate", "--no-progress",
                            "--json", out], check=True, capture_output=True, cwd=tmp)
            with open(out) as f:
                runs.append(json.load(f))
    rows = {}
    for run in runs:
        for row in run:
            rows.setdefault(row["multiplier"], []).append(row["images_per_s"])
    worst = 0.0
    for name, speeds in rows.items():
        median = statistics.median(speeds)
        deviation = max(abs(s / median - 1) for s in speeds)
        worst = max(worst, deviation)
        print(f"{name:26s} " + " ".join(f"{s:9.0f}" for s in speeds)
              + f"   median {median:9.0f}  max deviation {100 * deviation:5.1f} %")
    print(f"worst deviation from a row's median over {args.runs} runs: {100 * worst:.1f} %")


if __name__ == "__main__":
    main()
