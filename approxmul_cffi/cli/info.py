"""``approxmul info``: the library in use, its version and the chosen kernels."""

import json


def add_parser(subparsers):
    parser = subparsers.add_parser("info", help="show the library, version and kernels in use")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def run(args):
    """Print the build facts, one per line.

    >>> from approxmul_cffi.cli import main
    >>> main(["info"])
    version ...
    threads ...
    0
    """
    import approxmul_cffi

    facts = approxmul_cffi.info()
    if args.json:
        print(json.dumps(facts, indent=2))
    else:
        width = max(map(len, facts))
        for key, value in facts.items():
            print(f"{key:<{width}}  {value}")
    return 0
