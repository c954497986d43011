"""The integer residual Add (TFLite's arithmetic) vs NumPy's float add, in one run.

    python benchmarks/bench_add.py [--repeat 7] [--json FILE]

The evaluator's, ONNX import's and the adapters' residual connections add
two tensors of 8-bit codes on different grids into a third grid. Per
shape (ResNet-50's first residual add at batch 1, ShuffleNet's 240-channel
28x28 at batch 8, ResNet-20's 64-channel 8x8 at batch 64), best of
--repeat calls, each engine in its own block after a short pause:
- the layer's forward (8-bit codes: a table of the 65536 byte pairs);
- the same arithmetic on the whole arrays (``add_codes``: int64 NumPy, the
  path of codes wider than 8 bits and of 8-bit codes before the table);
- NumPy float32 ``a + b`` on arrays of the same shape (the baseline: what
  a float model's add costs).
Prints ms and ratios to the float add (> 1: slower than it).
"""

import argparse
import json
import platform

import numpy as np

import timing  # benchmarks/timing.py
from approxmul_cffi import nn

PAUSE = 0.2
SHAPES = [(1, 256, 56, 56), (8, 240, 28, 28), (64, 64, 8, 8)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json", help="also write the results to this JSON file")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    grids = [nn.quant.QParams(0.05, 37, signed=False), nn.quant.QParams(0.02, 200, signed=False)]
    out = nn.quant.QParams(0.07, 90, signed=False)
    add = nn.Add().lower(grids, out, nn.quant.QuantConfig())
    rows = []
    for shape in SHAPES:
        xs = [nn.QTensor(rng.integers(0, 256, shape).astype(np.uint8), g) for g in grids]
        fa, fb = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        (a, b), out_qp = xs, out.to_domain(False)
        times = {
            "float32 a + b (NumPy)": timing.best(lambda: fa + fb, args.repeat, pause=PAUSE),
            "integer add, table": timing.best(lambda: add.forward(xs), args.repeat, pause=PAUSE),
            "integer add, int64 arithmetic": timing.best(
                lambda: add.add_codes(a.codes, a.qparams, b.codes, b.qparams, out_qp),
                args.repeat, pause=PAUSE),
        }
        base = times["float32 a + b (NumPy)"]
        for what, t in times.items():
            print(f"{str(shape):18s} {what:32s} {t * 1e3:8.2f} ms  {t / base:6.2f}x float add")
            rows.append({"shape": list(shape), "what": what, "ms": t * 1e3, "ratio": t / base})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.processor() or platform.machine(), "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
