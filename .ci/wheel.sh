#!/usr/bin/env bash
# Binary wheel job (docs/packaging.md): build the sdist and the py3-none
# manylinux wheel with scripts/build_wheels.sh, check the wheel's contents,
# then install it with no compiler on PATH (--only-binary=:all:) into fresh
# virtual environments of CPython and of Debian's PyPy, and run the portable
# tests there against the installed copy; CPython also runs
# `approxmul evaluate --limit 100` and shares a process with PyTorch.
source "$(dirname "$0")/common.sh"
need binutils pypy3 pypy3-venv

step_times=()
step() {  # step NAME COMMAND...: runs it and records its wall time
    local name=$1 start=$SECONDS
    shift
    "$@"
    step_times+=("$(printf '%-44s %4d s' "$name" $((SECONDS - start)))")
}

header "wheel: sdist and wheel (scripts/build_wheels.sh)"
DIST="$ROOT/build-ci-wheel"  # ignored by git, like the other build folders
step "build: sdist, wheel, retag, repair" bash scripts/build_wheels.sh "$DIST"
WHEEL="$(ls "$DIST"/approxmul-*.whl)"

header "wheel: contents"
APPROXMUL_WHEEL="$WHEEL" step "contents test" \
    python3 -m pytest -q -p no:cacheprovider tests/test_wheel_contents.py

# A PATH with every tool of the machine except C/C++ compilers, so that any
# attempt to build something from source fails loudly.
NOCC=/tmp/approxmul-nocc-bin
rm -rf "$NOCC" && mkdir "$NOCC"
IFS=: read -r -a path_dirs <<<"$PATH"
for dir in "${path_dirs[@]}"; do
    [ -d "$dir" ] || continue
    for tool in "$dir"/*; do
        name=${tool##*/}
        [[ $name =~ (^|-)(cc|c\+\+|cpp|gcc|g\+\+|clang|clang\+\+|tcc)(-[0-9.]+)?$ ]] && continue
        [ -x "$tool" ] && [ ! -e "$NOCC/$name" ] && ln -s "$tool" "$NOCC/$name"
    done
done

# Runs a command in a venv with no compiler reachable and nothing from this
# checkout or CI's other jobs on the import path.
in_venv() {  # in_venv VENV COMMAND...
    local venv=$1
    shift
    (cd "$RUNDIR" && env -u APPROXMUL_LIBRARY -u PYTHONPATH -u VIRTUAL_ENV \
        PATH="$venv/bin:$NOCC" "$@")
}

install_wheel() {  # install_wheel INTERPRETER VENV EXTRAS: a fresh venv, binaries only
    local interpreter=$1 venv=$2 extras=$3
    rm -rf "$venv"
    "$interpreter" -m venv "$venv"
    if in_venv "$venv" bash -c 'command -v cc gcc c++ g++ clang'; then
        echo "error: a compiler is still on PATH (above)" >&2
        exit 1
    fi
    step "install into $(basename "$venv")" \
        in_venv "$venv" python -m pip install -q --only-binary=:all: "$WHEEL$extras" pytest
    # the installed package and library, with its vendored OpenMP runtime
    in_venv "$venv" approxmul info
    in_venv "$venv" python - "$venv" <<'EOF'
import os, sys
import approxmul_cffi as am
venv = os.path.realpath(sys.argv[1])
package = os.path.dirname(os.path.realpath(am.__file__))
assert package.startswith(venv + os.sep), package
assert os.path.realpath(am.library_path()) == os.path.join(package, "libapproxmul.so")
runtime = os.path.realpath(am.info()["openmp_runtime"])
assert runtime.startswith(os.path.join(os.path.dirname(package), "approxmul.libs") + os.sep), runtime
print("installed:", package, "| OpenMP runtime:", runtime)
EOF
}

RUNDIR="$(mktemp -d /tmp/approxmul-wheel-run.XXXXXX)"  # an empty cwd: no stray package shadows the venv

header "wheel: CPython, fresh venv, no compiler"
CPY=/tmp/approxmul-wheel-cpython
install_wheel python3 "$CPY" "[evaluate]"
step "CPython: tests/portable" in_venv "$CPY" python -m pytest -q -p no:cacheprovider "$ROOT/tests/portable"
step "CPython: approxmul evaluate --limit 100" in_venv "$CPY" approxmul evaluate --limit 100 --no-progress

header "wheel: CPython with PyTorch in the same process"
# the CPU build from this machine kind's disk, never a CUDA one
step "CPython: install PyTorch" in_venv "$CPY" python -m pip install -q --only-binary=:all: "torch==2.13.0+cpu"
step "CPython: tests/test_torch_openmp.py" \
    in_venv "$CPY" python -m pytest -q -p no:cacheprovider "$ROOT/tests/test_torch_openmp.py"

header "wheel: PyPy, fresh venv, no compiler, no NumPy"
PYPY=/tmp/approxmul-wheel-pypy
install_wheel pypy3 "$PYPY" ""
APPROXMUL_EXPECT_NO_NUMPY=1 step "PyPy: tests/portable" \
    in_venv "$PYPY" python -m pytest -q -p no:cacheprovider "$ROOT/tests/portable"

header "wheel: times"
printf '%s\n' "${step_times[@]}"
