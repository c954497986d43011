"""The ``approxmul`` command line: one subcommand per module in this package.

Each subcommand module defines ``add_parser(subparsers)`` and
``run(args) -> int``. User mistakes print one line on stderr and exit with
status 2; they never show a traceback.
"""

import argparse
import importlib
import sys

from ..errors import ApproxmulError

# subcommand modules, in the order ``approxmul --help`` lists them
SUBCOMMANDS = ("info", "evaluate", "retrain", "metrics", "show")


class UsageError(Exception):
    """A mistake in the command line or its inputs, reported without a traceback."""


def build_parser():
    parser = argparse.ArgumentParser(
        prog="approxmul",
        description="Evaluate approximate integer multipliers and their effect on networks.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"{__name__}.{name}":
                continue  # a subcommand this version does not have
            raise
        module.add_parser(subparsers).set_defaults(run=module.run)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (UsageError, ApproxmulError, OSError) as error:
        print(f"approxmul {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
