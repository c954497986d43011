"""``approxmul metrics SPEC...``: exhaustive error metrics of one or many multipliers.

Each SPEC is anything :func:`approxmul_cffi.multiplier` accepts: a family
spec (``drum:k=4``), a table file path or ``file:...`` spec, or a C model
``c:LIBRARY:SYMBOL:SIGNATURE``. Output: an aligned table, or ``--json`` /
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

    families = "\n".join(f"  {f['name']}: {f['parameters']}" for f in am.families())
    parser = subparsers.add_parser(
        "metrics", help="error metrics of multipliers over every operand pair",
        description=__doc__.split("\n\n", 1)[1],
        epilog="families and their parameters (defaults, ranges):\n" + families,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("specs", nargs="+", metavar="SPEC", help="multiplier spec or table path")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print a JSON list")
    group.add_argument("--csv", action="store_true", help="print CSV")
    return parser


def run(args):
    """Print the metrics table of each spec.

    >>> from approxmul_cffi.cli import main
    >>> main(["metrics", "--csv", "drum:k=4"])
    spec,bits,signed,mae,mae_percent,mse,wce,...
    "drum:bits=8,signed=0,k=4",8,False,925.858276...,7425,...
    0
    """
    import approxmul_cffi as am

    rows = []
    for spec in args.specs:
        m = am.multiplier(spec)
        rows.append({"spec": m.spec or spec, "bits": m.bits, "signed": m.signed, **m.metrics()})
    if args.json:
        print(json.dumps(rows, indent=2))
    elif args.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    else:
        header = ["spec"] + [title for _, title, _ in COLUMNS]
        cells = [[row["spec"]] + [fmt.format(row[key]) for key, _, fmt in COLUMNS] for row in rows]
        widths = [max(len(line[i]) for line in [header] + cells) for i in range(len(header))]
        for line in [header] + cells:
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(line, widths))).rstrip())
    return 0
