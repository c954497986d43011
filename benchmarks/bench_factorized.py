"""Factorized GEMMs against the table kernels, by rank: where the plan's threshold comes from.

An 8-bit table with an exact factorization of rank r runs either as r int16
GEMMs or through the table kernel (truncation and DRUM, whose factors the
plan reads off bit patterns, and an exact product plus errors of rank 1-5
that only the general lattice search finds: the factorized child forces
its plan up to rank 6, where the library takes it to rank 2); where its
error is a function of the low
nibbles (truncation with cut <= 4) and the kernel set has a nibble kernel,
also as the exact GEMM plus a nibble-table GEMM of the error. This runs
truncated multipliers (rank 1 + cut) and DRUM (rank 1) every way, in child
processes that force the plan with APPROXMUL_MAX_FACTORIZED_RANK (6:
factorized, 0: not) and APPROXMUL_NIBBLE_ERRORS (0: no exact-plus-table, so
the factorized child keeps every rank's GEMMs and the last child the
byte-table kernel),
and prints G products/s and the ratio to NumPy's float32 matmul timed in
the same child. Results are checked against NumPy lookups before timing.

    python benchmarks/bench_factorized.py --threads 2
"""

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
import numpy as np
import approxmul_cffi as am
sys.path.insert(0, {bench!r})
from bench_gemm import best_rate, drum_table, truncated_table
from bench_factorized import exact_plus_error_table
threads, repeat = {threads}, {repeat}
am.set_num_threads(threads)
rng = np.random.default_rng(0)
out = []
for (m, k, n) in {shapes}:
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    b = rng.integers(0, 256, (k, n)).astype(np.uint8)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    time.sleep(0.2)
    base = best_rate(lambda: af @ bf, m * k * n, repeat)
    for name, table in {tables}:
        t = np.asarray(eval(table), np.int64)
        mult = am.Multiplier.from_table(t)
        got = am.matmul(a[:8], b, mult)
        if not np.array_equal(got, t[a[:8, :, None], b[None]].sum(1)):
            raise SystemExit(name + ": wrong result")
        time.sleep(0.2)
        rate = best_rate(lambda: am.matmul(a, b, mult), m * k * n, repeat)
        out.append(dict(shape=f"{{m}}x{{k}}x{{n}}", name=name, plan=mult.plan,
                        gproducts_per_s=round(rate, 2), ratio_to_float32=round(rate / base, 3)))
print(json.dumps(out))
"""

SHAPES = [(512, 512, 512), (64, 576, 3136), (256, 2304, 196)]
TABLES = [("DRUM(4), rank 1", "drum_table(4)")] + [
    (f"truncated(cut={cut}), rank {1 + cut}", f"truncated_table({cut})") for cut in (1, 2, 3, 4)] + [
    (f"exact + error, rank {1 + e}", f"exact_plus_error_table({e})") for e in (1, 2, 3, 4, 5)]


def exact_plus_error_table(rank):
    """a*b plus an error of integer rank ``rank`` that no bit pattern explains:
    sum over k of small residues of a times small residues of b (the shape of
    an approximate circuit's error; only the general lattice search finds it)."""
    import numpy as np
    a, b = np.arange(256)[:, None], np.arange(256)[None, :]
    error = sum((((a * (2 * k + 3)) % (2 * k + 5)) - 2) * (((b * (k + 2)) % (k + 7)) - 3)
                for k in range(rank))
    return a * b + error


def run_child(limit, nibble, threads, repeat, shapes):
    code = CHILD.format(bench=os.path.dirname(os.path.abspath(__file__)), threads=threads,
                        repeat=repeat, shapes=shapes, tables=TABLES)
    env = dict(os.environ, APPROXMUL_MAX_FACTORIZED_RANK=str(limit),
               APPROXMUL_NIBBLE_ERRORS=str(nibble))
    # run beside this script: from the repository root, "-c" would import the
    # source tree's approxmul_cffi (no library inside) over the installed one
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny shapes (smoke test)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    shapes = [(32, 48, 40)] if args.quick else SHAPES
    import approxmul_cffi as am
    print(f"# approxmul isa={am.info()['isa']}, {args.threads} threads; "
          f"ratio = G products/s / NumPy float32 matmul's in the same child")
    rows = []
    for limit, nibble in ((6, 0), (0, 1), (0, 0)):
        new = run_child(limit, nibble, args.threads, args.repeat, shapes)
        # (without a nibble kernel the last child repeats the second's plans)
        rows += [r for r in new if (r["shape"], r["name"], r["plan"]) not in
                 {(o["shape"], o["name"], o["plan"]) for o in rows}]
        time.sleep(0.5)
    print(f"{'shape':<14} {'multiplier':<26} {'plan':<17} {'G/s':>7} {'x f32':>7}")
    for r in sorted(rows, key=lambda r: (r["shape"], r["name"], r["plan"])):
        print(f"{r['shape']:<14} {r['name']:<26} {r['plan']:<17} {r['gproducts_per_s']:7.2f} "
              f"{r['ratio_to_float32']:7.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"isa": am.info()["isa"], "threads": args.threads, "results": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
