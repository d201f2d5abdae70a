#!/usr/bin/env bash
# backends/mpi/bench/wait_probe.sh: wait_probe.cc's completions (MPI_Wait,
# MPI_Test with a yield every 64 as request_wait does, MPI_Test alone) at
# MPI_Init's and MPI_THREAD_MULTIPLE's level, in interleaved rounds (the
# order rotates), 2 ranks on vader; prints the load average per round, then
# per (size, level, mode) the median (min-max) over the rounds, in us.
#
# Usage: backends/mpi/bench/wait_probe.sh [ROUNDS=8] [MIN_BYTES=1048576]
set -euo pipefail
cd "$(dirname "$0")"
ROUNDS=${1:-8}
MIN=${2:-1048576}
OUT=$(mktemp -d /tmp/wait_probe.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
mpicxx -O2 -o "$OUT/wait_probe" wait_probe.cc
# shellcheck disable=SC2054  # "vader,self" is one MCA value, not two elements
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1
        --mca btl vader,self --mca oob_tcp_if_include lo)
CONFIGS=("0 wait" "1 wait" "1 test" "1 testnoyield" "0 test")
for ((r = 0; r < ROUNDS; r++)); do
  echo "# round $r, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((k = 0; k < ${#CONFIGS[@]}; k++)); do
    # shellcheck disable=SC2086  # a config is two words
    "${MPIRUN[@]}" "$OUT/wait_probe" ${CONFIGS[(k + r) % ${#CONFIGS[@]}]} "$MIN" \
      >> "$OUT/rows.txt" 2> /dev/null
  done
done
echo "# end, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT/rows.txt" <<'PY'
import collections, statistics, sys
times = collections.defaultdict(list)
for line in open(sys.argv[1]):
    level, mode, nbytes, us = line.split()
    times[(int(nbytes), level, mode)].append(float(us))
for key in sorted(times):
    xs = times[key]
    print(f"{key[0]:>9} B  {key[1]:<8} {key[2]:<12} {statistics.median(xs):9.1f} us "
          f"({min(xs):.1f}-{max(xs):.1f})")
PY
