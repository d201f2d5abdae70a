#!/usr/bin/env bash
# backends/mpi/bench/paired_rounds.sh: syncline-mpi against raw MPI (issue 16:
# within 5% of raw MPI's busbw from 64 KiB up), paired by round.
#
# Each round launches mpi-shm (raw blocking collectives), mpi-shm-nb (raw
# non-blocking ones + MPI_Wait) and syncline-mpi once each, in an order that
# rotates by one every round, with the same mpirun options and libnbc setting
# as bench/compare/run.sh. Every launch measures allreduce, allgather,
# reduce_scatter and broadcast, 8 B to 64 MiB by 4, REPS repetitions (its
# figure is their median). The report takes each round's syncline-mpi /
# mpi-shm busbw ratio (both from the same round, so a change in the machine
# hits both) and prints, per op and size, the median and range of those
# ratios and in how many rounds the ratio was at least 0.95; then the time
# an 8-byte allreduce adds, per round. The load average is printed per round.
#
# Usage: backends/mpi/bench/paired_rounds.sh [ROUNDS=20] [REPS=5] [OUT=mktemp]
set -euo pipefail
cd "$(dirname "$0")/../../.."
ROUNDS=${1:-20}
REPS=${2:-5}
OUT=${3:-$(mktemp -d /tmp/paired_rounds.XXXXXX)}
BIN=build/bin
mkdir -p "$OUT"
# shellcheck disable=SC2054  # "vader,self" is one MCA value, not two elements
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1
        --mca btl vader,self --mca oob_tcp_if_include lo)
NBC=(--mca coll_libnbc_iallreduce_algorithm 1)  # as backends/mpi/bench_rows.sh
# shellcheck disable=SC2054  # the op list is one flag value
CASES=(--ops=allreduce,allgather,reduce_scatter,broadcast --min_bytes=8 --max_bytes=64M
       --factor=4 --repetitions="$REPS")
SYSTEMS=(shm nb syncline)
run() {  # run SYSTEM ROUND
  local json="$OUT/r$2.$1.json"
  case $1 in
    shm) "${MPIRUN[@]}" "$BIN/syncline-bench-mpi" --system=mpi-shm "${CASES[@]}" --json="$json" ;;
    nb) "${MPIRUN[@]}" "${NBC[@]}" "$BIN/syncline-bench-mpi" --system=mpi-shm-nb --nonblocking \
          "${CASES[@]}" --json="$json" ;;
    syncline)
      local port
      port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      "${MPIRUN[@]}" "${NBC[@]}" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
        "$BIN/syncline-bench-collectives" --backends=mpi "${CASES[@]}" --json="$json" ;;
  esac > "$OUT/r$2.$1.log" 2>&1 || { echo "round $2: $1 failed, see $OUT/r$2.$1.log" >&2; exit 1; }
}
for ((r = 0; r < ROUNDS; r++)); do
  echo "# round $r, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((k = 0; k < ${#SYSTEMS[@]}; k++)); do run "${SYSTEMS[(k + r) % ${#SYSTEMS[@]}]}" "$r"; done
done
echo "# end, load $(cut -d' ' -f1-3 /proc/loadavg); raw rows in $OUT"
python3 - "$OUT" <<'PY'
import collections, glob, json, re, statistics, sys
busbw = collections.defaultdict(dict)  # (system, op, bytes) -> {round: GB/s}
for path in glob.glob(sys.argv[1] + "/r*.json"):
    rnd, system = re.match(r".*/r(\d+)\.(\w+)\.json$", path).groups()
    for row in json.load(open(path))["rows"]:
        if row["wrong"]:
            sys.exit(f"{path}: {row['wrong']} wrong elements in {row['op']} {row['bytes']} B")
        busbw[(system, row["op"], row["bytes"])][int(rnd)] = row["busbw"]
def human(n):
    return next((f"{n // u} {s}" for u, s in ((1 << 20, "MiB"), (1 << 10, "KiB")) if n >= u), f"{n} B")
def spread(xs):
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
for op in ("allreduce", "allgather", "reduce_scatter", "broadcast"):
    print(f"\n{op}: syncline-mpi / mpi-shm busbw, paired by round")
    print("| size | mpi-shm GB/s | syncline-mpi GB/s | ratio, median (min-max) | rounds >= 0.95 | / mpi-shm-nb |")
    print("|---|---|---|---|---|---|")
    for size in sorted({k[2] for k in busbw if k[1] == op}):
        raw, ours, nb = (busbw[(s, op, size)] for s in ("shm", "syncline", "nb"))
        ratios = [ours[r] / raw[r] for r in sorted(raw.keys() & ours.keys())]
        to_nb = [ours[r] / nb[r] for r in sorted(nb.keys() & ours.keys())]
        print(f"| {human(size)} | {statistics.median(raw.values()):.3g} | "
              f"{statistics.median(ours.values()):.3g} | {spread(ratios)} | "
              f"{sum(x >= 0.95 for x in ratios)}/{len(ratios)} | {statistics.median(to_nb):.2f} |")
# 2 ranks: an allreduce's busbw is its algbw, so its time is bytes / busbw.
raw, ours = busbw[("shm", "allreduce", 8)], busbw[("syncline", "allreduce", 8)]
us = lambda gbps: 8 / gbps / 1e3
added = [us(ours[r]) - us(raw[r]) for r in sorted(raw.keys() & ours.keys())]
print(f"\n8 B allreduce: Syncline adds {spread(added)} us per round "
      f"(mpi-shm {statistics.median(map(us, raw.values())):.2f} us)")
PY
