"""Throughput of approximate GEMMs against NumPy's BLAS, in one run.

Measures giga-products per second (one product = one multiply-add of the
GEMM) on the same shapes and thread count for: NumPy float32 and float64
matmul, the NumPy table reference users write today, a naive C triple loop
over the product table (compiled here with cc; skipped without a compiler),
and approxmul's kernels for several multipliers. Prints a table with the
ratio to NumPy float32 matmul and optionally writes JSON.

    python3 benchmarks/bench_gemm.py --json out.json   # after pip install .
    APPROXMUL_LIBRARY=$PWD/build/capi/libapproxmul.so PYTHONPATH=$PWD python3 benchmarks/bench_gemm.py
    python3 benchmarks/bench_gemm.py --quick          # tiny shapes, seconds

For stable figures run it on an idle machine; every figure is the best of
--repeat runs. OPENBLAS_CORETYPE forces a BLAS kernel: unset it (and
OPENBLAS_L2_SIZE) to measure what users get; the kernel in use is reported
when threadpoolctl is installed.
"""

import argparse
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

HERE = pathlib.Path(__file__).resolve().parent

SHAPES = {"square-512": (512, 512, 512), "conv-64x576x3136": (64, 576, 3136),
          "conv-256x2304x196": (256, 2304, 196)}
QUICK_SHAPES = {"quick-32x48x40": (32, 48, 40), "quick-17x130x65": (17, 130, 65)}


# ---------------------------------------------------------------- multipliers

def drum_operand(x, k):
    """DRUM's operand: its top k significant bits, the lowest of them forced to 1."""
    x = np.asarray(x, np.int64)
    out = x.copy()
    for i, v in enumerate(x.flat):
        p = int(v).bit_length()
        if p > k:
            shift = p - k
            out.flat[i] = ((int(v) >> shift) | 1) << shift
    return out


def drum_table(k=4):
    f = drum_operand(np.arange(256), k)
    return np.outer(f, f)


def truncated_table(cut):
    """An 8x8 unsigned AND-array multiplier without the partial products of columns < cut."""
    a = np.arange(256)[:, None]
    b = np.arange(256)[None, :]
    total = np.zeros((256, 256), np.int64)
    for i in range(8):
        for j in range(8):
            if i + j >= cut:
                total += (((a >> i) & 1) * ((b >> j) & 1)) << (i + j)
    return total


def multipliers(rng):
    """name -> (multiplier, product(a, b) of operand values from the table or formula
    it was made from: the check of its results)."""
    def table(t):
        t = np.asarray(t, np.int64)
        return am.Multiplier.from_table(t), lambda a, b: t[a, b]

    exact = exact_product
    return {
        "random 8x8 table": table(rng.integers(0, 65536, (256, 256))),
        "exact 8-bit": (am.Multiplier.exact(8), exact),
        "DRUM(4) table": table(drum_table(4)),
        "truncated(cut=4) table": table(truncated_table(4)),
        "exact 16-bit (function-width)": (am.Multiplier.exact(16), exact),
    }


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
            a, b = (a16, b16) if mult.bits == 16 else (a8, b8)
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
    return results


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
    args = parser.parse_args(argv)
    shapes = QUICK_SHAPES if args.quick else SHAPES
    repeat = 1 if args.quick else args.repeat
    limiter = limit_blas(args.threads)
    try:
        results = run(shapes, args.threads, repeat, 4 << 20 if args.quick else 256 << 20)
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
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"facts": facts, "results": results}, f, indent=1)
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
