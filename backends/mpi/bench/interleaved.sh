#!/usr/bin/env bash
# backends/mpi/bench/interleaved.sh: issue 16's targets measured in one job:
# interleaved.cc times Syncline's collectives over the mpi backend and MPI's
# own blocking collectives block by block, on the same buffers, 2 ranks on
# vader, with the mpirun options and libnbc setting of bench/compare/run.sh
# (backends/mpi/bench_rows.sh). Prints the load
# average before and after, and per op and size the median time of each
# side, the busbw ratio MPI / Syncline per round (median, min-max), and in
# how many rounds it was at least 0.95. Every result is checked; a wrong
# element fails the run.
#
# Usage: backends/mpi/bench/interleaved.sh [ROUNDS=15]
#            [OPS=allgather,broadcast,allreduce,reduce_scatter]
#            [SIZES=8,65536,262144,1048576,4194304,16777216,67108864]
# BUILD (default build) is the Syncline build tree whose core and mpi
# backend are measured.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
if [ ! -d "$BUILD" ]; then
  echo "interleaved.sh: no build tree at $BUILD; set BUILD to one" >&2
  exit 2
fi
BUILD=$(cd "$BUILD" && pwd)
ROUNDS=${1:-15}
OPS=${2:-allgather,broadcast,allreduce,reduce_scatter}
SIZES=${3:-8,65536,262144,1048576,4194304,16777216,67108864}
for f in "$BUILD/lib/libsyncline.so" "$BUILD/lib/libsyncline-backend-mpi.so"; do
  if [ ! -e "$f" ]; then
    echo "interleaved.sh: $f is missing; build syncline and syncline-backend-mpi first" >&2
    exit 2
  fi
done
OUT=$(mktemp -d /tmp/interleaved.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
mpicxx -O2 -std=c++17 -DOMPI_SKIP_MPICXX=1 -I"$ROOT/core/include" \
  -o "$OUT/interleaved" "$ROOT/backends/mpi/bench/interleaved.cc" \
  -L"$BUILD/lib" -lsyncline -labsl_statusor -labsl_status -Wl,-rpath,"$BUILD/lib"
# shellcheck disable=SC2054  # "vader,self" is one MCA value, not two elements
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1
        --mca btl vader,self --mca oob_tcp_if_include lo
        --mca coll_libnbc_iallreduce_algorithm 1
        -x SYNCLINE_PLUGIN_PATH="$BUILD/lib" -x MASTER_ADDR=127.0.0.1
        -x MASTER_PORT=$((20000 + RANDOM % 20000)))
echo "# start, load $(cut -d' ' -f1-3 /proc/loadavg)"
"${MPIRUN[@]}" "$OUT/interleaved" "$OPS" "$SIZES" "$ROUNDS" > "$OUT/rows.txt"
echo "# end, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT/rows.txt" <<'PY'
import sys
print(f"{'op':<15}{'size':>10}  {'MPI us':>10}  {'Syncline us':>11}  {'added us':>9}  "
      f"{'busbw ratio (min-max)':<24}  rounds >= 0.95")
for line in open(sys.argv[1]):
    op, nbytes, mpi, sl, med, lo, hi, met, rounds = line.split()
    n = int(nbytes)
    size = (f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10
            else f"{n} B")
    added = float(sl) - float(mpi)
    print(f"{op:<15}{size:>10}  {float(mpi):>10.2f}  {float(sl):>11.2f}  {added:>9.2f}  "
          f"{float(med):.3f} ({float(lo):.3f}-{float(hi):.3f}){'':<4}  {met} of {rounds}")
PY
