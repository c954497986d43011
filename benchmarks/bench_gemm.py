"""Throughput of approximate GEMMs against NumPy's BLAS, in one run.

Measures giga-products per second (one product = one multiply-add of the
GEMM) on the same shapes and thread count for: NumPy float32 and float64
matmul, the NumPy table reference users write today, a naive C triple loop
over the product table (compiled here with cc; skipped without a compiler),
and approxmul's kernels for several multipliers. Prints a table with the
ratio to NumPy float32 matmul, then (unless --threads is 1) each engine's
scaling from one thread to --threads (benchmarks/scaling.py), and optionally
writes JSON.

    python3 benchmarks/bench_gemm.py --json out.json   # after pip install .
    APPROXMUL_LIBRARY=$PWD/build/capi/libapproxmul.so PYTHONPATH=$PWD python3 benchmarks/bench_gemm.py
    python3 benchmarks/bench_gemm.py --quick          # tiny shapes, seconds

    python3 benchmarks/bench_gemm.py --interleaved    # thread-pool contention only

--interleaved times each engine's call right after another engine's call
(whose idle threads may still spin) against the same call right after
itself (isolated), each in its own block after a pause, and the remedy of
approxmul_cffi.threads.exclusive(); it prints speed ratios (isolated time /
interleaved time, medians of --samples) and the CPU time idle pools burn,
see docs/benchmarks.md.

For stable figures run it on an idle machine; every figure is the best of
--repeat runs. OPENBLAS_CORETYPE forces a BLAS kernel: unset it (and
OPENBLAS_L2_SIZE) to measure what users get; the kernel in use is reported
when threadpoolctl is installed.
"""

import argparse
import contextlib
import ctypes
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import approxmul_cffi as am  # the installed package, or PYTHONPATH's with APPROXMUL_LIBRARY
from scaling import print_scaling, scaling  # benchmarks/scaling.py
from timing import median_time  # benchmarks/timing.py

HERE = pathlib.Path(__file__).resolve().parent

SHAPES = {"square-512": (512, 512, 512), "conv-64x576x3136": (64, 576, 3136),
          "conv-256x2304x196": (256, 2304, 196)}
QUICK_SHAPES = {"quick-32x48x40": (32, 48, 40), "quick-17x130x65": (17, 130, 65)}


# ---------------------------------------------------------------- multipliers

def drum_operand(x, k):
    """DRUM's operand: its top k significant bits, the lowest of them forced to 1."""
    x = np.asarray(x, np.int64)
    length = np.zeros_like(x)
    for bit in range(63):
        length = np.where(x >> bit != 0, bit + 1, length)
    shift = np.maximum(length - k, 0)
    return np.where(length > k, ((x >> shift) | 1) << shift, x)


def leading_one(x):
    """floor(log2 x) of positive int64 values (0 for 0)."""
    k = np.zeros_like(x)
    for bit in range(1, 63):
        k = np.where(x >> bit != 0, bit, k)
    return k


