#!/usr/bin/env bash
# Fuzz smoke: every libFuzzer harness in capi/fuzz, built by clang with ASan
# and UBSan, replays its seed corpus (meson test suite 'fuzz') and then runs
# for FUZZ_SECONDS from a copy of it. Any crash, report or timeout fails.
source "$(dirname "$0")/common.sh"
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
header "fuzz: build harnesses (clang, ASan + UBSan)"
need clang libclang-rt-14-dev libomp-14-dev  # libFuzzer + sanitizer runtimes, OpenMP
need_meson
[ -f build-fuzz/build.ninja ] ||
    CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=enabled \
        -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized >/dev/null
ninja -C build-fuzz >/dev/null
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS="suppressions=$ROOT/capi/fuzz/lsan.supp"  # the OpenMP runtime's own state
meson test -C build-fuzz --suite c --suite fuzz --print-errorlogs

work=$(mktemp -d)
for harness in build-fuzz/capi/fuzz/fuzz_*; do
    [ -x "$harness" ] && [ -f "$harness" ] || continue
    name=${harness##*/fuzz_}
    header "fuzz: $name for ${FUZZ_SECONDS}s"
    mkdir -p "$work/$name"
    # new inputs go to the scratch directory; the repo corpus stays as committed
    status=0
    "$harness" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$work/$name-" \
        "$work/$name" "capi/fuzz/corpus/$name" >"$work/$name.log" 2>&1 || status=$?
    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$work/$name.log" || true
    if [ "$status" -ne 0 ] || ls "$work/$name"-* >/dev/null 2>&1; then
        tail -n 60 "$work/$name.log"
        echo "FAILED: fuzz_$name (exit $status); inputs: $(ls "$work/$name"-* 2>/dev/null)"
        exit 1
    fi
done
