"""A vendor's 16-bit C model in a matmul: approxmul against the naive loop.

A 16-bit model cannot be tabulated (2^32 pairs), so every product is one
call into the vendor's code, in approxmul as in the loop a user writes. The
script compiles benchmarks/vendor_model.c (a cheap model, so the cost
around each call shows, and the naive i-j-k loop calling it through a
pointer), checks that both give the same sums, then times each in its own
block after a pause: ns per product and the ratio naive / approxmul at the
same thread count. Needs a C compiler (cc, or $CC).
"""
import argparse
import ctypes
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import numpy as np

import approxmul_cffi as am
from timing import best  # benchmarks/timing.py

HERE = pathlib.Path(__file__).resolve().parent
SHAPES = {"64x576x64": (64, 576, 64), "256x256x256": (256, 256, 256)}
SIGNATURE = "uint32_t f(uint16_t a, uint16_t b)"


def build(directory):
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        raise SystemExit("bench_vendor.py needs a C compiler (cc or $CC)")
    path = pathlib.Path(directory) / "vendor_model.so"
    subprocess.run([cc, "-O2", "-fopenmp", "-shared", "-fPIC", "-o", str(path),
                    str(HERE / "vendor_model.c")], check=True)
    lib = ctypes.CDLL(str(path))
    lib.naive_model_gemm.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 3 + [ctypes.c_int]
    return path, lib


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one small shape (smoke test)")
    args = parser.parse_args(argv)
    shapes = {"16x40x16": (16, 40, 16)} if args.quick else SHAPES
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="approxmul-vendor-") as directory:
        path, lib = build(directory)
        model = am.Multiplier.from_c_function(path, "mul16u_demo", SIGNATURE)
        pointer = ctypes.cast(lib.mul16u_demo, ctypes.c_void_p).value
        print(f"# {model.bits}-bit vendor model, plan {model.plan}; ns per product, best of "
              f"{args.repeat}")
        for name, (rows, inner, cols) in shapes.items():
            a = rng.integers(0, 1 << 16, (rows, inner)).astype(np.uint16)
            b = rng.integers(0, 1 << 16, (inner, cols)).astype(np.uint16)
            out = np.empty((rows, cols), np.int64)
            for threads in args.threads:
                def naive():
                    lib.naive_model_gemm(pointer, a.ctypes.data, b.ctypes.data, out.ctypes.data,
                                         rows, cols, inner, threads)
                naive()
                got = am.matmul(a, b, model)
                if not np.array_equal(got, out):
                    raise SystemExit(f"{name}: approxmul and the naive loop disagree")
                time.sleep(0.2)
                t_naive = best(naive, args.repeat)
                am.set_num_threads(threads)
                time.sleep(0.2)
                t_approx = best(lambda: am.matmul(a, b, model, out=out), args.repeat)
                products = rows * inner * cols
                print(f"{name:12s} {threads} thread(s): naive loop {1e9 * t_naive / products:6.2f} "
                      f"ns, approxmul {1e9 * t_approx / products:6.2f} ns, "
                      f"naive / approxmul {t_naive / t_approx:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