def mitchell_values(a, b):
    """Mitchell's products of unsigned values: with x = 2^k + m, S = m1 2^k2 + m2 2^k1,
    2^(k1+k2) + S if S < 2^(k1+k2), else 2 S; 0 if either is 0."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    k1, k2 = leading_one(a), leading_one(b)
    s = ((a - (1 << k1)) << k2) + ((b - (1 << k2)) << k1)
    power = np.int64(1) << (k1 + k2)
    return np.where((a == 0) | (b == 0), 0, np.where(s < power, power + s, 2 * s))


def ilm_values(a, b, iterations=1):
    """ILM's products of unsigned values: iterations + 1 rounds, each adding
    2^(k1+k2) + m1 2^k2 + m2 2^k1 and going on with m1, m2 while both are nonzero."""
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    total = np.zeros(a.shape, np.int64)
    for _ in range(iterations + 1):
        live = (a != 0) & (b != 0)
        k1, k2 = leading_one(a), leading_one(b)
        m1, m2 = a - (np.int64(1) << k1), b - (np.int64(1) << k2)
        total += np.where(live, (np.int64(1) << (k1 + k2)) + (m1 << k2) + (m2 << k1), 0)
        a, b = np.where(live, m1, 0), np.where(live, m2, 0)
    return total


def roba_values(a, b):
    """RoBA's products of unsigned values: Ar b + a Br - Ar Br, x rounded to the
    nearest power of two (1.5 2^p up)."""
    def rounded(x):
        x = np.asarray(x, np.int64)
        p = leading_one(x)
        up = np.where(x >= 3 << np.maximum(p - 1, 0), p + 1, p)
        return np.where(x <= 1, x, np.int64(1) << np.where(x <= 1, 0, up))
    ar, br = rounded(a), rounded(b)
    return ar * b + a * br - ar * br


def drum_table(k=4):
    f = drum_operand(np.arange(256), k)
    return np.outer(f, f)


def truncated_values(a, b, cut, bits=8):
    """An unsigned AND-array multiplier without the partial products of columns < cut."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    total = np.zeros(np.broadcast(a, b).shape, np.int64)
    for i in range(bits):
        for j in range(max(cut - i, 0), bits):
            total += (((a >> i) & 1) * ((b >> j) & 1)) << (i + j)
    return total


def truncated_table(cut):
    return truncated_values(np.arange(256)[:, None], np.arange(256)[None, :], cut)


def multipliers(rng):
    """name -> (multiplier, product(a, b) of operand values from the table or formula
    it was made from: the check of its results)."""
    def table(t):
        t = np.asarray(t, np.int64)
        return am.Multiplier.from_table(t), lambda a, b: t[a, b]

    def wide_table(bits):  # 9-12-bit tables run on the generic kernel
        return table(exact_table(bits) + rng.integers(-99, 100, (1 << bits, 1 << bits)))

    exact = exact_product
    return {
        "random 8x8 table": table(rng.integers(0, 65536, (256, 256))),
        "exact 8-bit": (am.Multiplier.exact(8), exact),
        "DRUM(4) table": table(drum_table(4)),
        "truncated(cut=4) table": table(truncated_table(4)),
        "exact 16-bit (byte-split GEMMs)": (am.Multiplier.exact(16), exact),
        "DRUM(4) 16-bit (byte-split factors)": (
            am.multiplier("drum:bits=16,k=4"),
            lambda a, b: drum_operand(a, 4) * drum_operand(b, 4)),
        "truncated(cut=8) 16-bit (exact + low-byte table)": (
            am.multiplier("truncated:bits=16,cut=8"),
            lambda a, b: truncated_values(a, b, 8, 16)),
        # dropped cells in three byte pairs: a table GEMM for each
        "truncated(cut=12) 16-bit (exact + byte-pair tables)": (
            am.multiplier("truncated:bits=16,cut=12"),
            lambda a, b: truncated_values(a, b, 12, 16)),
        # no table and no factorization: the formula in int64 vector lanes
        "Mitchell 16-bit (vector lanes)": (am.multiplier("mitchell:bits=16"), mitchell_values),
        "ILM(1) 16-bit (vector lanes)": (am.multiplier("ilm:bits=16"), ilm_values),
        "RoBA 16-bit (byte-split rank-2 factors)": (am.multiplier("roba:bits=16"), roba_values),
        # products spanning a byte: the nibble kernel (truncation's error part)
        "random 4x4 table": table(rng.integers(-100, 156, (16, 16))),
        "random 10x10 table": wide_table(10),
        "random 12x12 table": wide_table(12),
    }


def exact_table(bits):
    values = np.arange(1 << bits, dtype=np.int64)
    return np.outer(values, values)


def check(name, got, want):
    """A benchmark times only results that are right: stop if they are not."""
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)[0]
        raise SystemExit(f"{name}: result differs from its reference at {tuple(bad)}: "
                         f"{got[tuple(bad)]} != {want[tuple(bad)]}")


def exact_product(a, b):
    return a.astype(np.int64) * b.astype(np.int64)


