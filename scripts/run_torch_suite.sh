#!/usr/bin/env bash
# Runs PyTorch's whole distributed suite (tests/python/torch_suite) over
# PyTorch's own gloo, the baseline, and over `syncline` with each backend
# underneath, at each world size; then prints the counts per run and, per
# syncline run, the tests the baseline passed that it did not.
# Each run takes 5-20 minutes on 2 cores. Builds the module first.
# Usage: scripts/run_torch_suite.sh [-k PATTERN ...]
# Environment: RANKS ("2 3"), BACKENDS ("gloo ucx"), OUT (a new temp dir),
#              PYTHON (/usr/bin/python3, where Debian's torch is).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SYNCLINE_BUILD_DIR:-build}
RANKS=${RANKS:-2 3}
BACKENDS=${BACKENDS:-gloo ucx}
OUT=${OUT:-$(mktemp -d /tmp/syncline-torch-suite.XXXXXX)}
PYTHON=${PYTHON:-/usr/bin/python3}
SUITE=tests/python/torch_suite
bash scripts/build.sh syncline_torch syncline-plugin-check syncline-plugin-trace \
  $(for b in $BACKENDS; do echo "syncline-backend-$b"; done) || exit 1
mkdir -p "$OUT"
run() {  # run LOG NAME=VALUE... : one whole-suite run
  local log=$1
  shift
  echo "run_torch_suite: $(basename "$log" .log) ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
  env "$@" PYTHONPATH="$BUILD_DIR/python" "$PYTHON" "$SUITE/run_torch_suite.py" -v "${EXTRA[@]}" \
    >"$log" 2>&1
}
EXTRA=("$@")
status=0
for ranks in $RANKS; do
  base="$OUT/torch-gloo.$ranks.log"
  run "$base" BACKEND=gloo WORLD_SIZE="$ranks"
  for backend in $BACKENDS; do
    log="$OUT/syncline-$backend.$ranks.log"
    run "$log" BACKEND=syncline SYNCLINE_BACKEND="$backend" WORLD_SIZE="$ranks"
    "$PYTHON" "$SUITE/suite_results.py" --missing "$base" "$log" || status=1
  done
done
"$PYTHON" "$SUITE/suite_results.py" "$OUT"/*.log
echo "run_torch_suite: logs in $OUT"
exit $status
