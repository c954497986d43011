"""``approxmul sweep``: design-space sweeps on a Dask cluster (docs/sweep.md).

Rerunning the same command resumes: only tasks not yet in ``--store`` run.
User mistakes end with a one-line error on stderr and exit status 2; a sweep
whose every task failed ends with exit status 1 (its table and --csv/--parquet
still show the errors).
"""

import os
import sys

from . import UsageError, check_outputs

HELP = "sweep multipliers over a network's layers on a Dask cluster, resumably"


def add_parser(subparsers):
    p = subparsers.add_parser("sweep", help=HELP, description=HELP + ".")
    g = p.add_argument_group("multipliers")
    g.add_argument("--multiplier", "-m", metavar="SPEC", action="append", dest="multipliers",
                   default=[], help="a multiplier spec (repeatable)")
    g.add_argument("--tables", metavar="GLOB[?OPTIONS]", action="append", default=[],
                   help="table files matching a glob pattern, options as in file: specs, "
                        "e.g. 'tables/*.bin?signed=1' (repeatable); named by file stem")
    g.add_argument("--vendor", metavar="LIB:PATTERN[:SIG]", action="append", default=[],
                   help="every exported function of a shared library matching PATTERN "
                        "(repeatable); named by symbol")
    g.add_argument("--signature", default="u8",
                   help="signature of --vendor functions: a short name (u8, s8, u64ba, u64, "
                        "u16, s16) or a C prototype (default: u8)")
    g = p.add_argument_group("model and data")
    g.add_argument("--model", metavar="NAME|PATH",
                   help="a bundled model (digits-lenet, mnist-lenet5) or a model JSON written "
                        "by nn.Model.save (default: digits-lenet)")
    g.add_argument("--data", metavar="FILE.npz",
                   help="arrays x, y and optional calibration (default: the bundled model's "
                        "held-out split, calibrated on its training split)")
    g.add_argument("--calibration", choices=("minmax", "percentile"), default="minmax",
                   help="activation range calibration (default: minmax)")
    g.add_argument("--bits", metavar="N", type=int, default=8,
                   help="width of the activation and weight codes, 2..16; every multiplier "
                        "must have it (default: 8)")
    g.add_argument("--limit", metavar="N", type=int, help="evaluate the first N samples only")
    g = p.add_argument_group("strategy and cost")
    g.add_argument("--strategy", choices=("uniform", "sensitivity", "search", "exhaustive"),
                   default="uniform", help="default: uniform")
    g.add_argument("--costs", metavar="FILE.csv",
                   help="cost per multiplier: a 'multiplier' (or 'name') column and "
                        "numeric columns")
    g.add_argument("--cost-sources", metavar="GLOB", action="append", default=[],
                   help="C sources with '// NAME = value unit' cost headers (repeatable)")
    g.add_argument("--cost", metavar="COLUMN", help="the cost the search minimizes "
                   "(default: the first column)")
    g.add_argument("--budget", metavar="POINTS", type=float, default=1.0,
                   help="search: largest top-1 drop in points (default: 1)")
    g.add_argument("--search-layers", metavar="A,B,..",
                   help="search/exhaustive/sensitivity: these layers only (the others exact)")
    g.add_argument("--beam-width", metavar="N", type=int, default=64,
                   help="search: partial assignments the beam keeps per layer (default: 64)")
    g = p.add_argument_group("cluster and store")
    g.add_argument("--store", metavar="FILE", required=True, help="SQLite results file")
    g.add_argument("--resume", action="store_true",
                   help="run only tasks not yet in the store (what every run does; for clarity)")
    g.add_argument("--retry-failed", action="store_true", help="run failed tasks again")
    g.add_argument("--force", action="store_true",
                   help="use a store written for another model, data set or version")
    g.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="an existing Dask scheduler (default: a local cluster)")
    g.add_argument("--workers", metavar="N", type=int,
                   help="local cluster: worker processes (default: one per core)")
    g.add_argument("--threads", metavar="N", type=int, default=1,
                   help="approxmul threads per task (default: 1)")
    g.add_argument("--connect-timeout", metavar="S", type=float, default=10.0,
                   help="seconds to reach --scheduler before giving up (default: 10)")
    g = p.add_argument_group("outputs")
    g.add_argument("--csv", metavar="FILE", help="every result row, one per task")
    g.add_argument("--parquet", metavar="FILE", help="(needs pyarrow)")
    g.add_argument("--plot", metavar="FILE.png", help="accuracy against cost (needs matplotlib)")
    g.add_argument("--layer-map", metavar="FILE.json",
                   help="search: the best assignment, for approxmul evaluate --layers")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _check(args):
    for name in ("limit", "threads", "workers", "beam_width"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.budget < 0:
        raise UsageError(f"--budget must be >= 0, got {args.budget}")
    if not 2 <= args.bits <= 16:
        raise UsageError(f"--bits must be 2..16, got {args.bits}")
    if not (args.multipliers or args.tables or args.vendor):
        raise UsageError("give multipliers: --multiplier SPEC, --tables GLOB or "
                         "--vendor LIB:PATTERN")
    if args.plot and not (args.costs or args.cost_sources):
        raise UsageError("--plot puts accuracy against cost: give --costs or --cost-sources")
    if args.layer_map and args.strategy != "search":
        raise UsageError("--layer-map writes the search's best assignment: use --strategy search")
    check_outputs({"--csv": args.csv, "--parquet": args.parquet, "--plot": args.plot,
                   "--layer-map": args.layer_map})
    outputs = ((args.plot, "matplotlib", "plot"), (args.parquet, "pyarrow", "sweep"))
    for flag, module, extra in outputs:  # fail before the sweep, not after it
        if flag:
            try:
                __import__(module)
            except ImportError:
                raise UsageError(f"this output needs {module}: "
                                 f"pip install 'approxmul[{extra}]'") from None


def _sweep(args):
    from approxmul_cffi import quant
    from approxmul_cffi.sweep import read_cost_csv, read_source_costs, sweep

    from .evaluate import _load_data

    _check(args)
    costs = None
    if args.costs or args.cost_sources:
        costs = {}
        if args.cost_sources:
            costs.update(read_source_costs(args.cost_sources))
        if args.costs:
            costs.update(read_cost_csv(args.costs))
    data = calibration = None
    if args.data:
        data, calibration = _load_data(args.data)
    result = sweep(
        args.multipliers, tables=args.tables, vendors=args.vendor, signature=args.signature,
        model=args.model, data=data, calibration=calibration,
        config=quant.QuantConfig(calibration=args.calibration, bits=args.bits), limit=args.limit,
        strategy=args.strategy, costs=costs, cost_column=args.cost, budget=args.budget,
        search_layers=args.search_layers.split(",") if args.search_layers else None,
        beam_width=args.beam_width, store=args.store, force=args.force,
        retry_failed=args.retry_failed, scheduler=args.scheduler, workers=args.workers,
        threads=args.threads, timeout=args.connect_timeout, progress=not args.no_progress,
        log=lambda text: print(text, file=sys.stderr, flush=True))
    print(result.format_table())
    if args.layer_map and result.best is None:  # before any output is written
        raise UsageError(f"no assignment measured within {args.budget} points: "
                         "no layer map written")
    failed = result.failed
    if failed:
        print(f"{len(failed)} task(s) failed; their errors are in the store "
              "(--retry-failed runs them again)", file=sys.stderr)
    if args.csv:
        result.to_csv(args.csv)
    if args.parquet:
        result.to_parquet(args.parquet)
    if failed and len(failed) == len(result.rows):  # nothing to plot or to pick
        print(f"approxmul sweep: error: every task failed ({len(failed)}); the first: "
              f"{failed[0]['error']}", file=sys.stderr)
        return 1
    if args.plot:
        result.plot(args.plot)
    if args.layer_map:
        result.write_layer_map(args.layer_map)
        print(f"layer map: {os.path.abspath(args.layer_map)}")
    return 0


def run(args):
    """Run ``approxmul sweep``; returns the exit status (2 for a user mistake, said in one line;
    1 when every task failed).

    >>> from approxmul_cffi.cli import main
    >>> main(["sweep", "-m", "exact", "--costs", "missing.csv", "--store", "s.db"])
    2
    """
    from approxmul_cffi.errors import ApproxmulError

    try:
        return _sweep(args)
    except (UsageError, ApproxmulError, ValueError, OSError, ImportError) as e:
        print(f"approxmul sweep: error: {e}", file=sys.stderr)
        return 2
