"""``approxmul metrics SPEC...``: exhaustive error metrics of one or many multipliers.

Each SPEC is anything :func:`approxmul_cffi.multiplier` accepts: a family
spec (``drum:k=4``), a table file path or ``file:...`` spec, a C model
``c:LIBRARY:SYMBOL:SIGNATURE``, or a gate-level Verilog netlist (``FILE.v``,
``verilog:FILE.v?signed=1``). Output: an aligned table, or ``--json`` /
``--csv``. Definitions: docs/metrics.md.
"""

import csv
import json
import sys

# (key, column heading, format) in print order
COLUMNS = (
    ("mae", "MAE", "{:.4g}"), ("mae_percent", "MAE%", "{:.4g}"), ("wce", "WCE", "{}"),
    ("wce_percent", "WCE%", "{:.4g}"), ("wcre_percent", "WCRE%", "{:.4g}"),
    ("ep_percent", "EP%", "{:.4g}"), ("mre_percent", "MRE%", "{:.4g}"),
    ("mse", "MSE", "{:.6g}"), ("bias", "bias", "{:.4g}"), ("error_std", "std", "{:.4g}"),
)


def add_parser(subparsers):
    import argparse

    import approxmul_cffi as am

    from . import add_table_options, description

    families = "\n".join(f"  {f['name']}: {f['parameters']}" for f in am.families())
    parser = subparsers.add_parser(
        "metrics", help="error metrics of multipliers over every operand pair",
        description=description(sys.modules[__name__]),
        epilog="families and their parameters (defaults, ranges):\n" + families,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="multiplier spec, table path or netlist (.v)")
    add_table_options(parser)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print a JSON list")
    group.add_argument("--csv", action="store_true", help="print CSV")
    return parser


def _convention(report):
    """JSON-ready convention facts of a table file."""
    from approxmul_cffi import conventions

    path, assessed, declared = report
    best = conventions.best(assessed)
    return {"read_as": conventions.describe(*declared),
            "closest_to_exact": conventions.describe(*best[:2]) if best else None,
            "mae_percent_by_convention": {conventions.describe(s, o): p for s, o, p in assessed}}


def run(args):
    """Print the metrics table of each spec.

    >>> from approxmul_cffi.cli import main
    >>> main(["metrics", "--csv", "drum:k=4"])
    spec,bits,signed,mae,mae_percent,mse,wce,...
    "drum:bits=8,signed=0,k=4",8,False,925.858276...,7425,...
    0
    """
    from . import load_multiplier

    rows, notes = [], []
    for spec in args.specs:
        m, report = load_multiplier(spec, args)
        rows.append({"spec": m.spec or spec, "bits": m.bits, "signed": m.signed, **m.metrics()})
        if report is not None:
            rows[-1]["convention"] = _convention(report)
            facts = rows[-1]["convention"]
            notes.append(f"{report[0]}: read as {facts['read_as']}; closest to the exact "
                         f"product as {facts['closest_to_exact']}")
    if args.json:
        print(json.dumps(rows, indent=2))
    elif args.csv:
        fields = list(dict.fromkeys(key for row in rows for key in row))
        writer = csv.DictWriter(sys.stdout, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: json.dumps(v) if isinstance(v, dict) else v for k, v in row.items()}
                         for row in rows)
    else:
        header = ["spec"] + [title for _, title, _ in COLUMNS]
        cells = [[row["spec"]] + [fmt.format(row[key]) for key, _, fmt in COLUMNS] for row in rows]
        widths = [max(len(line[i]) for line in [header] + cells) for i in range(len(header))]
        for line in [header] + cells:
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(line, widths))).rstrip())
        for note in notes:
            print(note)
    return 0
