#!/usr/bin/env bash
# bench/compare/run.sh: Syncline side by side with raw Gloo, PyTorch's gloo
# group, OpenMPI (shared memory and TCP) and the memory-bandwidth bound, on
# this machine, in one run; then the DDP step comparison and the scaling
# model. See bench/README.md.
#
# Usage: bench/compare/run.sh
# Environment (all optional):
#   SYNCLINE_BUILD_DIR   build folder (default build)
#   BENCH_MAX_BYTES      largest message (default 64M)
#   BENCH_REPETITIONS    repetitions, the median is reported (default 5)
#   BENCH_FACTOR         size step (default 4; 2 for a finer sweep)
#   BENCH_SKIP_SETUP=1   do not run scripts/setup.sh (no apt)
#   BENCH_SKIP_DDP=1     skip the DDP step comparison
# Output: the report on stdout and bench/results/compare.md + compare.png,
# model.md + model.png, switch_points.md, raw/ (every program's rows as
# JSON, and logs).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${SYNCLINE_BUILD_DIR:-build}
export SYNCLINE_BUILD_DIR=$BUILD
MAX=${BENCH_MAX_BYTES:-64M}
REPS=${BENCH_REPETITIONS:-5}
FACTOR=${BENCH_FACTOR:-4}
OUT=$ROOT/bench/results
RAW=$OUT/raw
PY=/usr/bin/python3  # Debian's python3, which sees python3-torch
START=$(date +%s)
SIZES=(--max_bytes="$MAX" --factor="$FACTOR" --repetitions="$REPS")

note() { echo "== [$(( $(date +%s) - START ))s] $*" >&2; }
# Runs a measurement with a deadline; a failure is reported, not fatal, so
# one broken system leaves the others' figures intact.
measure() {
  local name=$1 limit=$2
  shift 2
  note "$name"
  if ! timeout --kill-after=10 "$limit" "$@" > "$RAW/$name.log" 2>&1; then
    echo "run.sh: $name failed or timed out (see bench/results/raw/$name.log):" >&2
    tail -5 "$RAW/$name.log" >&2
    return 1
  fi
}
# grep reads all of ninja's output (no -q): under pipefail an early exit would
# SIGPIPE ninja and fail the test.
has_target() { ninja -C "$BUILD" -t targets all 2>/dev/null | grep -E "^(bin/|lib/)?$1(\.so)?:" > /dev/null; }

if [ "${BENCH_SKIP_SETUP:-0}" != 1 ]; then
  note "setup (scripts/setup.sh)"
  scripts/setup.sh >&2 || { echo "run.sh: scripts/setup.sh failed" >&2; exit 1; }
fi
note "build into $BUILD"
scripts/build.sh syncline-bench-collectives syncline-bench-raw-gloo syncline-bench-membw >&2 ||
  { echo "run.sh: build failed" >&2; exit 1; }
for optional in syncline-bench-mpi syncline-backend-ucx syncline-bench-raw-ucx; do
  if has_target "$optional"; then
    scripts/build.sh "$optional" >&2 || echo "run.sh: $optional did not build; skipped" >&2
  fi
done
# The DDP step benchmark is another folder's program (bench/ddp_step); its
# target name is syncline-bench-ddp-step (ddp_step in older trees).
DDP_TARGET=""
if [ "${BENCH_SKIP_DDP:-0}" != 1 ] && [ -d bench/ddp_step ]; then
  for candidate in syncline-bench-ddp-step ddp_step; do
    if [ -z "$DDP_TARGET" ] && has_target "$candidate"; then DDP_TARGET=$candidate; fi
  done
  if [ -n "$DDP_TARGET" ]; then
    scripts/build.sh "$DDP_TARGET" >&2 || { echo "run.sh: $DDP_TARGET did not build" >&2; DDP_TARGET=""; }
  fi
fi

rm -rf "$RAW" && mkdir -p "$RAW"
BIN=$BUILD/bin
BACKENDS=gloo
if [ -f "$BUILD/lib/libsyncline-backend-ucx.so" ]; then
  BACKENDS=gloo,ucx
else
  echo "ucx: not built"
fi

# The header: machine, date, versions.
{
  echo "# Syncline collectives side by side"
  echo
  echo "Command: \`bench/compare/run.sh\` (BENCH_MAX_BYTES=$MAX BENCH_REPETITIONS=$REPS BENCH_FACTOR=$FACTOR)"
  echo
  echo "- Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) memory, Linux $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- Versions: syncline $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), gloo $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null), ucx $(dpkg-query -W -f='${Version}' libucx-dev 2>/dev/null), torch $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not installed'), $(mpirun --version 2>/dev/null | head -1 || echo 'no mpirun'), $(gcc --version | head -1)"
  echo "- Method: 2 ranks on this host, f32, sum; sizes 8 B..$MAX by $FACTOR; per size, warm-ups (the first checked) then ~16 MiB of timed traffic (3-100 ops); the slowest rank's mean op time, median over $REPS repetitions; busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n (allgather), 1 (broadcast), as nccl-tests."
  [ "$BACKENDS" = gloo ] && echo "- ucx: not built (libsyncline-backend-ucx.so absent), so Syncline+UCX is not in this run."
} > "$RAW/header.txt"

