#!/usr/bin/env bash
# Sanitizer job: the library and C tests built with ASan + UBSan (gcc);
# meson test runs every suite: C tests with leak detection, the Python
# suite with the runtimes preloaded (tests/meson.build). Any report aborts.
source "$(dirname "$0")/common.sh"
header "ASan + UBSan: build"
need_meson
[ -f build-sanitize/build.ninja ] ||
    meson setup build-sanitize -Db_sanitize=address,undefined -Db_lundef=false \
        -Dbuildtype=debugoptimized >/dev/null
ninja -C build-sanitize >/dev/null
header "ASan + UBSan: every meson test"
# halt on the first UBSan report too, so a report cannot scroll by in a passing run
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
meson test -C build-sanitize --print-errorlogs
