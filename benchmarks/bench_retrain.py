"""Retraining through approximate multipliers: ste vs table vs table2d over seeds.

    python benchmarks/bench_retrain.py [--seeds 0 1 2] [--epochs 10] [--threads 2]
                                       [--lr 3e-3] [--batch-size 16] [--no-bias-correction]
                                       [--out FILE.json]

Runs ``approxmul retrain`` on the bundled digits LeNet (unsigned uint8
codes, the evaluator's default scheme) for drum:k=3 and
truncated:bits=8,cut=10 with each gradient mode and seed, and prints the
accuracy before, the best and final epochs and the wall time of each run,
then mean and spread per configuration (docs/retraining.md).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MULTIPLIERS = ("drum:k=3", "truncated:bits=8,cut=10")
GRADIENTS = ("ste", "table", "table2d")


def run(multiplier, gradient, seed, epochs, threads, lr, batch_size, bias_correction=True):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "approxmul_cffi", "retrain", "-m", multiplier,
                        "--gradient", gradient, "--epochs", str(epochs), "--seed", str(seed),
                        "--threads", str(threads), "--lr", str(lr), "--batch-size",
                        str(batch_size), "--no-progress", "--json", out]
                       + (["--bias-correction"] if bias_correction else ["--no-bias-correction"]),
                       check=True, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        with open(out) as f:
            result = json.load(f)
    return dict(result, multiplier=multiplier, gradient=gradient, seed=seed, seconds=seconds,
                lr=lr, batch_size=batch_size, bias_correction=bias_correction)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (retrain's default)")
    parser.add_argument("--batch-size", type=int, default=16, help="(retrain's default)")
    parser.add_argument("--multipliers", nargs="+", default=list(MULTIPLIERS))
    parser.add_argument("--gradients", nargs="+", default=list(GRADIENTS))
    parser.add_argument("--bias-correction", action=argparse.BooleanOptionalAction, default=True,
                        help="retrain --bias-correction: per-channel mean error cancelled "
                             "(retrain's default: on)")
    parser.add_argument("--out", help="write every run as JSON")
    args = parser.parse_args()
    runs = []
    for multiplier in args.multipliers:
        for gradient in args.gradients:
            for seed in args.seeds:
                r = run(multiplier, gradient, seed, args.epochs, args.threads, args.lr,
                        args.batch_size, args.bias_correction)
                runs.append(r)
                print(f"{multiplier:24s} {gradient:8s} seed {seed}: before {r['before']:6.2f}  "
                      f"after {r['after']:6.2f}  best {max(r['epochs']):6.2f}  "
                      f"{r['seconds']:6.1f} s", flush=True)
                if args.out:
                    with open(args.out, "w") as f:
                        json.dump(runs, f, indent=1)
    print("\nmultiplier               gradient  after: mean  min    max    mean s")
    for multiplier in args.multipliers:
        for gradient in args.gradients:
            sel = [r for r in runs if r["multiplier"] == multiplier and r["gradient"] == gradient]
            after = [r["after"] for r in sel]
            print(f"{multiplier:24s} {gradient:8s}  {statistics.mean(after):6.2f} {min(after):6.2f} "
                  f"{max(after):6.2f} {statistics.mean(r['seconds'] for r in sel):7.1f}")


if __name__ == "__main__":
    main()