OPS=allreduce,allgather,broadcast
measure membw 120 "$BIN/syncline-bench-membw" --threads=2 "${SIZES[@]}" --json="$RAW/membw.json"
measure syncline 600 "$BIN/syncline-bench-collectives" --backends="$BACKENDS" --world_sizes=2 \
  --ops="$OPS" "${SIZES[@]}" --json="$RAW/syncline.json"
measure raw_gloo 300 "$BIN/syncline-bench-raw-gloo" --world_size=2 "${SIZES[@]}" \
  --json="$RAW/raw_gloo.json"
if [ -x "$BIN/syncline-bench-raw-ucx" ]; then
  measure raw_ucx 300 "$BIN/syncline-bench-raw-ucx" "${SIZES[@]}" --json="$RAW/raw_ucx.json"
fi
if [ -n "$($PY -c 'import torch.distributed' 2>&1 && echo ok)" ]; then
  measure torch_gloo 300 "$PY" bench/compare/torch_gloo.py --world_size 2 \
    --max_bytes "$MAX" --factor "$FACTOR" --repetitions "$REPS" --json "$RAW/torch_gloo.json"
fi
if [ -x "$BIN/syncline-bench-mpi" ] && command -v mpirun > /dev/null; then
  MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1
          --mca oob_tcp_if_include lo)
  measure mpi_shm 300 "${MPIRUN[@]}" --mca btl vader,self "$BIN/syncline-bench-mpi" \
    --system=mpi-shm "${SIZES[@]}" --json="$RAW/mpi_shm.json"
  measure mpi_tcp 300 "${MPIRUN[@]}" --mca btl tcp,self --mca btl_tcp_if_include lo \
    "$BIN/syncline-bench-mpi" --system=mpi-tcp "${SIZES[@]}" --json="$RAW/mpi_tcp.json"
else
  echo "run.sh: OpenMPI not found; mpi-shm and mpi-tcp skipped" >&2
fi
# 3 and 4 ranks of allreduce, for the scaling model's check.
measure scaling 300 "$BIN/syncline-bench-collectives" --backends="$BACKENDS" --world_sizes=3,4 \
  --ops=allreduce "${SIZES[@]}" --repetitions=3 --json="$RAW/scaling.json"

# The UCX backend's switch points, measured: every op with a switch point
# on 2, 3 and 4 ranks, sizes by 2, its latency and bandwidth algorithms
# forced through the backend options with their repetitions interleaved
# (bench/model/sweep_switch_points.sh; about a minute). switch_points.py
# compares them with the defaults and the cost model.
if [ "$BACKENDS" = gloo,ucx ]; then
  measure switch_sweep 300 env SWEEP_MIN_BYTES=64 SWEEP_MAX_BYTES=8M SWEEP_REPETITIONS=5 \
    bench/model/sweep_switch_points.sh "$BIN" "$RAW/switch_sweep.json"
fi

if [ "${BENCH_SKIP_DDP:-0}" != 1 ]; then
  if [ -n "$DDP_TARGET" ] && [ -x "$BIN/$DDP_TARGET" ]; then
    measure ddp_step 300 env SYNCLINE_BACKEND=gloo "$BIN/$DDP_TARGET" &&
      cp "$RAW/ddp_step.log" "$RAW/ddp_step.txt"
    if [ "$BACKENDS" = gloo,ucx ]; then
      measure ddp_step_ucx 300 env SYNCLINE_BACKEND=ucx "$BIN/$DDP_TARGET" &&
        cp "$RAW/ddp_step_ucx.log" "$RAW/ddp_step_ucx.txt"
    fi
  else
    echo "run.sh: the DDP step benchmark (bench/ddp_step) is not built; Syncline's DDP ratio skipped" >&2
  fi
  measure ddp_pytorch 300 "$PY" bench/compare/ddp_pytorch.py --json "$RAW/ddp_pytorch.json"
fi

# The collective benchmark on its own, at the largest size: its busbw must
# agree with the comparison's figure above within 10% (report.py checks).
measure standalone 300 "$BIN/syncline-bench-collectives" --backends="$BACKENDS" \
  --world_sizes=2 --ops=allreduce --min_bytes="$MAX" --max_bytes="$MAX" \
  --repetitions="$REPS" --system_suffix=/standalone --json="$RAW/standalone.json"

note "report"
"$PY" bench/compare/report.py --raw "$RAW" --header "$RAW/header.txt" \
  --md "$OUT/compare.md" --png "$OUT/compare.png"
status=$?
if [ -f "$RAW/ddp_step.txt" ]; then echo; cat "$RAW/ddp_step.txt"; fi
if [ -f "$RAW/ddp_pytorch.log" ]; then echo; cat "$RAW/ddp_pytorch.log"; fi
note "scaling model"
"$PY" bench/model/model.py --raw "$RAW" --md "$OUT/model.md" --png "$OUT/model.png" ||
  echo "run.sh: the scaling model failed" >&2
if [ -f "$RAW/switch_sweep.json" ]; then
  "$PY" bench/model/switch_points.py --raw "$RAW" --md "$OUT/switch_points.md" > /dev/null ||
    echo "run.sh: switch_points.py failed" >&2
fi
note "done in $(( $(date +%s) - START )) s; results in bench/results/"
exit $status
