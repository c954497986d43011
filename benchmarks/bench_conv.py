"""approxmul_cffi.conv2d at ResNet-20's CIFAR-10 layer shapes vs torch's float conv2d.

    python benchmarks/bench_conv.py [--threads 2] [--repeat 5] [--batch 64] [--rounds 5] [--json FILE]
    python benchmarks/bench_conv.py --depthwise [--batch 8] ...

One run, the same thread count for torch and approxmul; each engine is timed
in its own block after a short pause (interleaving them measures contention
for the cores, not the kernels), best of --repeat. Layers: 3x3, padding 1,
uint8 activation and weight codes, zero points 3 and 128. Prints
float ms / approxmul ms (> 1: approxmul is faster): the median over
--rounds rounds of torch's block then each multiplier's, with the lowest
and highest round (a shared machine's load moves between blocks; one
round's ratio has varied by 2x there). With --depthwise, MobileNetV2's 3x3
depthwise layers (groups = channels; stride 2 where it downsamples) instead.
"""

import statistics

import json
import os
import platform

import numpy as np
import torch

import approxmul_cffi as am
import timing  # benchmarks/timing.py

PAUSE = 0.2
# (in channels, out channels, height = width, groups, stride)
SHAPES = [(3, 16, 32, 1, 1), (16, 16, 32, 1, 1), (32, 32, 16, 1, 1), (64, 64, 8, 1, 1)]
# MobileNetV2 at 224x224: its depthwise layers' channels, input side, stride
DEPTHWISE = [(32, 32, 112, 32, 1), (96, 96, 112, 96, 2), (144, 144, 56, 144, 1),
             (192, 192, 28, 192, 1), (384, 384, 14, 384, 1), (960, 960, 7, 960, 1)]


def best(fn, repeat):
    return timing.best(fn, repeat, pause=PAUSE)


def main():
    args, table, rng = timing.torch_vs_approxmul(
        __doc__.splitlines()[0], rounds=5,
        options=lambda p: p.add_argument("--depthwise", action="store_true"))
    multipliers = {"exact": am.Multiplier.exact(bits=8), "drum:k=4": am.Multiplier.from_spec("drum:k=4"),
                   "table": table}
    load = os.getloadavg()[0]
    results = {"machine": platform.processor() or platform.machine(), "threads": args.threads,
               "batch": args.batch, "load_before": load, "rows": []}
    print(f"threads {args.threads}, batch {args.batch}, load average {load:.2f}")
    for cin, cout, hw, groups, stride in DEPTHWISE if args.depthwise else SHAPES:
        xf = torch.randn(args.batch, cin, hw, hw)
        wf = torch.randn(cout, cin // groups, 3, 3)
        x = rng.integers(0, 256, (args.batch, cin, hw, hw), dtype=np.uint8)
        w = rng.integers(0, 256, (cout, cin // groups, 3, 3), dtype=np.uint8)
        conv = dict(padding=1, stride=stride, groups=groups)
        floats, times = [], {label: [] for label in multipliers}
        for _ in range(args.rounds):
            with torch.no_grad():
                floats.append(best(lambda: torch.nn.functional.conv2d(xf, wf, **conv),
                                   args.repeat))
            for label, m in multipliers.items():
                times[label].append(best(lambda: am.conv2d(x, w, m, x_zero_point=3,
                                                           w_zero_point=128, **conv), args.repeat))
        for label in multipliers:
            ratios = sorted(f / t for f, t in zip(floats, times[label]))
            ratio = statistics.median(ratios)
            kind = "" if groups == 1 else f" dw/{stride}"
            name = f"conv {cin}->{cout} {hw}x{hw}{kind}, {label}"
            print(f"{name:32s} float {min(floats) * 1e3:7.2f} ms  approxmul "
                  f"{min(times[label]) * 1e3:7.2f} ms  ratio {ratio:5.2f}x "
                  f"({ratios[0]:.2f} to {ratios[-1]:.2f})")
            results["rows"].append({"shape": [args.batch, cin, cout, hw], "groups": groups,
                                    "stride": stride, "multiplier": label,
                                    "float_s": min(floats), "approxmul_s": min(times[label]),
                                    "ratio": ratio, "round_ratios": ratios})
    results["load_after"] = os.getloadavg()[0]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
