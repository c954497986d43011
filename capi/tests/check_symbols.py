"""Check that a built approxmul library exports exactly the header's functions.

    python check_symbols.py LIBRARY HEADER
"""

import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from gen_cdef import declarations, function_names  # noqa: E402


def exported_symbols(library):
    output = subprocess.run(
        ["nm", "-D", "--defined-only", library], check=True, capture_output=True, text=True
    ).stdout
    # "address type name"; text (T) and data (D/B) symbols are what a caller can bind
    symbols = set()
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRW":
            symbols.add(parts[2])
    return symbols


def main(library, header):
    declared = set(function_names(declarations(pathlib.Path(header).read_text())))
    exported = exported_symbols(library)
    missing = sorted(declared - exported)
    extra = sorted(s for s in exported - declared if not re.match(r"^_(init|fini)$", s))
    for name in missing:
        print(f"declared but not exported: {name}")
    for name in extra:
        print(f"exported but not declared: {name}")
    print(f"{len(declared)} declared, {len(exported)} exported")
    return 1 if missing or extra else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