def table_reference(product, a, b):
    """sum_k product(a[i, k], b[k, j]) in int64, a few rows at a time."""
    out = np.empty((a.shape[0], b.shape[1]), np.int64)
    step = max(1, (16 << 20) // (8 * a.shape[1] * b.shape[1]))
    for i in range(0, a.shape[0], step):
        out[i:i + step] = product(a[i:i + step, :, None], b[None]).sum(1)
    return out


# ---------------------------------------------------------------- timing

def best_rate(function, products, repeat, min_time=0.05):
    """Best giga-products/s over `repeat` timings (each at least min_time long)."""
    function()  # warm up: page faults, thread pools, packing buffers
    best = 0.0
    for _ in range(repeat):
        calls, start = 0, time.perf_counter()
        while True:
            function()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = max(best, products * calls / elapsed / 1e9)
    return best


def naive_library():
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        return None
    out = pathlib.Path(tempfile.mkdtemp(prefix="approxmul-bench-")) / "naive_gemm.so"
    result = subprocess.run([cc, "-O2", "-fopenmp", "-shared", "-fPIC", "-o", str(out),
                             str(HERE / "naive_gemm.c")], capture_output=True, text=True)
    if result.returncode != 0:
        return None
    lib = ctypes.CDLL(str(out))
    lib.naive_table_gemm.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 3 + [ctypes.c_int]
    return lib


def blas_info():
    try:
        import threadpoolctl
    except ImportError:
        return None
    return [{k: v for k, v in p.items() if k in ("internal_api", "version", "architecture",
                                                  "num_threads", "threading_layer")}
            for p in threadpoolctl.threadpool_info()]


def limit_blas(threads):
    try:
        import threadpoolctl
    except ImportError:
        return None
    return threadpoolctl.threadpool_limits(threads)


def run(shapes, threads, repeat, table_ref_bytes):
    """(result rows, the multipliers they timed)."""
    rng = np.random.default_rng(0)
    mults = multipliers(rng)
    naive = naive_library()
    am.set_num_threads(threads)
    results = []
    for shape_name, (m, k, n) in shapes.items():
        products = m * k * n
        a8 = rng.integers(0, 256, (m, k)).astype(np.uint8)
        b8 = rng.integers(0, 256, (k, n)).astype(np.uint8)
        a16 = rng.integers(0, 65536, (m, k)).astype(np.uint16)
        b16 = rng.integers(0, 65536, (k, n)).astype(np.uint16)
        rows = {}
        af, bf = a8.astype(np.float32), b8.astype(np.float32)
        rows["numpy float32 matmul"] = best_rate(lambda: af @ bf, products, repeat)
        ad, bd = a8.astype(np.float64), b8.astype(np.float64)
        rows["numpy float64 matmul"] = best_rate(lambda: ad @ bd, products, repeat)
        table_mult, table_product = mults["random 8x8 table"]
        table = table_mult.table().astype(np.int64)
        # the reference materialises rows x inner x cols products: use a row slice that fits
        ref_rows = max(1, min(m, table_ref_bytes // (8 * k * n)))
        ar = a8[:ref_rows]
        rows[f"numpy table reference ({ref_rows} rows)"] = best_rate(
            lambda: table[ar[:, :, None], b8[None]].sum(1), ref_rows * k * n, max(1, repeat // 2))
        # every engine's result is checked once, outside its timed loop
        check("numpy float64 matmul", (ad @ bd).astype(np.int64)[:ref_rows],  # exact < 2^53
              table_reference(exact_product, ar, b8))
        check("numpy table reference", table[ar[:, :, None], b8[None]].sum(1),
              table_reference(table_product, ar, b8))
        if naive is not None:
            t32 = np.ascontiguousarray(table, dtype=np.int32)
            out = np.empty((m, n), np.int64)
            rows["naive C loop over table"] = best_rate(
                lambda: naive.naive_table_gemm(t32.ctypes.data, a8.ctypes.data, b8.ctypes.data,
                                               out.ctypes.data, m, n, k, threads),
                products, max(1, repeat // 2))
            check("naive C loop over table", out[:ref_rows], table_reference(table_product, ar, b8))
            naive_out = out
        for name, (mult, product) in mults.items():
            mask = (1 << mult.bits) - 1
            a, b = (a16 & mask, b16 & mask) if mult.bits > 8 else (a8 & mask, b8 & mask)
            out = np.empty((m, n), am.accumulator_dtype(mult, k))
            am.matmul(a, b, mult, out=out)
            check(f"approxmul {name}", out[:ref_rows], table_reference(product, a[:ref_rows], b))
            if naive is not None and name == "random 8x8 table":
                check(f"approxmul {name} (all rows, naive C)", out, naive_out)
            rows[f"approxmul {name} [{mult.plan}]"] = best_rate(
                lambda: am.matmul(a, b, mult, out=out), products, repeat)
        base = rows["numpy float32 matmul"]
        for what, rate in rows.items():
            results.append({"shape": shape_name, "m": m, "k": k, "n": n, "what": what,
                            "gproducts_per_s": round(rate, 3),
                            "ratio_to_float32": round(rate / base, 4)})
    return results, mults


# ------------------------------------------------- interleaved vs isolated

def spin_after(call, samples, pause=0.2, window=0.05):
    """Median CPU ms the process's other threads burn in the `window` s after call() (Linux)."""
    from approxmul_cffi import threads as am_threads

    burnt = []
    for _ in range(samples):
        time.sleep(pause)
        call()
        before = am_threads._other_threads_cpu_ns()
        if before is None:
            return None
        time.sleep(window)  # this thread sleeps: what runs now is idle pools spinning
        burnt.append((am_threads._other_threads_cpu_ns() - before) / 1e6)
    return sorted(burnt)[len(burnt) // 2]


def interleaved(threads, samples):
    """Rows (target, situation, ms, speed ratio to isolated) of thread-pool contention."""
    from approxmul_cffi import threads as am_threads

    rng = np.random.default_rng(0)
    table = am.Multiplier.from_table(rng.integers(0, 65536, (256, 256)))
    a = rng.integers(0, 256, (64, 576)).astype(np.uint8)
    b = rng.integers(0, 256, (576, 3136)).astype(np.uint8)
    out = np.empty((64, 3136), np.int64)
    f = rng.standard_normal((512, 512)).astype(np.float32)
    x = rng.integers(0, 256, (8, 16, 28, 28)).astype(np.uint8)
    w = rng.integers(0, 256, (16, 16, 3, 3)).astype(np.uint8)

    def approx():
        am.matmul(a, b, table, out=out)

    def approx_conv():
        am.conv2d(x, w, table, padding=1)

    def blas():
        f @ f

    def after_blas(first=()):
        """Situations of an approxmul call: isolated, `first`, after NumPy BLAS bare / inside exclusive()."""
        return [("isolated", None, None), *first,
                ("after numpy f32 matmul 512", blas, None),
                ("after numpy f32 matmul 512, in threads.exclusive()", blas, "exclusive")]

    am.set_num_threads(threads)
    cases = [("approxmul table matmul 64x576x3136", approx, after_blas()),
             ("numpy f32 matmul 512", blas, [("isolated", None, None),
                                             ("after approxmul table matmul", approx, None),
                                             ("after approxmul table matmul + threads.release()",
                                              lambda: (approx(), am_threads.release()), None)])]
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(threads)
        tx, tw = torch.randn(8, 16, 28, 28), torch.randn(16, 16, 3, 3)

        def torch_conv():
            torch.nn.functional.conv2d(tx, tw, padding=1)

        cases += [("approxmul table conv2d 8x16x28x28", approx_conv,
                   after_blas([("after torch conv2d (layers of a torch model)", torch_conv,
                                None)])),
                  ("torch conv2d 8x16x28x28", torch_conv, [
                      ("isolated", None, None),
                      ("after approxmul table conv2d", approx_conv, None),
                      ("after approxmul table conv2d + threads.release()",
                       lambda: (approx_conv(), am_threads.release()), None)])]
    spin_calls = [("numpy f32 matmul 512 (OpenBLAS)", blas, None),
                  ("numpy f32 matmul 512, in threads.exclusive()", blas, "exclusive"),
                  ("approxmul table matmul (approxmul's OpenMP team)", approx, None),
                  ("approxmul table matmul, then threads.release()",
                   lambda: (approx(), am_threads.release()), None)]
    if torch is not None:
        spin_calls.append(("torch conv2d (torch's pool)", torch_conv, None))
    rows = []
    for name, call, mode in spin_calls:
        with am_threads.exclusive(threads) if mode else contextlib.nullcontext():
            burnt = spin_after(call, samples)
        rows.append({"target": "idle threads' CPU ms in the 50 ms after", "situation": name,
                     "ms": burnt, "speed_vs_isolated": None})
    for target_name, target, situations in cases:
        target()  # warm up
        base = None
        for situation, before, mode in situations:
            # inside exclusive(), NumPy's BLAS runs on one thread: no workers to spin
            with am_threads.exclusive(threads) if mode else contextlib.nullcontext():
                seconds = median_time(target, before or target, samples)
            base = base or seconds
            rows.append({"target": target_name, "situation": situation,
                         "ms": round(seconds * 1e3, 3), "speed_vs_isolated": round(base / seconds, 3)})
    return rows


def print_interleaved(rows):
    print(f"{'timed call (or spin)':<36} {'situation':<50} {'ms':>8} {'speed':>6}")
    for r in rows:
        speed = "" if r["speed_vs_isolated"] is None else f"{r['speed_vs_isolated']:>6.2f}"
        ms = "n/a" if r["ms"] is None else f"{r['ms']:.2f}"
        print(f"{r['target']:<36} {r['situation']:<50} {ms:>8} {speed:>6}")


def print_table(results):
    print(f"{'shape':<20} {'what':<62} {'G/s':>9} {'x f32':>7}")
    for r in results:
        print(f"{r['shape']:<20} {r['what']:<62} {r['gproducts_per_s']:>9.2f} "
              f"{r['ratio_to_float32']:>7.3f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes (smoke test)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5, help="timings per figure (best kept)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--interleaved", action="store_true",
                        help="only thread-pool contention: interleaved vs isolated calls")
    parser.add_argument("--samples", type=int, default=15,
                        help="timings per interleaved figure (median kept)")
    args = parser.parse_args(argv)
    if args.interleaved:
        rows = interleaved(args.threads, 3 if args.quick else args.samples)
        print(f"# {_cpu_model()}, {args.threads} threads per pool, medians of "
              f"{3 if args.quick else args.samples}; speed = isolated time / this time")
        print_interleaved(rows)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"interleaved": rows, "blas": blas_info()}, f, indent=1)
        return 0
    shapes = QUICK_SHAPES if args.quick else SHAPES
    repeat = 1 if args.quick else args.repeat
    limiter = limit_blas(args.threads)
    try:
        results, mults = run(shapes, args.threads, repeat, 4 << 20 if args.quick else 256 << 20)
        # scaling compares two noisy figures: at least 5 timings each
        scaled = [] if args.threads == 1 else scaling(
            shapes, mults, args.threads,
            repeat if args.quick else max(repeat, 5), best_rate, rounds=1 if args.quick else 3)
    finally:
        if limiter is not None:
            limiter.unregister()
    facts = {"machine": platform.machine(), "processor": _cpu_model(), "threads": args.threads,
             "approxmul": am.info(), "blas": blas_info(), "numpy": np.__version__,
             "env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                                    "APPROXMUL_ISA", "OMP_NUM_THREADS")}}
    print(f"# {facts['processor']}, {args.threads} threads, approxmul isa="
          f"{facts['approxmul'].get('isa')}, numpy {np.__version__}")
    if facts["blas"]:
        for p in facts["blas"]:
            print(f"# {p}")
    print_table(results)
    print_scaling(scaled)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"facts": facts, "results": results, "scaling": scaled}, f, indent=1)
    return 0


def _cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
