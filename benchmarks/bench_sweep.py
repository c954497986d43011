"""Speed-up of a uniform sweep on 2 Dask worker processes against 1.

    python benchmarks/bench_sweep.py [--tasks 20] [--tile 8] [--json FILE]

Each task evaluates the bundled digits LeNet with one multiplier on the
held-out images tiled ``--tile`` times (8: 3,600 images, over 1 s a task on
the project's machines). Three engines run the same tasks, each in its own
block after a pause: the serial evaluator in this process (the baseline,
``approxmul_cffi.evaluate`` once per multiplier), then ``approxmul_cffi.sweep``
on a LocalCluster of 1 and of 2 worker processes (one thread each, fresh
stores, cluster start-up excluded). Prints wall times and ratios, the mean
task time the workers measured and the parallelism (task seconds / wall
seconds: what the machine gave; under the worker count when other jobs load
it); checks that all three give the same top-1 figures.
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time

MULTIPLIERS = [
    "truncated:bits=8,cut=2", "truncated:bits=8,cut=4", "truncated:bits=8,cut=6",
    "truncated:bits=8,cut=7", "truncated:bits=8,cut=8", "truncated:bits=8,cut=10",
    "drum:k=3", "drum:k=4", "drum:k=5", "drum:k=6", "dsm:m=3", "dsm:m=4", "dsm:m=5",
    "dsm:m=6", "mitchell", "ilm:iterations=1", "ilm:iterations=2", "roba",
    "bam:hbl=2,vbl=6", "bam:hbl=1,vbl=8", "drum:k=3,signed=1", "drum:k=4,signed=1",
    "mitchell:signed=1", "truncated:bits=8,cut=8,signed=1",
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=20,
                   help=f"multipliers (at most {len(MULTIPLIERS)})")
    p.add_argument("--tile", type=int, default=8, help="held-out images tiled this many times")
    p.add_argument("--pause", type=float, default=2.0, help="seconds between engines")
    p.add_argument("--json", help="also write the results to this JSON file")
    return p.parse_args(argv)


def main():
    args = parse_args()
    import numpy as np
    import distributed

    import approxmul_cffi as am
    from approxmul_cffi.datasets import load_digits
    from approxmul_cffi.evaluation import bundled_model, evaluate
    from approxmul_cffi.sweep import sweep

    specs = MULTIPLIERS[:args.tasks]
    x, y = load_digits("test")
    data = (np.tile(x, (args.tile, 1, 1, 1)), np.tile(y, args.tile))
    calibration = load_digits("train")[0]
    results = []

    am.set_num_threads(1)
    start = time.perf_counter()
    serial = {}
    for spec in specs:
        r = evaluate(bundled_model(), data, [spec], calibration=calibration, progress=False)
        serial[spec] = r[-1].top1
    wall = time.perf_counter() - start
    results.append({"engine": "serial evaluate, 1 thread", "wall_s": wall})
    print(f"serial evaluate: {len(specs)} tasks in {wall:.1f} s ({wall / len(specs):.2f} s a task)")

    for workers in (1, 2):
        time.sleep(args.pause)
        load = os.getloadavg()[0]
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                           dashboard_address=":0", silence_logs=40)
        with distributed.Client(cluster, set_as_default=False) as client, \
                tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            r = sweep(specs, data=data, calibration=calibration, client=client,
                      store=os.path.join(tmp, "s.sqlite"), progress=False)
            wall = time.perf_counter() - start
        cluster.close()
        got = {row["multiplier"]: row["top1"] for row in r.rows}
        if got != serial:
            sys.exit(f"{workers} worker(s): top-1 figures differ from the serial evaluator")
        # task seconds as the workers measured them: their sum over the wall time is
        # the parallelism the machine gave (below the worker count when others load it)
        busy = sum(row["seconds"] for row in r.rows)
        results.append({"engine": f"sweep, {workers} worker process(es)", "wall_s": wall,
                        "task_s_mean": busy / len(r.rows), "parallelism": busy / wall,
                        "load_before": load})
        print(f"sweep on {workers} worker(s): {wall:.1f} s, {busy / len(r.rows):.2f} s a task, "
              f"parallelism {busy / wall:.2f} (load average before: {load:.1f})")

    one, two = results[1]["wall_s"], results[2]["wall_s"]
    print(f"speed-up 2 workers vs 1: {one / two:.2f}x; 1 worker vs serial: "
          f"{results[0]['wall_s'] / one:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count(), "tasks": len(specs), "images": len(data[1]),
                       "results": results, "speedup_2_vs_1": one / two}, f, indent=1)


if __name__ == "__main__":
    main()
