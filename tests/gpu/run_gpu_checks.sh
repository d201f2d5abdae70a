#!/usr/bin/env bash
# run_gpu_checks.sh: the checks that need an NVIDIA GPU, in one script and one
# log, in under 8 minutes (issue 8). Run it from anywhere on a GPU machine:
#
#   bash tests/gpu/run_gpu_checks.sh       # log: $OUT/ or the repo's gpu_checks.log
#   SYNCLINE_GPU_LOG=/tmp/x.log SYNCLINE_GPU_BUILD_DIR=build-gpu bash tests/gpu/run_gpu_checks.sh
#
# Steps (each with its own time cap; a step that no longer fits the budget is
# skipped and says so):
#   1. environment: driver, GPUs, CUDA toolkit, NCCL, PyTorch and its CUDA;
#   2. configure against that machine's CUDA libtorch (python3's
#      torch.utils.cmake_prefix_path) and build: the NCCL plugin and its
#      tests, then (optional) the DDP tests, the trainer, the launcher and
#      the nccl_vs_raw benchmark;
#   3. the NCCL suites: nccl_plugin_test, nccl_abort_record_test (the store
#      side of abort propagation, CPU only), and nccl_collective_test, whose
#      cases run at every world size up to the number of GPUs (world size 1
#      on a one-GPU machine: NCCL refuses two ranks on one GPU) and skip
#      above it. Among them: WaitStream (the caller's stream waits for an
#      allreduce without a host wait, then a copy on it reads the result),
#      comm_split through the plugin's table (one GPU), Split by parity, and
#      an op timeout on rank 0 that the other ranks (blocked in an op, or
#      idle) must learn of through the store within seconds (two or more
#      GPUs; those cases skip, saying so, on a one-GPU machine);
#   4. the DDP equivalence test on CUDA, if ddp_test has CUDA cases;
#   5. the trainer with --device cuda --amp over NCCL, one rank per GPU;
#   6. nccl_vs_raw: Syncline vs raw ncclAllReduce busbw and latency.
# Exit status: 0 when every step that ran passed, 1 otherwise. The summary
# at the end of the log lists each step's result and time.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
# $OUT is where the project's device runner collects files to bring back.
LOG=${SYNCLINE_GPU_LOG:-${OUT:-$ROOT}/gpu_checks.log}
BUILD=${SYNCLINE_GPU_BUILD_DIR:-$ROOT/build-gpu}
BUDGET_S=${SYNCLINE_GPU_BUDGET_S:-470}   # stay under 8 minutes in all
exec > >(tee "$LOG") 2>&1

START=$SECONDS
SUMMARY=()
FAILED=0

# step NAME CAP_S REQUIRED(0/1) COMMAND...: runs COMMAND under `timeout`,
# unless less than CAP_S of the budget is left.
step() {
  local name=$1 cap=$2 required=$3
  shift 3
  local left=$((BUDGET_S - (SECONDS - START)))
  if ((left < cap / 2)); then
    echo "== $name: SKIPPED, ${left}s of the budget left (needs up to ${cap}s)"
    SUMMARY+=("$(printf '%-28s skipped (time budget)' "$name")")
    ((required)) && FAILED=1
    return 1
  fi
  ((cap > left)) && cap=$left
  echo
  echo "== $name (cap ${cap}s) $(date -u +%H:%M:%S)"
  local shown="$*"
  echo "\$ ${shown%%$'\n'*}"
  local t0=$SECONDS rc
  timeout --kill-after=10 "$cap" "$@"
  rc=$?
  local took=$((SECONDS - t0))
  local verdict="ok"
  if ((rc == 124 || rc == 137)); then
    verdict="TIMED OUT"
  elif ((rc != 0)); then
    verdict="FAILED (rc $rc)"
  fi
  echo "== $name: $verdict in ${took}s"
  SUMMARY+=("$(printf '%-28s %-16s %4ss' "$name" "$verdict" "$took")")
  if ((rc != 0)); then
    ((required)) && FAILED=1
    return 1
  fi
  return 0
}

finish() {
  echo
  echo "== summary ($(date -u +%FT%TZ), $((SECONDS - START))s in all, log $LOG)"
  printf '   %s\n' "${SUMMARY[@]}"
  exit "$FAILED"
}

