"""The ``approxmul`` command line: one subcommand per module in this package.

Each subcommand module defines ``add_parser(subparsers)`` and
``run(args) -> int``. User mistakes print one line on stderr and exit with
status 2; they never show a traceback. Building the parser and ``info`` /
``metrics`` need only cffi: NumPy and the other extras are imported by the
subcommands that use them, and their absence is reported as the extra to
install.
"""

import argparse
import importlib
import re
import sys

from ..errors import ApproxmulError

# subcommand modules, in the order ``approxmul --help`` lists them
SUBCOMMANDS = ("info", "evaluate", "metrics", "show", "layers")

# optional package -> the extra that installs it (pyproject.toml)
EXTRAS = {"numpy": "numpy", "matplotlib": "plot", "sklearn": "evaluate", "tqdm": "evaluate"}


class UsageError(Exception):
    """A mistake in the command line or its inputs, reported without a traceback."""


def plain_text(doc):
    """A docstring's reStructuredText markup reduced to what a terminal shows.

    >>> plain_text("See :func:`approxmul_cffi.multiplier` and ``drum:k=4``.")
    'See approxmul_cffi.multiplier and drum:k=4.'
    """
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)  # :func:`x` -> x
    return re.sub(r"``([^`]+)``", r"\1", text)


def description(module):
    """A subcommand module's docstring after its first paragraph, as plain text."""
    return plain_text(module.__doc__.split("\n\n", 1)[1])


def missing_extra(error):
    """The one-line advice for an ImportError of an optional package, or None.

    >>> missing_extra(ModuleNotFoundError("No module named 'numpy'", name="numpy"))
    "needs NumPy, which is not installed: pip install 'approxmul[numpy]'"
    """
    top = (getattr(error, "name", None) or "").split(".")[0]
    if top not in EXTRAS:
        return None
    shown = {"numpy": "NumPy", "sklearn": "scikit-learn"}.get(top, top)
    return f"needs {shown}, which is not installed: pip install 'approxmul[{EXTRAS[top]}]'"


def build_parser():
    parser = argparse.ArgumentParser(
        prog="approxmul",
        description="Evaluate approximate integer multipliers and their effect on networks.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
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
    except ImportError as error:
        advice = missing_extra(error)
        if advice is None:
            raise
        print(f"approxmul {args.command}: error: {advice}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
