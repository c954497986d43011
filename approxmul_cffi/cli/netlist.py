"""``approxmul netlist FILE.v``: statistics of a gate-level Verilog netlist.

Prints the module, its operand and product ports, the two-input gates the
netlist evaluates to (by type), the logic depth, the instance counts and the
header metadata (``// NAME = value unit``). ``--family SPEC`` instead
prints the netlist of a built-in family (exact, truncated, bam). Other
subcommands read netlists as multipliers: ``approxmul metrics FILE.v``.
"""

import json
import re
import sys


def add_parser(subparsers):
    from . import description

    parser = subparsers.add_parser("netlist", help="statistics of a Verilog netlist, or a "
                                   "family's netlist",
                                   description=description(sys.modules[__name__]))
    parser.add_argument("path", metavar="FILE.v", nargs="?", help="the netlist")
    parser.add_argument("--module", help="the module to read when the file has several")
    parser.add_argument("--a", default="A", help="first operand port (default A)")
    parser.add_argument("--b", default="B", help="second operand port (default B)")
    parser.add_argument("--out", default="O", help="product port (default O)")
    parser.add_argument("--cell-map", metavar="FILE",
                        help="cell functions for standard-cell netlists (text or JSON)")
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    parser.add_argument("--family", metavar="SPEC",
                        help="print the netlist of this family (e.g. truncated:cut=8) instead")
    return parser


def run(args):
    """Print the statistics of the netlist ``args.path``.

    >>> from approxmul_cffi import Multiplier
    >>> from approxmul_cffi.cli import main
    >>> _ = open("m.v", "w").write(Multiplier.from_spec("exact:bits=2").to_verilog())
    >>> main(["netlist", "m.v"])
    module      exact_bits_2_signed_0
    ...
    gates       8
    ...
    0
    """
    from . import UsageError
    from .. import verilog
    from ..errors import InvalidArgumentError, UnsupportedError

    if args.family is not None:
        if args.path is not None:
            raise UsageError("give either FILE.v or --family SPEC, not both")
        ignored = [f"--{key.replace('_', '-')}" for key, default in FILE_OPTIONS.items()
                   if getattr(args, key) != default]
        if ignored:
            raise UsageError(f"{', '.join(ignored)}: options for reading FILE.v; --family "
                             "prints a netlist (save it to a file, then read that file with them)")
        print(verilog.family_verilog(args.family), end="")
        return 0
    if args.path is None:
        raise UsageError("expected FILE.v (or --family SPEC)")
    try:
        info = verilog.Netlist(args.path, module=args.module, a=args.a, b=args.b, out=args.out,
                               cell_map=args.cell_map).info()
    except InvalidArgumentError as error:  # the ports named as this command names them
        raise InvalidArgumentError(re.sub(r"name the ports with (a|b|out)=$",
                                          "name them with --a, --b and --out", str(error))) \
            from None
    except UnsupportedError as error:
        if args.cell_map is None and "standard cells need a cell map" in str(error):
            raise UnsupportedError(f"{error}; give the cells' functions with --cell-map FILE") \
                from None
        raise
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    width = max(len(key) for key in info)
    for key, value in info.items():
        print(f"{key.ljust(width)}  {value}")
    return 0


# the options that only reading FILE.v uses, with their defaults
FILE_OPTIONS = {"module": None, "a": "A", "b": "B", "out": "O", "cell_map": None, "json": False}