# shellcheck disable=SC2317  # run through bash -c "$(declare -f environment)"
environment() {
  date -u
  uname -a
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv || true
  ls -l /usr/local/cuda 2>/dev/null
  grep -h '#define NCCL_\(MAJOR\|MINOR\|PATCH\)' /usr/local/cuda/include/nccl.h 2>/dev/null
  python3 - <<'PY' || true
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda,
      "available", torch.cuda.is_available(), "devices", torch.cuda.device_count())
print("torch nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-")
print("cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI)
print("cmake prefix", torch.utils.cmake_prefix_path)
PY
}

step "environment" 60 0 bash -c "$(declare -f environment); environment"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ -z "$NGPU" || "$NGPU" -lt 1 ]]; then  # no nvidia-smi in some containers
  NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
fi
if [[ -z "$NGPU" || "$NGPU" -lt 1 ]]; then
  echo "== no NVIDIA GPU is visible (nvidia-smi -L lists none); nothing to check"
  SUMMARY+=("no GPU: nothing ran")
  FAILED=1
  finish
fi
echo "== $NGPU GPU(s)"

TORCH_PREFIX=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
WITH_TORCH=OFF
[[ -n "$TORCH_PREFIX" ]] && WITH_TORCH=ON
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
step "configure" 120 1 cmake -S "$ROOT" -B "$BUILD" "${GENERATOR[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DSYNCLINE_WITH_NCCL=ON -DSYNCLINE_WITH_TORCH=$WITH_TORCH -DSYNCLINE_BUILD_BENCH=ON ||
  finish
JOBS=$(nproc)
step "build nccl" 200 1 cmake --build "$BUILD" -j"$JOBS" --target \
  syncline-backend-nccl syncline-backend-gloo nccl_plugin_test nccl_collective_test \
  nccl_abort_record_test nccl_load_probe syncline-backend-nccl_norpath || finish
# Optional targets, one by one, so that a missing one (libtorch without CUDA,
# the benchmark not yet wired into bench/CMakeLists.txt) skips only its step.
HAVE=()
for target in syncline-run syncline-train ddp_test nccl_vs_raw; do
  if step "build $target" 200 0 cmake --build "$BUILD" -j"$JOBS" --target "$target"; then
    HAVE+=("$target")
  fi
done
have() { [[ " ${HAVE[*]} " == *" $1 "* ]]; }

export SYNCLINE_PLUGIN_PATH="$BUILD/lib"
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
step "nccl_plugin_test" 60 1 "$BUILD/bin/nccl_plugin_test"
step "nccl_abort_record_test" 60 1 "$BUILD/bin/nccl_abort_record_test"
step "nccl_collective_test" 240 1 "$BUILD/bin/nccl_collective_test"
if ((NGPU < 2)); then
  echo "== one GPU: the cases where an abort reaches the other ranks through the"
  echo "   store (AbortReaches*) and Split by parity skipped; they need two GPUs"
fi

if have ddp_test; then
  CUDA_CASES=$("$BUILD/bin/ddp_test" --gtest_list_tests | grep -ci cuda || true)
  if [[ "$CUDA_CASES" -gt 0 ]]; then
    step "ddp_test (cuda)" 120 1 env SYNCLINE_BACKEND=cpu:gloo,cuda:nccl \
      "$BUILD/bin/ddp_test" --gtest_filter='*Cuda*:*CUDA*:*cuda*'
  else
    echo "== ddp_test has no CUDA cases yet; the DDP equivalence test on CUDA did not run"
    SUMMARY+=("$(printf '%-28s %s' "ddp_test (cuda)" "not present")")
  fi
fi
if have syncline-run && have syncline-train; then
  step "trainer --device cuda --amp" 150 1 env SYNCLINE_BACKEND=cpu:gloo,cuda:nccl \
    "$BUILD/bin/syncline-run" -n "$NGPU" -- "$BUILD/bin/syncline-train" \
    --device cuda --amp --epochs 2
fi
if have syncline-run && have nccl_vs_raw; then
  step "nccl_vs_raw" 120 1 "$BUILD/bin/syncline-run" -n "$NGPU" -- \
    "$BUILD/bin/nccl_vs_raw" --iters 50
fi
finish
