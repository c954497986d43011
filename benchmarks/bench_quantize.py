"""Time quantize/dequantize in the C library against the NumPy statements.

Each case runs the NumPy reference and the C function (QParams.quantize /
dequantize) in separate blocks, a short pause apart, best of --repeats, and
checks that both give the same bits (requantization too: the adapters'
output stage, alone and fused with the dequantization). For scale, the same run times the
approximate conv2d that consumes the quantized activation (a ResNet-20
layer: 64x16x32x32 input, 16x16x3x3 weights, a table multiplier).

    APPROXMUL_LIBRARY=build/capi/libapproxmul.so PYTHONPATH=. \\
        python benchmarks/bench_quantize.py --threads 2 [--quick] [--json out.json]

Figures go in docs/benchmarks.md, section "Quantize and dequantize".
"""

import argparse
import json
import os
import platform
import time

import numpy as np

import approxmul_cffi as am
import timing  # benchmarks/timing.py
from approxmul_cffi import quant


def best_of(function, repeats):
    return timing.best(function, repeats, warmup=False)


def cases(quick):
    rng = np.random.default_rng(0)
    shape = (2, 16, 8, 8) if quick else (64, 16, 32, 32)
    act = quant.choose_qparams(-3.0, 5.0, signed=False)
    x32 = (rng.normal(0, 1.5, size=shape)).astype(np.float32)
    codes = act.quantize(x32)
    w = rng.normal(0, 0.2, size=(16, 16, 3, 3))
    _, wq = quant.quantize_weight(w, signed=True)
    yield "quantize float32 activation, per tensor, uint8", \
        lambda: act.quantize_reference(x32), lambda: act.quantize(x32)
    x64 = x32.astype(np.float64)
    yield "quantize float64 activation, per tensor, uint8", \
        lambda: act.quantize_reference(x64), lambda: act.quantize(x64)
    yield "quantize float64 weight 16x16x3x3, per channel, int8", \
        lambda: wq.quantize_reference(w), lambda: wq.quantize(w)
    yield "dequantize uint8 -> float64", \
        lambda: act.dequantize_reference(codes), lambda: act.dequantize(codes)
    yield "dequantize uint8 -> float32 (NumPy: float64 then astype)", \
        lambda: act.dequantize_reference(codes).astype(np.float32), \
        lambda: act.dequantize(codes, dtype=np.float32)
    # the adapters' output stage: int32 accumulators of that layer to uint8
    # codes, then to float32 (per-channel factors below 1/2, per-tensor scale)
    acc = rng.integers(-40000, 40000, size=shape).astype(np.int32)
    mantissa, shift = quant.quantize_multiplier(rng.uniform(0.001, 0.01, size=shape[1]))
    bias = rng.integers(-500, 500, size=shape[1]).astype(np.int32)
    args = (acc, bias, mantissa, shift, int(act.zero_point), 0, 255)
    yield "requantize int32 -> uint8, per channel", \
        lambda: quant.requantize_reference(*args, signed=False), \
        lambda: quant.requantize(*args, signed=False)
    yield "requantize + dequantize int32 -> float32 (C: one pass)", \
        lambda: act.dequantize_reference(
            quant.requantize_reference(*args, signed=False)).astype(np.float32), \
        lambda: quant.requantize(*args, signed=False, real=(float(act.scale), np.float32))


def conv2d_ms(quick, repeats):
    rng = np.random.default_rng(1)
    shape = (2, 16, 8, 8) if quick else (64, 16, 32, 32)
    x = rng.integers(0, 256, size=shape).astype(np.uint8)
    w = rng.integers(0, 256, size=(16, 16, 3, 3)).astype(np.uint8)
    m = am.Multiplier.from_table(rng.integers(0, 65536, (256, 256)))
    am.conv2d(x, w, m, padding=1)
    return best_of(lambda: am.conv2d(x, w, m, padding=1), repeats) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--pause", type=float, default=0.5, help="seconds between blocks")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the smoke test")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    am.set_num_threads(args.threads)
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, "
               f"approxmul threads={args.threads}, isa={am.info().get('isa')}")
    print(f"# {machine}")
    print(f"{'case':58s} {'numpy ms':>9s} {'C ms':>8s} {'speed-up':>8s}")
    results = []
    for name, reference, library in cases(args.quick):
        np.testing.assert_array_equal(library(), reference())  # same bits, or no figure
        time.sleep(args.pause)
        numpy_s = best_of(reference, args.repeats)
        time.sleep(args.pause)
        c_s = best_of(library, args.repeats)
        results.append({"case": name, "numpy_ms": numpy_s * 1e3, "c_ms": c_s * 1e3,
                        "speedup": numpy_s / c_s})
        print(f"{name:58s} {numpy_s * 1e3:9.3f} {c_s * 1e3:8.3f} {numpy_s / c_s:7.1f}x")
    time.sleep(args.pause)
    conv = conv2d_ms(args.quick, max(3, args.repeats // 4))
    print(f"{'approximate conv2d of the activation (table, padding 1)':58s} "
          f"{'':9s} {conv:8.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "results": results, "conv2d_ms": conv}, f, indent=1)


if __name__ == "__main__":
    main()
