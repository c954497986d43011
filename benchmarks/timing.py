"""What the benchmark scripts share: best of N calls, one block per engine; the torch set-up.

Scripts here import it as a sibling module (``python benchmarks/bench_x.py``
puts this folder on ``sys.path``).
"""

import argparse
import random
import time


def best(fn, repeat, *, warmup=True, pause=0.0):
    """Seconds of the fastest of ``repeat`` calls of ``fn``.

    ``warmup`` makes one untimed call first (caches, lazy set-up); ``pause``
    sleeps afterwards, so that the next engine's block does not start while
    this one's thread pool still spins.
    """
    if warmup:
        fn()
    fastest = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        fastest = min(fastest, time.perf_counter() - start)
    time.sleep(pause)
    return fastest


def median_time(target, before, samples, pause=0.2):
    """Median seconds of a target() call made right after before(), in a block after a pause.

    Calls follow each other as in a program (no pause between them, so no
    team goes to sleep in between): isolated is before = target.
    """
    time.sleep(pause)  # every pool parks: what spins is what this block starts
    before()
    times = []
    for _ in range(samples):
        before()
        start = time.perf_counter()
        target()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def interleaved_times(engines, samples, seed=0):
    """{name: seconds of each of ``samples`` calls} of ``engines`` ({name: fn}),
    one call of each per sample in a shuffled order, after one warm-up call
    each: engines on the same thread pool, drift falling on all alike."""
    order = random.Random(seed)
    for fn in engines.values():
        fn()
    times = {name: [] for name in engines}
    for _ in range(samples):
        names = list(engines)
        order.shuffle(names)
        for name in names:
            start = time.perf_counter()
            engines[name]()
            times[name].append(time.perf_counter() - start)
    return times


def torch_vs_approxmul(description, *, repeat=5, rounds=1, options=None):
    """Parsed ``--threads --repeat --batch --rounds --json`` of a torch-vs-approxmul script
    (and what ``options(parser)`` adds), with torch and approxmul both set to
    ``--threads`` threads and a random 8x8 table multiplier (seeded) for the
    "arbitrary table" rows: (args, table, the generator that made it, for the
    script's data)."""
    p = argparse.ArgumentParser(description=description)
    if options is not None:
        options(p)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=repeat)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--json")
    args = p.parse_args()
    import numpy as np
    import torch

    import approxmul_cffi as am
    torch.set_num_threads(args.threads)
    am.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    table = am.Multiplier.from_table(rng.integers(0, 1 << 16, (256, 256)).astype(np.int32))
    return args, table, rng
