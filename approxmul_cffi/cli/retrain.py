"""``approxmul retrain``: fine-tune a network through approximate multipliers.

Builds the torch twin of an approxmul model (default: the bundled digits
LeNet), approximates its layers (approxmul_cffi.torch), retrains it with
straight-through or multiplier-table gradients, prints the accuracy before,
after each epoch and at the end, and writes the weights for ``evaluate``.
Needs torch (pip install 'approxmul[torch]').
"""

import argparse
import json
import sys

from . import UsageError, add_table_options, check_outputs, load_multiplier
from .evaluate import _layer_overrides, data_arrays

HELP = "retrain a network through approximate multipliers (needs torch)"
GRADIENT_MODES = ("ste", "table", "table2d")  # approxmul_cffi.torch gradient= values


def add_parser(subparsers):
    p = subparsers.add_parser("retrain", help=HELP, description=HELP + ".")
    p.add_argument("--multiplier", "-m", metavar="SPEC", required=True,
                   help="multiplier for every layer")
    p.add_argument("--layer", metavar="NAME=SPEC", action="append", dest="layers", default=[],
                   help="a different multiplier for one layer (repeatable)")
    p.add_argument("--epochs", metavar="N", type=int, default=10, help="epochs (default 10)")
    p.add_argument("--gradient", choices=GRADIENT_MODES, default="ste",
                   help="ste: straight-through; table: per-value slopes of the multiplier; "
                        "table2d: its full gradient tables (default ste)")
    p.add_argument("--model", metavar="NAME|PATH", default="digits-lenet",
                   help="a bundled model name or a model JSON (default digits-lenet)")
    p.add_argument("--data", metavar="FILE.npz",
                   help="arrays x, y (held-out) and train_x, train_y (training); "
                        "default: the bundled model's dataset")
    p.add_argument("--out", metavar="PATH", help="write the retrained model (PATH.json + PATH.npz)")
    p.add_argument("--json", metavar="FILE", help="accuracies before, per epoch and after, in percent")
    p.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default 3e-3)")
    p.add_argument("--batch-size", type=int, default=16, help="batch size (default 16)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--calibration", choices=("minmax", "percentile"), default="minmax",
                   help="activation range calibration (default: minmax)")
    p.add_argument("--bias-correction", action=argparse.BooleanOptionalAction, default=True,
                   help="cancel each layer's mean multiplier error per output channel, measured "
                        "on the training images at each calibration; evaluate the written model "
                        "with --bias-correction (default: on)")
    p.add_argument("--threads", metavar="N", type=int, help="library and torch threads")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_table_options(p)
    return p


def _data(args):
    from approxmul_cffi import datasets
    if args.data:
        arrays = data_arrays(args.data, ("train_x", "train_y", "x", "y"))
        return (arrays["train_x"], arrays["train_y"]), (arrays["x"], arrays["y"])
    from approxmul_cffi.bundled import BUNDLED_MODELS, bundled_name
    if bundled_name(args.model) is None:
        raise UsageError(f"--model {args.model} is not a bundled model "
                         f"({', '.join(BUNDLED_MODELS)}): give its --data")
    dataset = BUNDLED_MODELS[bundled_name(args.model)][1]
    return datasets.load(dataset, "train"), datasets.load(dataset, "test")


def _retrain(args):
    try:
        import torch
    except ImportError:
        raise UsageError("retrain needs PyTorch: pip install 'approxmul[torch]'") from None
    import approxmul_cffi as am
    from approxmul_cffi import nn, quant
    from approxmul_cffi.bundled import bundled_model, bundled_name, model_file
    from approxmul_cffi.torch.graph import save_weights, to_torch
    from approxmul_cffi.torch.training import retrain

    for name in ("epochs", "threads", "batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.lr <= 0:
        raise UsageError(f"--lr must be positive, got {args.lr}")
    # checked before the training: --out writes PATH.json (and PATH.npz beside it)
    stem = args.out[:-5] if args.out and args.out.endswith(".json") else args.out
    check_outputs({"--out": stem and stem + ".json", "--out (weights)": stem and stem + ".npz",
                   "--json": args.json})
    if args.threads:
        am.set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    model = (bundled_model(args.model) if bundled_name(args.model)
             else nn.Model.load(model_file(args.model)))
    train, test = _data(args)
    multipliers = load_multiplier(args.multiplier, args)[0]
    layer_specs = _layer_overrides(args.layers, args)
    overrides = {k: load_multiplier(v, args)[0] for k, v in layer_specs.items()}
    net = to_torch(model)
    names = [n for n, m in net.named_modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise UsageError(f"unknown layer name(s) {', '.join(map(repr, unknown))}; "
                         f"layers with multipliers: {', '.join(names)}")
    assignment = {n: overrides.get(n, multipliers) for n in names}
    print(f"retraining {args.model} with {args.multiplier}"
          + "".join(f", {k}={v}" for k, v in layer_specs.items())
          + f", gradient {args.gradient}, {args.epochs} epochs, {len(train[1])} training images"
          + ("" if args.bias_correction else ", no bias correction"))

    def log(epoch, acc, seconds):
        print(f"epoch {epoch:3d}: top-1 {acc:6.2f} %  ({seconds:.1f} s)", flush=True)

    result = retrain(net, assignment, train, test, epochs=args.epochs,
                     gradient=args.gradient, lr=args.lr,
                     batch_size=args.batch_size, seed=args.seed, progress=not args.no_progress,
                     scheme=quant.QuantConfig(calibration=args.calibration),
                     log=log, bias_correction=args.bias_correction,
                     on_start=lambda a: print(f"before:     top-1 {a:6.2f} %", flush=True))
    print(f"after:      top-1 {result['after']:6.2f} %  (before {result['before']:.2f} %)")
    if args.out:
        save_weights(result["model"], model)
        model.metadata.update(retrained={"multiplier": args.multiplier, "layers": args.layers,
                                         "gradient": args.gradient, "epochs": args.epochs,
                                         "bias_correction": args.bias_correction,
                                         "top1": result["after"]})
        path = model.save(args.out)
        print(f"wrote {path}" + (" (evaluate it with --bias-correction)" if args.bias_correction
                                 else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({k: result[k] for k in ("before", "epochs", "after")}, f, indent=1)
            f.write("\n")
    return 0


def run(args):
    """Run ``approxmul retrain``; returns the exit status.

    >>> from approxmul_cffi.cli import main
    >>> main(["retrain", "-m", "drum:k=4", "--epochs", "1", "--no-progress", "--threads", "1"])
    retraining digits-lenet with drum:k=4, gradient ste, 1 epochs, 1347 training images
    before:     top-1 ... %
    epoch   1: top-1 ... %  (... s)
    after:      top-1 ... %  (before ... %)
    0
    """
    try:
        return _retrain(args)
    except (UsageError, ValueError, OSError, ImportError) as e:
        print(f"approxmul retrain: error: {e}", file=sys.stderr)
        return 2
