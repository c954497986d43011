"""conv2d's output stage: the accumulators requantized inside the convolution
vs. conv2d then requantize as two calls, and what an approximate torch layer
adds on top, each as a ratio to the raw conv2d on the same codes.

    python benchmarks/bench_output_stage.py [--threads 2] [--repeat 7] [--rounds 5] [--json FILE]

Layers: ResNet-20's 16->16 32x32 and 64->64 8x8 3x3 convolutions at batch
64 under DRUM(4) and the exact multiplier, weights and activations as the
torch adapter quantizes them. Per round, each engine runs its own block of
--repeat calls after a short pause (best of the block); the figures are the
best over --rounds rounds. Engines:
- raw: approxmul_cffi.conv2d, int32 accumulators (no output stage);
- two calls: conv2d, then quant.requantize(..., real=(scale, float32));
- fused: quant.conv2d_requantize(..., real=...), the layer's own path;
- layer: the approximate torch module (quantizes its float input too).
"""

import argparse
import json
import platform

import numpy as np
import torch

import approxmul_cffi as am
import timing  # benchmarks/timing.py
from approxmul_cffi import quant
from approxmul_cffi.torch import approximate

LAYERS = [(16, 32, "drum:k=4"), (16, 32, "exact"), (64, 8, "drum:k=4"), (64, 8, "exact")]


def engines(channels, size, spec, batch):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(channels, channels, 3, padding=1)).eval()
    x = torch.randn(batch, channels, size, size)
    model = approximate(net, spec, calibration=[x], gradient="none")
    layer = model[0]
    m, node = layer.q_multiplier, layer.q_node
    q = layer.quantized(False)
    codes, w = layer.integer_forward(x)[1].numpy(), q["w_codes"].numpy()
    prepared = node.prepare(False)
    _, out_qp, (lo, hi) = node._grid(False)
    stage = (prepared.bias, prepared.mantissa, prepared.shift, int(out_qp.zero_point), lo, hi)
    real = (float(out_qp.scale), np.float32)
    conv = dict(padding=1, x_zero_point=q["z_x"], w_zero_point=q["z_w"])

    def two_calls():
        return quant.requantize(am.conv2d(codes, w, m, **conv), *stage, signed=False, real=real)

    fused = lambda: quant.conv2d_requantize(codes, w, m, *stage, **conv, real=real)  # noqa: E731
    assert np.array_equal(two_calls(), fused())
    return {"raw": lambda: am.conv2d(codes, w, m, **conv), "two calls": two_calls,
            "fused": fused, "layer": lambda: model(x)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--json")
    args = p.parse_args()
    am.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    results = dict(machine=platform.processor() or platform.machine(), threads=args.threads,
                   isa=am.info()["isa"], rows=[])
    with torch.no_grad():
        for channels, size, spec in LAYERS:
            fns = engines(channels, size, spec, args.batch)
            times = {name: float("inf") for name in fns}
            for _ in range(args.rounds):
                for name, fn in fns.items():
                    times[name] = min(times[name], timing.best(fn, args.repeat, pause=0.1))
            row = dict(layer=f"{channels}->{channels} {size}x{size}", multiplier=spec,
                       ms={k: v * 1e3 for k, v in times.items()},
                       vs_raw={k: v / times["raw"] for k, v in times.items()})
            results["rows"].append(row)
            print(f"{row['layer']:>14s} {spec:9s} raw {times['raw'] * 1e3:6.2f} ms   "
                  + "   ".join(f"{k} {row['vs_raw'][k]:.3f}x" for k in ("two calls", "fused",
                                                                         "layer")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
