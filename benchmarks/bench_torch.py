"""The torch adapter's speed: approximate layers vs the same float torch model.

    python benchmarks/bench_torch.py [--threads 2] [--repeat 5] [--rounds 3] [--json FILE]
                                     [--only overhead]

One run, one thread count for torch and approxmul, each engine timed in its
own block after a short pause (best of --repeat):
- forward of ResNet-20-shaped CIFAR-10 convolutions (batch 64, 3x3, 16/32/64
  channels) and of the whole ResNet-20 (the median ratio of --rounds rounds,
  default 3): float torch vs approximated with the exact multiplier, DRUM(4)
  and an arbitrary random 8x8 table;
- backward with gradient="ste" vs the float model's backward;
- adapter overhead: one approximate Conv2d layer vs a raw approxmul_cffi.conv2d
  of the same codes (the adapter adds quantize, requantize, dequantize):
  single calls of each interleaved in a shuffled order (all on approxmul's
  pool, no torch operator between them), 300 each, ratio of the medians;
  and, in the same calls, vs the library's own call from the same float
  input (the evaluator's layer, quantizing inside its fused conv2d + output
  stage, bound once to the input's layout): what is left is the adapter's
  Python and torch glue; then the same three in blocks of 60 calls of one
  engine, 12 rounds (median of the rounds' ratios of block medians);
  --only overhead runs these rows alone;
- per-call cost: a 1x4x4x4 conv, float torch vs raw conv2d vs the layer, and a
  Linear(64, 10) on 8 samples, float vs the layer;
- interleaving: an approximate layer's call right after a float torch conv vs
  right after itself (medians of 21 calls).
Prints the ratios (>1: the approximate model is faster).
"""

import json
import platform
import statistics
import time

import numpy as np
import torch

import approxmul_cffi as am
import timing  # benchmarks/timing.py
from approxmul_cffi._library import ffi
from approxmul_cffi.torch import approximate
from timing import median_time

PAUSE = 0.2
OVERHEAD_SAMPLES = 300
OVERHEAD_BLOCKS, OVERHEAD_BLOCK_CALLS = 12, 60
INTERLEAVE_SAMPLES = 21


def best(fn, repeat):
    return timing.best(fn, repeat, pause=PAUSE)


class Block(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.relu1 = torch.nn.ReLU()
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.short = torch.nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False),
                                             torch.nn.BatchNorm2d(cout))
        self.relu2 = torch.nn.ReLU()

    def forward(self, x):
        y = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu2(y + self.short(x))


def resnet20():
    layers = [torch.nn.Conv2d(3, 16, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU()]
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(3):
            layers.append(Block(cin, cout, stride if i == 0 else 1))
            cin = cout
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)]
    return torch.nn.Sequential(*layers).eval()


