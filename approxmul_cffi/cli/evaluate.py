"""``approxmul evaluate``: accuracy of a network under approximate multipliers.

With no arguments it evaluates the bundled digits LeNet on its held-out
split with the exact multiplier and built-in approximate ones of increasing
error. User mistakes end with a one-line error on stderr and exit status 2.
"""

import os
import sys

from ..errors import ApproxmulError
from . import UsageError, add_table_options, check_outputs, load_multiplier, missing_extra

HELP = "evaluate a quantized network with approximate multipliers"


def add_parser(subparsers):
    p = subparsers.add_parser("evaluate", help=HELP, description=HELP + ".")
    p.add_argument("--multiplier", "-m", metavar="SPEC", action="append", dest="multipliers",
                   help="multiplier for every layer, one result row each (repeatable); "
                        "default: exact plus built-in approximate multipliers")
    p.add_argument("--layer", metavar="NAME=SPEC", action="append", dest="layers", default=[],
                   help="fixed multiplier for one layer in every row (repeatable)")
    p.add_argument("--layers", metavar="FILE", dest="layer_map",
                   help="a layer map (JSON layer -> spec, as approxmul sweep writes); "
                        "--layer entries override it")
    p.add_argument("--model", metavar="NAME|PATH", help="a bundled model (digits-lenet, "
                   "mnist-lenet5), a model JSON written by nn.Model.save, or an .onnx file "
                   "(default: the bundled digits LeNet)")
    p.add_argument("--data", metavar="FILE.npz",
                   help="evaluation data: arrays x (float images) and y (integer labels), "
                        "optionally calibration (float images); or 'digits': the bundled "
                        "digits held-out split (default: the bundled model's own data set)")
    p.add_argument("--bits", metavar="N", type=int,
                   help="width of the activation and weight codes, 2..16; every multiplier "
                        "must have it (default: the multipliers' width, e.g. 4 for "
                        "drum:bits=4,k=2; else 8); without -m, built-in multipliers of that width")
    p.add_argument("--calibration", choices=("minmax", "percentile"), default="minmax",
                   help="activation range calibration (default: minmax)")
    p.add_argument("--bias-correction", action="store_true",
                   help="cancel each layer's mean multiplier error, per output channel, "
                        "measured on the calibration images (default: off)")
    p.add_argument("--limit", metavar="N", type=int, help="evaluate the first N samples only")
    p.add_argument("--threads", metavar="N", type=int, help="library threads")
    p.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    p.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    p.add_argument("--plot", metavar="FILE.png",
                   help="plot accuracy against MAE%% with the Pareto front (needs matplotlib)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_table_options(p)
    return p


def _layer_overrides(items, args):
    out = {}
    for item in items:
        name, eq, spec = item.partition("=")
        if not eq or not name or not spec:
            raise UsageError(f"--layer expects NAME=SPEC, got {item!r}")
        out[name] = spec
    # checked here, passed on as text so that the layers column shows them as typed;
    # a bare table path read with --signed/--order travels as its file: spec
    for name, spec in out.items():
        m, _ = load_multiplier(spec, args)
        if (args.signed or args.order) and not spec.startswith("file:") and \
                (m.spec or "").startswith("file:"):
            out[name] = m.spec
    return out


def _multipliers(specs, args):
    """{label as typed: Multiplier}, table files read with --signed/--order and checked."""
    if specs is None:
        return None
    return {spec: load_multiplier(spec, args)[0] for spec in specs}


def data_arrays(path, needed):
    """The arrays of an .npz data file, which must hold the ``needed`` names."""
    import numpy as np

    try:
        loaded = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"data file not found: {path}") from None
    except Exception as e:  # numpy raises several types for bad files
        raise UsageError(f"cannot read data file {path}: {e}") from None
    if isinstance(loaded, np.ndarray):  # a .npy: one array, no names
        raise UsageError(f"data file {path} holds a single array; data files are .npz archives "
                         f"of named arrays ({', '.join(needed)}: np.savez)")
    try:
        with loaded as f:
            arrays = {k: f[k] for k in f.files}
    except Exception as e:
        raise UsageError(f"cannot read data file {path}: {e}") from None
    missing = set(needed) - set(arrays)
    if missing:
        raise UsageError(f"data file {path} lacks array(s) {', '.join(sorted(missing))}")
    return arrays


