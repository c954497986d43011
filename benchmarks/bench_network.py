"""Images/s of the bundled digits network: approximate integer vs float.

    python benchmarks/bench_network.py [--threads 2] [--images 4096] [--json FILE]

One run measures, with the same thread count: integer inference with an
arbitrary 8x8 table multiplier (random table, so no exact shortcut applies)
and with the exact multiplier, float inference of the same network in NumPy,
and in PyTorch on CPU when it is installed. Each figure is the best of
``--repeat`` passes over ``--images`` held-out images (tiled). Prints the
ratios and writes JSON.
"""

import argparse
import json
import os
import platform
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--images", type=int, default=4096, help="images per pass (held-out, tiled)")
    p.add_argument("--batch", type=int, default=512, help="batch size of every engine")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="also write the results to this JSON file")
    return p.parse_args(argv)


args = parse_args()
# BLAS reads these when NumPy loads: set them first so NumPy uses the same thread count.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)

import numpy as np  # noqa: E402

import approxmul_cffi as am  # noqa: E402
from approxmul_cffi import nn  # noqa: E402
from approxmul_cffi.datasets import load_digits  # noqa: E402
from approxmul_cffi.evaluation import bundled_model  # noqa: E402


def best_rate(fn, x, repeat):
    fn(x[:args.batch])  # warm-up: caches, thread pools
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for i in range(0, len(x), args.batch):
            fn(x[i:i + args.batch])
        best = min(best, time.perf_counter() - start)
    return len(x) / best


def torch_forward(torch, model):
    """Float forward of an nn.Model graph with torch.nn.functional."""
    F = torch.nn.functional
    params = {n.name: {k: torch.from_numpy(v) for k, v in n.layer.params().items()}
              for n in model.nodes}

    def op(node, xs):
        layer, p = node.layer, params[node.name]
        if isinstance(layer, nn.Conv2d):
            return F.conv2d(xs[0], p["weight"], p.get("bias"), layer.stride, layer.padding,
                            layer.dilation, layer.groups)
        if isinstance(layer, nn.BatchNorm2d):
            return F.batch_norm(xs[0], p["running_mean"], p["running_var"], p["weight"],
                                p["bias"], False, 0.0, layer.eps)
        if isinstance(layer, nn.ReLU6):
            return F.relu6(xs[0])
        if isinstance(layer, nn.ReLU):
            return F.relu(xs[0])
        if isinstance(layer, nn.MaxPool2d):
            return F.max_pool2d(xs[0], layer.kernel_size, layer.stride, layer.padding)
        if isinstance(layer, nn.AvgPool2d):
            return F.avg_pool2d(xs[0], layer.kernel_size, layer.stride, layer.padding)
        if isinstance(layer, nn.GlobalAvgPool):
            return xs[0].mean(dim=(2, 3))
        if isinstance(layer, nn.Flatten):
            return xs[0].flatten(1)
        if isinstance(layer, nn.Linear):
            return F.linear(xs[0], p["weight"], p.get("bias"))
        if isinstance(layer, nn.Add):
            return xs[0] + xs[1]
        if isinstance(layer, nn.Softmax):
            return F.softmax(xs[0], dim=-1)
        raise ValueError(f"no PyTorch translation of a {type(layer).__name__} layer")

    def forward(x):
        with torch.inference_mode():
            values = {nn.INPUT: torch.from_numpy(x)}
            for node in model.nodes:
                values[node.name] = op(node, [values[s] for s in node.inputs])
            return values[model.output].numpy()

    return forward


def main():
    am.set_num_threads(args.threads)
    model = bundled_model()
    x_test, y_test = load_digits("test")
    reps = -(-args.images // len(x_test))
    x = np.ascontiguousarray(np.tile(x_test, (reps, 1, 1, 1))[:args.images])
    qmodel = nn.quantize(model, load_digits("train")[0])

    rng = np.random.default_rng(0)
    exact_table = np.asarray(am.Multiplier.exact(bits=8).table(), dtype=np.int64)
    table = am.Multiplier.from_table(
        (exact_table + rng.integers(-64, 65, exact_table.shape)).astype(np.int32), signed=False)
    exact = am.Multiplier.exact(bits=8)
    results = {}
    for label, m in (("approx_table", table), ("approx_exact", exact)):
        assignment = qmodel.assign(m)
        qmodel.prepare(assignment)
        # what is timed must be right: the exact integer network agrees with the
        # float one on nearly every image (99.6%), the +-64 table on most (checked
        # once, outside the timing)
        agree = (qmodel.predict(x_test, m) == model.predict(x_test)).mean()
        if agree < (0.97 if m is exact else 0.90):
            raise SystemExit(f"{label}: predictions agree with the float network on only "
                             f"{agree:.1%} of the test images")
        results[label] = best_rate(lambda b: qmodel.run_codes(b, assignment), x, args.repeat)
    x32 = x.astype(np.float32)
    results["float_numpy"] = best_rate(model.forward, x32, args.repeat)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(args.threads)
        fwd = torch_forward(torch, model)
        assert np.allclose(fwd(x32[:64]), model.forward(x32[:64]), atol=1e-4)
        results["float_torch"] = best_rate(fwd, x32, args.repeat)

    plan = getattr(table, "plan", "?")
    print(f"bundled digits LeNet, {len(x)} images, batch {args.batch}, {args.threads} threads, "
          f"best of {args.repeat}; table multiplier plan: {plan}")
    print(f"{'engine':<14}{'images/s':>12}{'vs torch':>10}{'vs numpy':>10}")
    for label, rate in results.items():
        vs_torch = f"{rate / results['float_torch']:.2f}x" if "float_torch" in results else "-"
        print(f"{label:<14}{rate:>12,.0f}{vs_torch:>10}{rate / results['float_numpy']:>9.2f}x")
    doc = dict(images=len(x), batch=args.batch, threads=args.threads, repeat=args.repeat,
               images_per_s=results, table_plan=plan, library=am.info(),
               machine=dict(platform=platform.platform(), processor=platform.processor(),
                            python=sys.version.split()[0], numpy=np.__version__,
                            torch=getattr(torch, "__version__", None)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