def adapter_overhead(args, results):
    """One approximate Conv2d layer against a raw conv2d of the same codes and the
    library's own real-input call (rows of ``results``); returns (the
    approximated model, its input, its channels)."""
    c, size = 16, 32
    net = torch.nn.Sequential(torch.nn.Conv2d(c, c, 3, padding=1)).eval()
    x = torch.randn(args.batch, c, size, size)
    approx = approximate(net, "drum:k=4", calibration=[x], gradient="none")
    layer = approx[0]
    m = layer.q_multiplier
    q = layer.quantized(False)
    codes = layer.integer_forward(x)[1].numpy()
    w = q["w_codes"].numpy()
    # the library's own call from the same float input to the same float
    # output, without the adapter: the evaluator's layer bound once to x's
    # layout (QuantizedLayer.bind_real: the fused quantize, conv2d and output
    # stage of approxmul_conv2d_real), into a new output; what the layer adds
    # beyond it is the adapter's glue (the module call, the parameters'
    # versions, the layout check)
    xn, node = x.numpy(), layer.q_node
    n, ch, h, wd = x.shape
    out_shape, call = node.bind_real(m, np.float32, np.float32, tuple(x.shape),
                                     (ch * h * wd, h * wd, wd, 1))

    def library():
        out = np.empty(out_shape, np.float32)
        with ffi.from_buffer(xn) as x_p, ffi.from_buffer(out, require_writable=True) as out_p:
            call(x_p, out_p)
        return out

    with torch.no_grad():  # the same work: the same bits
        assert np.array_equal(library(), approx(x).numpy()), "library path differs from the layer"
    # single calls of the three in a shuffled order, OVERHEAD_SAMPLES times:
    # all three run on approxmul's own thread pool and no torch operator
    # runs between them, so interleaving measures no contention, and drift
    # on a shared machine (one block of calls read 30 % slower than the next)
    # falls on all three alike. Ratios of medians and of 10th percentiles.
    engines = {"raw": lambda: am.conv2d(codes, w, m, padding=1, x_zero_point=q["z_x"],
                                        w_zero_point=q["z_w"]),
               "library": library, "layer": lambda: approx(x)}
    with torch.no_grad():
        samples = timing.interleaved_times(engines, OVERHEAD_SAMPLES)
    med = {name: statistics.median(ts) for name, ts in samples.items()}
    p10 = {name: sorted(ts)[len(ts) // 10] for name, ts in samples.items()}
    overhead, glue_overhead = med["layer"] / med["raw"] - 1, med["layer"] / med["library"] - 1
    results["rows"].append(dict(name="adapter overhead", raw_ms=med["raw"] * 1e3,
                                layer_ms=med["layer"] * 1e3, overhead=overhead,
                                overhead_p10=p10["layer"] / p10["raw"] - 1))
    results["rows"].append(dict(name="adapter glue", library_ms=med["library"] * 1e3,
                                layer_ms=med["layer"] * 1e3, overhead=glue_overhead,
                                overhead_p10=p10["layer"] / p10["library"] - 1))
    what = f"medians of {OVERHEAD_SAMPLES} interleaved calls; of 10th percentiles"
    print(f"{'adapter overhead, conv 16x32x32, drum:k=4':44s} raw conv2d {med['raw'] * 1e3:8.2f} ms  "
          f"layer {med['layer'] * 1e3:8.2f} ms  overhead {100 * overhead:6.1f} % ({what} "
          f"{100 * (p10['layer'] / p10['raw'] - 1):.1f} %)")
    print(f"{'  of it glue (vs the fused real-input conv2d)':44s} library "
          f"{med['library'] * 1e3:8.2f} ms  layer {med['layer'] * 1e3:8.2f} ms  overhead "
          f"{100 * glue_overhead:6.1f} % ({what} "
          f"{100 * (p10['layer'] / p10['library'] - 1):.1f} %)")
    # the same three in blocks of OVERHEAD_BLOCK_CALLS calls of one engine,
    # OVERHEAD_BLOCKS rounds: a layer called again and again, as a network's
    # is; each ratio is of two blocks' medians in one round
    rounds = {name: [] for name in engines}
    with torch.no_grad():
        for _ in range(OVERHEAD_BLOCKS):
            for name, fn in engines.items():
                fn()
                ts = []
                for _ in range(OVERHEAD_BLOCK_CALLS):
                    start = time.perf_counter()
                    fn()
                    ts.append(time.perf_counter() - start)
                rounds[name].append(statistics.median(ts))
    for label, top, bottom in (("adapter overhead (blocks)", "layer", "raw"),
                               ("adapter glue (blocks)", "layer", "library")):
        ratios = sorted(t / b - 1 for t, b in zip(rounds[top], rounds[bottom]))
        middle = ratios[len(ratios) // 2]
        results["rows"].append(dict(name=label, overhead=middle, round_overheads=ratios))
        print(f"{'  ' + label:44s} {100 * middle:6.1f} % (median of {OVERHEAD_BLOCKS} rounds "
              f"of {OVERHEAD_BLOCK_CALLS}-call blocks, quartiles "
              f"{100 * ratios[len(ratios) // 4]:.1f} to {100 * ratios[3 * len(ratios) // 4]:.1f} %)")
    return approx, x, c


def main():
    args, table, _ = timing.torch_vs_approxmul(
        __doc__.splitlines()[0], rounds=3,
        options=lambda p: p.add_argument("--only", choices=["all", "overhead"], default="all",
                                         help="overhead: the adapter overhead rows alone"))
    torch.manual_seed(0)
    multipliers = {"exact": "exact", "drum:k=4": "drum:k=4", "random table": table}
    results = {"machine": platform.processor() or platform.machine(), "threads": args.threads,
               "torch": torch.__version__, "rows": []}

    def row(name, float_s, approx_s, what):
        ratio = float_s / approx_s
        results["rows"].append(dict(name=name, float_ms=float_s * 1e3, approx_ms=approx_s * 1e3,
                                    ratio=ratio, what=what))
        print(f"{name:44s} float {float_s * 1e3:8.2f} ms  approx {approx_s * 1e3:8.2f} ms  "
              f"{what} {ratio:5.2f}x", flush=True)

    if args.only == "overhead":
        adapter_overhead(args, results)
        write(results, args.json)
        return
    # ---- single ResNet-20-shaped layers
    for c, size in ((16, 32), (32, 16), (64, 8)):
        net = torch.nn.Sequential(torch.nn.Conv2d(c, c, 3, padding=1)).eval()
        x = torch.randn(args.batch, c, size, size)
        with torch.no_grad():
            t_float = best(lambda: net(x), args.repeat)
            for label, m in multipliers.items():
                approx = approximate(net, m, calibration=[x], gradient="none")
                # calibration ran NumPy's BLAS, whose threads spin for tens of ms
                # after it: the layer's block must not start beside them (its
                # first calls then took 16 ms instead of 1.3)
                time.sleep(PAUSE)
                row(f"conv {c}x{size}x{size} forward, {label}", t_float,
                    best(lambda: approx(x), args.repeat), "speed vs float")
    # ---- whole ResNet-20: per round the float model's block, then each
    # approximated model's; the row is the round with the median ratio (a
    # burst of load during one float block moved a single ratio by 30 %)
    net = resnet20()
    x = torch.randn(args.batch, 3, 32, 32)
    with torch.no_grad():
        models = {label: approximate(net, m, calibration=[x], gradient="none")
                  for label, m in multipliers.items()}
        rounds = {label: [] for label in models}
        for _ in range(args.rounds):
            t_float = best(lambda: net(x), args.repeat)
            for label, approx in models.items():
                rounds[label].append((t_float, best(lambda: approx(x), args.repeat)))
        for label, times in rounds.items():
            t_float, t_approx = sorted(times, key=lambda t: t[0] / t[1])[len(times) // 2]
            row(f"ResNet-20 forward, {label}", t_float, t_approx,
                f"speed vs float (median of {len(times)} rounds)")
    # ---- backward (ste), the whole model
    train_net = resnet20()
    approx = approximate(train_net, "drum:k=4", calibration=[x], gradient="ste")
    out_f = train_net(x)
    t_float = best(lambda: out_f.sum().backward(retain_graph=True), args.repeat)
    out_a = approx(x)
    row("ResNet-20 backward (ste), drum:k=4", t_float,
        best(lambda: out_a.sum().backward(retain_graph=True), args.repeat), "speed vs float")
    approx, x, c = adapter_overhead(args, results)
    # ---- fixed cost per call: a layer too small for the kernels to matter
    tiny = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3, padding=1)).eval()
    xt = torch.randn(1, 4, 4, 4)
    small = approximate(tiny, "drum:k=4", calibration=[xt], gradient="none")
    qs = small[0].quantized(False)
    tiny_codes = small[0].integer_forward(xt)[1].numpy()
    tiny_w = qs["w_codes"].numpy()
    calls = 2000
    with torch.no_grad():
        t_tf = best(lambda: [tiny(xt) for _ in range(calls)], 3) / calls
        t_tr = best(lambda: [am.conv2d(tiny_codes, tiny_w, small[0].q_multiplier, padding=1,
                                       x_zero_point=qs["z_x"], w_zero_point=qs["z_w"])
                             for _ in range(calls)], 3) / calls
        t_tl = best(lambda: [small(xt) for _ in range(calls)], 3) / calls
    results["rows"].append(dict(name="per-call cost, conv 1x4x4x4", float_us=t_tf * 1e6,
                                raw_us=t_tr * 1e6, layer_us=t_tl * 1e6))
    print(f"{'per-call cost, conv 1x4x4x4, drum:k=4':44s} float {t_tf * 1e6:8.1f} us  "
          f"raw conv2d {t_tr * 1e6:6.1f} us  layer {t_tl * 1e6:6.1f} us")
    # and of a classifier head, Linear(64, 10) on 8 samples
    head = torch.nn.Sequential(torch.nn.Linear(64, 10)).eval()
    xh = torch.randn(8, 64)
    small_head = approximate(head, "drum:k=4", calibration=[xh], gradient="none")
    with torch.no_grad():
        t_hf = best(lambda: [head(xh) for _ in range(calls)], 3) / calls
        t_hl = best(lambda: [small_head(xh) for _ in range(calls)], 3) / calls
    results["rows"].append(dict(name="per-call cost, linear 8x64->10", float_us=t_hf * 1e6,
                                layer_us=t_hl * 1e6))
    print(f"{'per-call cost, linear 8x64->10, drum:k=4':44s} float {t_hf * 1e6:8.1f} us  "
          f"layer {t_hl * 1e6:6.1f} us")
    # ---- interleaving: the approximate layer right after a float torch conv
    # (as between the layers of a model) vs right after itself; the layer's
    # own call is timed, medians of INTERLEAVE_SAMPLES, each situation in its
    # own block after a pause (a difference of two best-of times was noise)
    pre = torch.nn.Conv2d(c, c, 3, padding=1).eval()
    with torch.no_grad():
        alone = median_time(lambda: approx(x), lambda: approx(x), INTERLEAVE_SAMPLES, PAUSE)
        inside = median_time(lambda: approx(x), lambda: pre(x), INTERLEAVE_SAMPLES, PAUSE)
    results["rows"].append(dict(name="interleaving", alone_ms=alone * 1e3, inside_ms=inside * 1e3,
                                ratio=alone / inside))
    print(f"{'interleaved after a float conv, drum:k=4':44s} alone {alone * 1e3:8.2f} ms  "
          f"inside {inside * 1e3:8.2f} ms  speed {alone / inside:5.2f}x of isolated (medians of "
          f"{INTERLEAVE_SAMPLES})")
    write(results, args.json)


def write(results, path):
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
