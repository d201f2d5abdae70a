#!/usr/bin/env bash
# bench/compare/run.sh: Syncline side by side with raw Gloo, raw UCX,
# PyTorch's gloo group, OpenMPI (shared memory and TCP) and the
# memory-bandwidth bound, on this machine, in one run: every system once per
# round, in interleaved rounds (the order rotates), each point reported as
# the median and range over the rounds, with the machine's load probed
# before, between and after the rounds (the DDP step comparison among
# them); then the scaling model. See bench/README.md.
#
# Usage: bench/compare/run.sh [--quick] [--rounds=N]
#   --quick    a smoke run: 2 sizes (64 KiB, 4 MiB), 2 rounds, no scaling
#              sweep, switch-point sweep, DDP step or model; results in
#              $SYNCLINE_BUILD_DIR/compare-quick unless BENCH_OUT is set
#   --rounds=N rounds (default BENCH_ROUNDS)
# Environment (all optional):
#   SYNCLINE_BUILD_DIR   build folder (default build)
#   BENCH_ROUNDS         interleaved rounds (default 5)
#   BENCH_MAX_BYTES      largest message (default 64M)
#   BENCH_MIN_BYTES      smallest message (default 8)
#   BENCH_REPETITIONS    repetitions per system and round, their median is
#                        the round's sample (default 1)
#   BENCH_FACTOR         size step (default 4; 2 for a finer sweep)
#   BENCH_SKIP_SETUP=1   do not run scripts/setup.sh (no apt)
#   BENCH_SKIP_DDP=1     skip the DDP step comparison
#   BENCH_OUT            results folder (default bench/results)
# Output: the report on stdout and $BENCH_OUT/compare.md + compare.png +
# compare.csv + compare_ratios.csv, model.md + model.png, switch_points.md,
# raw/ (every round's rows as JSON and logs, samples.csv, load.csv).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
QUICK=0
ROUNDS=${BENCH_ROUNDS:-}
for arg in "$@"; do
  case $arg in
    --quick) QUICK=1 ;;
    --rounds=*) ROUNDS=${arg#--rounds=} ;;
    *) echo "usage: bench/compare/run.sh [--quick] [--rounds=N]" >&2; exit 2 ;;
  esac
done
BUILD=${SYNCLINE_BUILD_DIR:-build}
export SYNCLINE_BUILD_DIR=$BUILD
MAX=${BENCH_MAX_BYTES:-64M}
MIN=${BENCH_MIN_BYTES:-8}
REPS=${BENCH_REPETITIONS:-1}
FACTOR=${BENCH_FACTOR:-4}
if [ "$QUICK" = 1 ]; then
  MIN=64K MAX=4M FACTOR=64
  ROUNDS=${ROUNDS:-2}
fi
ROUNDS=${ROUNDS:-5}
if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
  echo "run.sh: rounds must be a whole number >= 1, not '$ROUNDS'" >&2
  exit 2
fi
# A quick run writes into the build folder, never over the committed results.
if [ "$QUICK" = 1 ]; then OUT=${BENCH_OUT:-$ROOT/$BUILD/compare-quick}; else OUT=${BENCH_OUT:-$ROOT/bench/results}; fi
RAW=$OUT/raw
PY=/usr/bin/python3  # Debian's python3, which sees python3-torch
START=$(date +%s)
SIZES=(--min_bytes="$MIN" --max_bytes="$MAX" --factor="$FACTOR" --repetitions="$REPS")

