"""The ``approxmul`` command line: one subcommand per module in this package.

Each subcommand module defines ``add_parser(subparsers)`` and
``run(args) -> int``. User mistakes print one line on stderr and exit with
status 2; they never show a traceback. Building the parser and ``info`` /
``metrics`` need only cffi: NumPy and the other extras are imported by the
subcommands that use them, and their absence is reported as the extra to
install.

>>> main(["metrics", "exact"])
spec    MAE  MAE%  WCE  WCE%  WCRE%  EP%  MRE%  MSE  bias  std
exact:bits=8,signed=0    0     0    0     0      0    0     0    0     0    0
0
"""

import argparse
import importlib
import io
import os
import re
import sys

from ..errors import ApproxmulError

# subcommand modules, in the order ``approxmul --help`` lists them
SUBCOMMANDS = ("info", "evaluate", "retrain", "metrics", "show", "layers", "sweep", "netlist")

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


def check_outputs(outputs):
    """Refuses, before any work, output files that could not be written or that
    would overwrite each other: ``outputs`` maps each option to its path (or None).

    >>> check_outputs({"--out": "run.json", "--json": "run.json"})
    Traceback (most recent call last):
    ...
    approxmul_cffi.cli.UsageError: --out and --json both write run.json
    """
    seen = {}
    for option, path in outputs.items():
        if not path:
            continue
        real = os.path.realpath(path)
        if real in seen:
            raise UsageError(f"{seen[real]} and {option} both write {path}")
        seen[real] = option
        folder = os.path.dirname(real)
        if not os.path.isdir(folder):
            raise UsageError(f"{option} {path}: folder {os.path.dirname(path) or folder} "
                             "does not exist")
        if os.path.isdir(real):
            raise UsageError(f"{option} {path} is a folder; give a file name")


def add_table_options(parser):
    """--signed and --order: how table files named on the command line are read."""
    parser.add_argument("--signed", action="store_true",
                        help="table files and netlists hold signed (two's-complement) operands")
    parser.add_argument("--order", choices=("raw", "twos", "offset"),
                        help="row order of signed table files (default raw; see "
                             "docs/multipliers.md)")


def _flags(signed, order):
    if not signed:
        return "no --signed"
    return "--signed" if order in ("raw", "twos") else f"--signed --order {order}"


def load_multiplier(spec, args):
    """A Multiplier for a command-line spec; table files (and netlists) read as --signed/--order say.

    A table that lies far from the exact product as read, while another
    convention fits it much better, is refused naming the flags that fit,
    unless the flags stated the parts that differ (then it is a warning on
    stderr). Netlists (``FILE.v``, ``verilog:`` specs without ``signed=``)
    are read signed with --signed; one whose header or products say it is
    signed, read unsigned without a word about it, is refused the same way.
    Returns (multiplier, convention report or None) - the report, for table
    files: (path, [(signed, order, MAE %)], declared (signed, order)).
    """
    import os
    import warnings

    import approxmul_cffi as am
    from approxmul_cffi import conventions
    from approxmul_cffi.formats import EXTENSIONS
    from approxmul_cffi.verilog import NetlistSignednessWarning

    signed, order = getattr(args, "signed", False), getattr(args, "order", None)
    extension = os.path.splitext(spec)[1].lower()
    bare = not spec.startswith(("file:", "c:", "verilog:")) and extension in EXTENSIONS
    if bare and (signed or order):
        spec = f"file:{os.path.abspath(spec)}?signed={int(signed)}&order={order or 'raw'}"
    netlist = spec.startswith("verilog:") or (not spec.startswith(("file:", "c:"))
                                              and extension == ".v")
    if netlist:  # --signed reads it signed, unless a verilog: spec says signed= itself
        if not spec.startswith("verilog:"):
            spec = f"verilog:{os.path.abspath(spec)}"
        path, _, query = spec.partition("?")
        said = re.search(r"(?:^|&)signed=", query) is not None
        if signed and not said:
            spec = f"{path}?{query}&signed=1" if query else f"{path}?signed=1"
        stated_signed = signed or said
    else:
        query = spec.partition("?")[2] if spec.startswith("file:") else ""
        stated_signed = bool(signed or order) if bare else "signed=" in query
        stated_order = order is not None if bare else "order=" in query
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", conventions.TableConventionWarning)  # judged below
        warnings.simplefilter("always", NetlistSignednessWarning)  # judged below
        try:
            m = am.multiplier(spec)
        except am.InvalidArgumentError as error:  # ports: named as a command line names them
            if not netlist:
                raise
            raise am.InvalidArgumentError(re.sub(
                r"name the ports with (a|b|out)=$",
                f"name them in a spec: {spec.partition('?')[0]}?a=..&b=..&out=..",
                str(error))) from None
    for warning in caught:
        if not issubclass(warning.category, NetlistSignednessWarning):
            warnings.showwarning(warning.message, warning.category, warning.filename,
                                 warning.lineno)
            continue
        doubt = warning.message
        text = f"{doubt.where}: read {'signed' if doubt.signed else 'unsigned'}, but {doubt.reason}"
        if not stated_signed:  # read unsigned by default
            raise UsageError(f"{text}: pass --signed (or give verilog:{doubt.where}?signed=0 "
                             "to read it unsigned anyway)")
        print(f"approxmul: warning: {text}", file=sys.stderr)
    if not (m.spec or "").startswith("file:"):
        return m, None
    path, _, query = m.spec[5:].partition("?")
    options = dict(item.split("=", 1) for item in query.split("&"))
    declared = (options["signed"] == "1", options["order"])
    assessed, _ = conventions.check_file(path, *declared, format=options["format"])
    found = conventions.mismatch(assessed, *declared)
    if found is not None:
        percent, (best_signed, best_order, best_percent) = found
        text = (f"{path}: read with {_flags(*declared)}, the table is {percent:.3g} % (MAE) "
                f"away from the exact product; with {_flags(best_signed, best_order)} it is "
                f"{best_percent:.3g} %")
        # refused unless the user stated each part of the convention that differs
        stated = ((best_signed == declared[0] or stated_signed)
                  and (conventions.same((best_signed, best_order), (best_signed, declared[1]))
                       or stated_order))
        if not stated:
            raise UsageError(text + ": pass those flags (or state --signed/--order to read it "
                             "as you say anyway)")
        print(f"approxmul: warning: {text}", file=sys.stderr)
    return m, (path, assessed, declared)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="approxmul",
        description="Evaluate approximate integer multipliers and their effect on networks.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"approxmul {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
        module.add_parser(subparsers).set_defaults(run=module.run)
    return parser


def _stdout_reader_gone():
    """Whether stdout is a pipe whose reader has closed it (poll reports an error on it)."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):  # no fd, no poll
        return False


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError as error:
        if _stdout_reader_gone():  # approxmul info | head: not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing at exit
            return 0
        print(f"approxmul {args.command}: error: {error}", file=sys.stderr)
        return 2
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
