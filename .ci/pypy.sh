#!/usr/bin/env bash
# PyPy job: the portable tests (tests/portable) under Debian's PyPy, first
# without NumPy (array.array / memoryview / bytearray buffers), then again
# with NumPy, adding the NumPy-based core tests that need no hypothesis, if
# a binary NumPy wheel installs for this PyPy. (The hypothesis property
# suite runs under CPython: through PyPy's cpyext, NumPy is too slow for it.)
source "$(dirname "$0")/common.sh"
header "PyPy: build the library"
need pypy3 pypy3-venv
pypy3 --version
plain_build

# A venv keeps pytest/NumPy for PyPy out of the system; cffi ships with PyPy.
VENV=/tmp/approxmul-pypy-venv
rm -rf "$VENV"
pypy3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q pytest

header "PyPy without NumPy: tests/portable"
APPROXMUL_EXPECT_NO_NUMPY=1 PYTHONPATH="$ROOT" \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/portable

header "PyPy with NumPy: tests/portable + NumPy core tests"
# Only a prebuilt wheel: compiling NumPy for PyPy would take longer than the
# rest of CI, so without one this part is skipped with the reason printed.
if timeout 300 "$VENV/bin/python" -m pip install -q --only-binary=:all: numpy; then
    "$VENV/bin/python" -c "import numpy; print('numpy', numpy.__version__)"
    PYTHONPATH="$ROOT" "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/portable \
        tests/test_buffers.py tests/test_bad_input.py tests/test_overflow.py tests/test_process.py
else
    echo "SKIPPED: no NumPy binary wheel for $(pypy3 --version 2>&1 | tail -1) within 300 s"
fi
