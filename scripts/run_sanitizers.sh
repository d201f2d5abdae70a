#!/usr/bin/env bash
# The sanitizer CI steps: ASan+UBSan over the core, the stores, Gloo and UCX,
# and TSan over the core, the stores and UCX (its shared worker, progress
# driver and split families are where threads meet). Each builds its own
# tree (presets asan and tsan in CMakePresets.json) and runs those tests; any
# report fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
JOBS=${SYNCLINE_JOBS:-2}

# Report every problem, and make a report fail the test.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
# UCX's malloc/mmap hooks crash under TSan (even a bare ucp_init does); the
# hooks only serve its registration cache, which these tests do not need.
export UCX_MEM_MMAP_HOOK_MODE=none

run_preset() {
  local preset=$1 targets=$2 regex=$3
  echo "== sanitizers: $preset"
  cmake --preset "$preset" > /dev/null
  # shellcheck disable=SC2086
  cmake --build "build-$preset" -j "$JOBS" --target $targets
  ctest --test-dir "build-$preset" --output-on-failure -j 1 -R "$regex"
}

run_preset asan \
  "store_test rendezvous_test communicator_test loader_test collective_test backend_fault_test syncline-backend-gloo syncline-backend-ucx collective_test_ucx backend_fault_test_ucx" \
  '^(AllStores|PrefixStore|TcpStore|Resolve|Rendezvous|Backend|Validation|FlightRecorder|Loader|EnvTable|Backends/|Faults|ucx_(tcp|shm)\.Backends/(CollectiveTest\.(Allreduce|SendRecv)/ucx_[23]ranks|FaultTest\.WorkOutlivesItsCommunicator/))'
run_preset tsan \
  "store_test rendezvous_test communicator_test syncline-backend-gloo syncline-backend-ucx collective_test_ucx ucx_fault_test ucx_split_test syncline-plugin-trace syncline-plugin-check" \
  '^(AllStores|PrefixStore|TcpStore|Resolve|Rendezvous|Validation|FlightRecorder|ucx_(tcp|shm)\.(UcxSplit\.|Ucx/UcxKill|Backends/CollectiveTest\.(Allreduce|SendRecv)[^/]*/ucx_[23]ranks))'
echo "sanitizers: clean"
