# Shared by the CI job scripts: headers, timing, packages, a plain build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

header() { printf '\n==================== %s ====================\n' "$*"; }

# Debian packages, installed only when missing (fresh CI machines).
need() {  # need PACKAGE...
    local missing=()
    for package in "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ -z "${APT_UPDATED:-}" ]; then apt-get update -qq; export APT_UPDATED=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# meson and ninja for the job builds (pip's isolated build env does not leave them).
need_meson() {
    command -v meson >/dev/null && command -v ninja >/dev/null ||
        python3 -m pip install -q meson ninja
}

# The plain (release, gcc) build that the PyPy and valgrind jobs use.
plain_build() {
    need_meson
    [ -f build-ci/build.ninja ] || meson setup build-ci -Dbuildtype=debugoptimized >/dev/null
    ninja -C build-ci >/dev/null
    export APPROXMUL_LIBRARY="$ROOT/build-ci/capi/libapproxmul.so"
}
