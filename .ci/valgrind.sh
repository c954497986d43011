#!/usr/bin/env bash
# Valgrind job: every compiled C test (suite c) under memcheck; an error or
# a definite leak fails (the 'valgrind' test setup in meson.build).
source "$(dirname "$0")/common.sh"
header "valgrind memcheck: C tests"
need valgrind
plain_build
meson setup --reconfigure build-ci >/dev/null  # picks up valgrind if just installed
meson test -C build-ci --setup valgrind --suite c --print-errorlogs
