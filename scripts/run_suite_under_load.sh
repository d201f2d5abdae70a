#!/usr/bin/env bash
# Runs the whole test suite twice in a row with two CPU hogs beside it, as
# issue 13 asks: the multi-rank tests must not depend on a quiet machine.
# Builds first (scripts/build.sh); extra arguments go to ctest.
# Usage: scripts/run_suite_under_load.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SYNCLINE_BUILD_DIR:-build}
bash scripts/build.sh
hogs=()
stop_hogs() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_hogs EXIT
for _ in 1 2; do
  # A busy loop that ends by itself after 2 hours if this script is killed.
  timeout 7200 sh -c 'while :; do :; done' &
  hogs+=($!)
done
echo "run_suite_under_load: 2 CPU hogs (pids ${hogs[*]}) on $(nproc) CPUs," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for run in 1 2; do
  echo "run_suite_under_load: run $run of 2"
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j 1 "$@"
done
echo "run_suite_under_load: both runs passed; load average $(cut -d' ' -f1-3 /proc/loadavg)"