note() { echo "== [$(( $(date +%s) - START ))s] $*" >&2; }
# Runs a measurement with a deadline; a failure is reported, not fatal, so
# one broken system leaves the others' figures intact.
# NAME may name a folder of raw/ (round-2/mpi_shm).
measure() {
  local name=$1 limit=$2
  shift 2
  note "$name"
  if ! timeout --kill-after=10 "$limit" "$@" > "$RAW/$name.log" 2>&1; then
    echo "run.sh: $name failed or timed out (see $RAW/$name.log):" >&2
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
# Rows that a backend adds for itself live in its folder, in
# backends/<name>/bench_rows.sh (sourced below); its plugin is built here.
ROW_FILES=()
for rows in backends/*/bench_rows.sh; do [ -f "$rows" ] && ROW_FILES+=("$rows"); done
BACKEND_TARGETS=()
for rows in "${ROW_FILES[@]}"; do BACKEND_TARGETS+=("syncline-backend-$(basename "$(dirname "$rows")")"); done
for optional in syncline-bench-mpi "${BACKEND_TARGETS[@]}" syncline-backend-ucx syncline-bench-raw-ucx syncline_torch; do
  if has_target "$optional"; then
    scripts/build.sh "$optional" >&2 || echo "run.sh: $optional did not build; skipped" >&2
  fi
done
# The DDP step benchmark is another folder's program (bench/ddp_step); its
# target name is syncline-bench-ddp-step (ddp_step in older trees).
DDP_TARGET=""
if [ "${BENCH_SKIP_DDP:-0}" != 1 ] && [ "$QUICK" = 0 ] && [ -d bench/ddp_step ]; then
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
  echo "Command: \`bench/compare/run.sh$([ "$QUICK" = 1 ] && echo ' --quick')\` (rounds $ROUNDS, BENCH_MIN_BYTES=$MIN BENCH_MAX_BYTES=$MAX BENCH_REPETITIONS=$REPS BENCH_FACTOR=$FACTOR)"
  echo
  echo "- Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) memory, Linux $(uname -r)"
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- Versions: syncline $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), gloo $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null), ucx $(dpkg-query -W -f='${Version}' libucx-dev 2>/dev/null), torch $($PY -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not installed'), $(mpirun --version 2>/dev/null | head -1 || echo 'no mpirun'), $(gcc --version | head -1)"
  echo "- Method: 2 ranks on this host, f32, sum; sizes $MIN..$MAX by $FACTOR; every system once per round, $ROUNDS rounds, the order rotating by one system each round; per size, warm-ups (2, the first checked, then untimed ops until both ranks have run them for 20 ms) then ~16 MiB of timed traffic (3-100 ops); the slowest rank's mean op time (median of $REPS repetitions) is the round's sample; busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n (allgather, reduce_scatter), 1 (broadcast), as nccl-tests."
  [ "$BACKENDS" = gloo ] && echo "- ucx: not built (libsyncline-backend-ucx.so absent), so Syncline+UCX is not in this run."
} > "$RAW/header.txt"

# The systems of the comparison, each a command writing its rows to the JSON
# file named by its last word (completed per round below).
OPS=allreduce,allgather,reduce_scatter,broadcast
declare -A CMD
NAMES=(membw syncline raw_gloo)
CMD[membw]="$BIN/syncline-bench-membw --threads=2 ${SIZES[*]} --json="
CMD[syncline]="$BIN/syncline-bench-collectives --backends=$BACKENDS --world_sizes=2 --ops=$OPS ${SIZES[*]} --json="
CMD[raw_gloo]="$BIN/syncline-bench-raw-gloo --world_size=2 ${SIZES[*]} --json="
if [ -x "$BIN/syncline-bench-raw-ucx" ]; then
  NAMES+=(raw_ucx)
  CMD[raw_ucx]="$BIN/syncline-bench-raw-ucx --ops=$OPS ${SIZES[*]} --json="
fi
if [ -n "$($PY -c 'import torch.distributed' 2>&1 && echo ok)" ]; then
  NAMES+=(torch_gloo)
  CMD[torch_gloo]="$PY bench/compare/torch_gloo.py --world_size 2 --min_bytes $MIN --max_bytes $MAX --factor $FACTOR --repetitions $REPS --json "
fi
# PyTorch over the `syncline` process group, UCX underneath (python/, issue 17):
# the same script and ops as torch_gloo, against syncline-ucx's C++ figures.
TORCH_SYNCLINE=()
if [ "$BACKENDS" = gloo,ucx ] && compgen -G "$BUILD/python/syncline_torch/_C*.so" > /dev/null; then
  TORCH_SYNCLINE=(env SYNCLINE_BACKEND=ucx PYTHONPATH="$BUILD/python")
  NAMES+=(torch_syncline)
  CMD[torch_syncline]="${TORCH_SYNCLINE[*]} $PY bench/compare/torch_gloo.py --backend syncline --world_size 2 --min_bytes $MIN --max_bytes $MAX --factor $FACTOR --repetitions $REPS --json "
  # Its C++ reference for allreduce in place, as torch's all_reduce runs
  # (rows "syncline-ucx/in_place", compared in the Python path's table only).
  NAMES+=(syncline_inplace)
  CMD[syncline_inplace]="$BIN/syncline-bench-collectives --backends=ucx --world_sizes=2 --ops=allreduce --in_place --system_suffix=/in_place ${SIZES[*]} --json="
fi
MPIRUN=""
if [ -x "$BIN/syncline-bench-mpi" ] && command -v mpirun > /dev/null; then
  MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 --mca oob_tcp_if_include lo"
  NAMES+=(mpi_shm mpi_tcp)
  CMD[mpi_shm]="$MPIRUN --mca btl vader,self $BIN/syncline-bench-mpi --system=mpi-shm ${SIZES[*]} --json="
  CMD[mpi_tcp]="$MPIRUN --mca btl tcp,self --mca btl_tcp_if_include lo $BIN/syncline-bench-mpi --system=mpi-tcp ${SIZES[*]} --json="
else
  echo "run.sh: OpenMPI not found; mpi-shm and mpi-tcp skipped" >&2
fi
# Each backend's own rows (backends/<name>/bench_rows.sh): a row file adds
# its systems to NAMES and their commands to CMD, as above, from BIN, BUILD,
# PY, OPS, SIZES and MPIRUN (the OpenMPI prefix; empty without OpenMPI).
# bench/compare/report.py learns their systems from the data and from
# backends/<name>/bench_systems.txt.
for rows in "${ROW_FILES[@]}"; do
  # shellcheck source=/dev/null
  source "$rows" || echo "run.sh: $rows failed; its rows skipped" >&2
done
# The DDP step, once per round like the rest, so that its ratios get a
# spread: Syncline's (bench/ddp_step) over gloo and ucx, PyTorch's over gloo.
if [ -n "$DDP_TARGET" ] && [ -x "$BIN/$DDP_TARGET" ]; then
  NAMES+=(ddp_gloo)
  CMD[ddp_gloo]="env SYNCLINE_BACKEND=gloo $BIN/$DDP_TARGET --json="
  if [ "$BACKENDS" = gloo,ucx ]; then
    NAMES+=(ddp_ucx)
    CMD[ddp_ucx]="env SYNCLINE_BACKEND=ucx $BIN/$DDP_TARGET --json="
  fi
elif [ "${BENCH_SKIP_DDP:-0}" != 1 ] && [ "$QUICK" = 0 ]; then
  echo "run.sh: the DDP step benchmark (bench/ddp_step) is not built; Syncline's DDP ratio skipped" >&2
fi
if [ "${BENCH_SKIP_DDP:-0}" != 1 ] && [ "$QUICK" = 0 ] && [[ " ${NAMES[*]} " == *" torch_gloo "* ]]; then
  NAMES+=(ddp_pytorch)
  # With syncline_torch built, the same pair of processes also times DDP
  # over the `syncline` group (UCX underneath): ddp_pytorch.py --syncline,
  # and without communication (--floor: torch's own floor for issue 17);
  # --bucket-view times both again with gradient_as_bucket_view, the
  # gradient layout ddp_step uses by default (like for like).
  CMD[ddp_pytorch]="${TORCH_SYNCLINE[*]} $PY bench/compare/ddp_pytorch.py ${TORCH_SYNCLINE:+--syncline --floor --bucket-view} --json "
fi

# The rounds: every system once per round, the order rotated by one each
# round so that none always runs first or after the same neighbour; the
# machine's load is probed (1 s, nothing of ours running) before the first
# round and after each.
probe() { "$PY" bench/compare/machine_load.py probe "$1" --csv "$RAW/load.csv"; }
probe before
for ((round = 1; round <= ROUNDS; ++round)); do
  mkdir -p "$RAW/round-$round"
  for ((i = 0; i < ${#NAMES[@]}; ++i)); do
    name=${NAMES[$(((i + round - 1) % ${#NAMES[@]}))]}
    # shellcheck disable=SC2086  # the command is words on purpose
    measure "round-$round/$name" 600 ${CMD[$name]}"$RAW/round-$round/$name.json"
  done
  probe "round-$round"
done

# 3 and 4 ranks of allreduce, for the scaling model's check.
[ "$QUICK" = 1 ] || measure scaling 300 "$BIN/syncline-bench-collectives" --backends="$BACKENDS" --world_sizes=3,4 \
  --ops=allreduce "${SIZES[@]}" --repetitions=3 --json="$RAW/scaling.json"

# The UCX backend's switch points, measured: every op with a switch point
# on 2, 3 and 4 ranks, sizes by 2, its latency and bandwidth algorithms
# forced through the backend options with their repetitions interleaved
# (bench/model/sweep_switch_points.sh; about a minute). switch_points.py
# compares them with the defaults and the cost model.
if [ "$BACKENDS" = gloo,ucx ] && [ "$QUICK" = 0 ]; then
  measure switch_sweep 300 env SWEEP_MIN_BYTES=64 SWEEP_MAX_BYTES=8M SWEEP_REPETITIONS=5 \
    bench/model/sweep_switch_points.sh "$BIN" "$RAW/switch_sweep.json"
fi

# The collective benchmark on its own, at the largest size: its busbw must
# agree with the comparison's figure above within 10% (report.py checks).
measure standalone 300 "$BIN/syncline-bench-collectives" --backends="$BACKENDS" \
  --world_sizes=2 --ops=allreduce --min_bytes="$MAX" --max_bytes="$MAX" \
  --repetitions=3 --system_suffix=/standalone --json="$RAW/standalone.json"
probe after

note "report"
"$PY" bench/compare/report.py --raw "$RAW" --header "$RAW/header.txt" --load "$RAW/load.csv" \
  --md "$OUT/compare.md" --csv "$OUT/compare.csv" --png "$OUT/compare.png"
status=$?
for name in ddp_gloo ddp_ucx ddp_pytorch; do
  if [ -f "$RAW/round-$ROUNDS/$name.log" ]; then echo; cat "$RAW/round-$ROUNDS/$name.log"; fi
done
if [ "$QUICK" = 0 ]; then
  note "scaling model"
  "$PY" bench/model/model.py --raw "$RAW" --md "$OUT/model.md" --png "$OUT/model.png" ||
    echo "run.sh: the scaling model failed" >&2
fi
if [ -f "$RAW/switch_sweep.json" ]; then
  "$PY" bench/model/switch_points.py --raw "$RAW" --md "$OUT/switch_points.md" > /dev/null ||
    echo "run.sh: switch_points.py failed" >&2
fi
note "done in $(( $(date +%s) - START )) s; results in $OUT/"
exit $status
