#!/usr/bin/env bash
# backends/mpi/bench/latency_8b.sh: what Syncline's mpi backend adds over raw
# MPI for one 8-byte f32 allreduce on 2 ranks (issue 16: at most 1 us).
#
# Alternates launches, raw MPI then Syncline, ROUNDS times, so that a change
# in the machine's load hits both alike, and prints each round's pair, then
# the median, min and max of each and of the added time (Syncline - raw, per
# round). The load average is printed before each round: on a shared
# machine, read the figures with it.
#
# Usage: backends/mpi/bench/latency_8b.sh [ROUNDS=7] [BIN=build/bin] [BIN_B]
#   With BIN_B, a third launch per round runs Syncline from BIN_B (e.g. a
#   copy of another build's bin/ and lib/ side by side), and its added time
#   is reported too: an A/B of two builds under the same load (the two
#   Syncline launches swap order every other round).
#   REPS (default 5): repetitions per launch; each launch's time is their
#   median (the benchmarks' own rule).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROUNDS=${1:-7}
BIN=${2:-build/bin}
BIN_B=${3:-}
REPS=${REPS:-5}
# shellcheck disable=SC2054  # "vader,self" is one MCA value, not two elements
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1
        --mca btl vader,self --mca oob_tcp_if_include lo)
SIZE=(--ops=allreduce --min_bytes=8 --max_bytes=8 --repetitions="$REPS")

# The time column (us) of the 8-byte row of a benchmark's table.
time_of() { awk '!/^#/ && $1 == 8 { print $5; found = 1 } END { exit !found }'; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

syncline() {  # bin dir
  "${MPIRUN[@]}" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$(free_port)" \
    "$1/syncline-bench-collectives" --backends=mpi "${SIZE[@]}" 2>&1 | time_of
}

raw=(); sl=(); slb=()
for ((r = 1; r <= ROUNDS; r++)); do
  echo "# round $r, load $(cut -d' ' -f1-3 /proc/loadavg)"
  raw+=("$("${MPIRUN[@]}" "$BIN/syncline-bench-mpi" --system=mpi-shm "${SIZE[@]}" 2>&1 | time_of)")
  if [ -n "$BIN_B" ] && ((r % 2 == 0)); then  # B first every other round
    slb+=("$(syncline "$BIN_B")")
    sl+=("$(syncline "$BIN")")
  else
    sl+=("$(syncline "$BIN")")
    [ -z "$BIN_B" ] || slb+=("$(syncline "$BIN_B")")
  fi
  line="raw ${raw[-1]} us  syncline ${sl[-1]} us"
  [ -z "$BIN_B" ] || line+="  syncline(B) ${slb[-1]} us"
  echo "$line"
done
echo "# end, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${raw[*]}" "${sl[*]}" "${slb[*]}" <<'PY'
import statistics, sys
raw, sl, slb = ([float(x) for x in a.split()] for a in sys.argv[1:4])
def show(name, xs):
    print(f"{name:<22} median {statistics.median(xs):6.2f} us  min {min(xs):6.2f}  max {max(xs):6.2f}  (n={len(xs)})")
show("raw MPI", raw)
show("syncline-mpi", sl)
show("added (per round)", [s - r for s, r in zip(sl, raw)])
if slb:
    show("syncline-mpi (B)", slb)
    show("added (B, per round)", [s - r for s, r in zip(slb, raw)])
PY