def _load_data(path):
    arrays = data_arrays(path, ("x", "y"))
    return (arrays["x"], arrays["y"]), arrays.get("calibration", arrays["x"])


def _evaluate(args):
    import numpy  # noqa: F401 (the first thing evaluate needs: said before anything runs)

    from approxmul_cffi import quant
    from approxmul_cffi.bundled import BUNDLED_MODEL, BUNDLED_MODELS, bundled_name, model_file
    from approxmul_cffi.evaluation import evaluate, plot_accuracy

    from approxmul_cffi._library import lib

    for name, most in (("limit", None), ("threads", lib.APPROXMUL_MAX_THREADS)):
        value = getattr(args, name)
        if value is not None and (value < 1 or most is not None and value > most):
            raise UsageError(f"--{name} must be {'1..' + str(most) if most else 'at least 1'}, "
                             f"got {value}")
    if args.bits is not None and not 2 <= args.bits <= 16:
        raise UsageError(f"--bits must be 2..16, got {args.bits}")
    check_outputs({"--json": args.json, "--csv": args.csv, "--plot": args.plot})
    if args.plot:  # fail before the run, not after it
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install 'approxmul[plot]'") from None
    if args.data and not (args.data == "digits" and not os.path.exists(args.data)):
        data, calibration = _load_data(args.data)
        source = f"{os.path.basename(args.data)}, calibrated on its {len(calibration)} samples"
        data_source = os.path.abspath(args.data)
    else:
        from approxmul_cffi.datasets import load
        # --data digits asks for the digits split by name; by default, the model's own
        dataset = "digits" if args.data else \
            BUNDLED_MODELS.get(bundled_name(args.model), (None, "digits"))[1]
        data, calibration = load(dataset, "test"), load(dataset, "train")[0]
        source = f"{dataset} held-out split, calibrated on {len(calibration)} training images"
        data_source = f"{dataset}, approxmul_cffi.datasets held-out split"
    model_path = model_file(args.model) if args.model else BUNDLED_MODEL
    layers = {}
    if args.layer_map:
        from approxmul_cffi.sweep.results import load_layer_map
        layers = load_layer_map(args.layer_map)
    layers.update(_layer_overrides(args.layers, args))
    result = evaluate(model_path, data, _multipliers(args.multipliers, args), layers=layers,
                      limit=args.limit, threads=args.threads, progress=not args.no_progress,
                      calibration=calibration, config=quant.QuantConfig(calibration=args.calibration),
                      data_source=data_source, bias_correction=args.bias_correction,
                      bits=args.bits)
    n = len(data[1]) if args.limit is None else min(args.limit, len(data[1]))
    print(f"model {os.path.basename(model_path)}: {n} samples of the {source}")
    print(result.format_table())
    if args.json:
        result.to_json(args.json)
    if args.csv:
        result.to_csv(args.csv)
    if args.plot:
        plot_accuracy(result, args.plot)
    return 0


def run(args):
    """Evaluate and print the accuracy table.

    >>> from approxmul_cffi.cli import main
    >>> main(["evaluate", "-m", "exact", "--limit", "50", "--no-progress"])
    model digits_lenet.json: 50 samples of the digits held-out split, calibrated on ...
    multiplier    MAE%    WCE%  top-1%  vs exact  images/s
    ----------  ------  ------  ------  --------  --------
    float            -       -   98.00         -     ...
    exact       0.0000  0.0000   98.00     +0.00     ...
    0
    """
    """Run ``approxmul evaluate``; returns the exit status."""
    try:
        return _evaluate(args)
    except ImportError as e:
        print(f"approxmul evaluate: error: {missing_extra(e) or e}", file=sys.stderr)
        return 2
    except (UsageError, ApproxmulError, ValueError, OSError) as e:
        # User mistakes (bad spec, layer, file, data): one line, no traceback.
        print(f"approxmul evaluate: error: {e}", file=sys.stderr)
        return 2

