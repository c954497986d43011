"""The one timing rule the benchmark scripts share: best of N calls, one block per engine.

Scripts here import it as a sibling module (``python benchmarks/bench_x.py``
puts this folder on ``sys.path``).
"""

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
