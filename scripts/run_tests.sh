#!/usr/bin/env bash
# Sets up a fresh machine, builds everything and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
BUILD_DIR=${SYNCLINE_BUILD_DIR:-build}
# Multi-rank tests measure time-outs in seconds: run one test binary's case
# at a time on this 2-core machine so they are not starved.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 1 "$@"
