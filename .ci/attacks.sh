#!/usr/bin/env bash
# Attack job: the scripts a suspicious user would write against approxmul
# (tests/attacks/*.py: absurd thread counts, Ctrl-C during long C calls,
# vendor models that crash, exit, abort, loop or are data, hostile table
# and model files). Each must end in a clear error, never a crash, hang or
# runaway allocation; each runs under `timeout` (the file attacks also cap
# their own address space), so a regression fails the job instead of
# stalling or swapping CI.
source "$(dirname "$0")/common.sh"
header "attacks: build the library"
plain_build
export PYTHONPATH="$ROOT"

status=0
for script in tests/attacks/[!_]*.py; do
    name=$(basename "$script" .py)
    [ "$name" = common ] && continue
    header "attack: $name"
    if ! timeout 600 python3 "$script"; then
        echo "ATTACK FAILED: $script"
        status=1
    fi
done
exit $status
