"""Thread scaling of approxmul's GEMMs, for bench_gemm.py: each multiplier's
best rate at one thread and at --threads, in alternating blocks after a
pause (one engine and thread count per block), and NumPy float32's the same
way where threadpoolctl can set BLAS's threads.

A sibling module of the scripts here (``python benchmarks/bench_gemm.py``
puts this folder on ``sys.path``).
"""

import time

import numpy as np

import approxmul_cffi as am

MULTIPLIERS = ("exact 8-bit", "DRUM(4) table", "random 8x8 table")


def scaling(shapes, mults, threads, repeat, best_rate, rounds=3, pause=0.2):
    """Rows of (shape, what, rate at 1 thread, rate at ``threads``, ratio),
    each rate the best over ``rounds`` alternating blocks."""
    try:
        import threadpoolctl
    except ImportError:
        threadpoolctl = None
    rng = np.random.default_rng(1)
    rows = []
    for shape_name, (m, k, n) in shapes.items():
        a = rng.integers(0, 256, (m, k)).astype(np.uint8)
        b = rng.integers(0, 256, (k, n)).astype(np.uint8)
        engines = {}
        if threadpoolctl is not None:
            af, bf = a.astype(np.float32), b.astype(np.float32)

            def blas(t, af=af, bf=bf):
                with threadpoolctl.threadpool_limits(t, user_api="blas"):
                    return best_rate(lambda: af @ bf, m * k * n, repeat)
            engines["numpy float32 matmul"] = blas
        for name in MULTIPLIERS:
            mult = mults[name][0]
            out = np.empty((m, n), am.accumulator_dtype(mult, k))

            def approx(t, mult=mult, out=out):
                am.set_num_threads(t)
                return best_rate(lambda: am.matmul(a, b, mult, out=out), m * k * n, repeat)
            engines[f"approxmul {name} [{mult.plan}]"] = approx
        for what, engine in engines.items():
            best = {1: 0.0, threads: 0.0}
            for _ in range(rounds):
                for t in best:
                    best[t] = max(best[t], engine(t))
                    time.sleep(pause)
            rows.append({"shape": shape_name, "what": what, "gproducts_per_s_1": round(best[1], 3),
                         "gproducts_per_s_n": round(best[threads], 3), "threads": threads,
                         "scaling": round(best[threads] / best[1], 3)})
    am.set_num_threads(threads)
    return rows


def print_scaling(rows):
    if not rows:
        return
    threads = rows[0]["threads"]
    print(f"{'shape':<20} {'scaling from 1 thread':<48} {'1 t G/s':>9} {f'{threads} t G/s':>9} "
          f"{'ratio':>6}")
    for r in rows:
        print(f"{r['shape']:<20} {r['what']:<48} {r['gproducts_per_s_1']:>9.2f} "
              f"{r['gproducts_per_s_n']:>9.2f} {r['scaling']:>6.2f}")
