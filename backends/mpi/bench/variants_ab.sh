#!/usr/bin/env bash
# backends/mpi/bench/variants_ab.sh: the mpi backend's variants (backend
# options, e.g. an own algorithm against libnbc) and builds against raw MPI
# for one op, in interleaved rounds on this host.
#
# Each round runs a raw `mpi-shm` launch (OpenMPI's blocking collective,
# vader), then one syncline-bench-collectives job per bin dir with every
# variant in it (their repetitions interleaved within the job); the order of
# the launches rotates each round, so a change in the machine's load falls
# on all alike. Prints the load average before each round, then per size the
# median (min-max) time of each system over the rounds and its median
# busbw's ratio to mpi-shm's; with two bin dirs, also the second build's
# time over the first's, paired round by round.
#
# Usage: backends/mpi/bench/variants_ab.sh OP ROUNDS MIN MAX NP BINS VARIANT...
#   OP        allreduce, allgather, broadcast or reduce_scatter
#   BINS      bin dirs, comma separated (build/bin, or build/bin,/tmp/old/bin
#             for an A/B of two builds: a copy of another build's bin/ and
#             lib/ side by side); the first also runs mpi-shm
#   VARIANT   LABEL:"k=v;..." as syncline-bench-collectives' --variant
#   REPS (default 5): repetitions per launch, their median the sample.
#   NB=1: also a raw `mpi-shm-nb` launch each round (MPI's non-blocking
#   call and MPI_Wait: the call this backend makes, or made, for the op).
# Example: variants_ab.sh broadcast 5 64K 64M 2 build/bin \
#            libnbc:broadcast_own_max=0 own:
set -euo pipefail
cd "$(dirname "$0")/../../.."
OP=$1 ROUNDS=$2 MIN=$3 MAX=$4 NP=$5 BINS=$6
shift 6
REPS=${REPS:-5}
# shellcheck disable=SC2054  # "vader,self" is one MCA value, not two elements
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np "$NP" --mca pml ob1
        --mca btl vader,self --mca oob_tcp_if_include lo)
SIZE=(--ops="$OP" --min_bytes="$MIN" --max_bytes="$MAX" --repetitions="$REPS")
VARIANTS=()
for v in "$@"; do VARIANTS+=(--variant="$v"); done
IFS=, read -r -a BIN_DIRS <<< "$BINS"
OUT=$(mktemp -d /tmp/variants_ab.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
launch() {  # index round
  local i=$1 r=$2
  if ((i == n - 1)) && [ "${NB:-0}" = 1 ]; then
    "${MPIRUN[@]}" "${BIN_DIRS[0]}/syncline-bench-mpi" --system=mpi-shm-nb --nonblocking \
      "${SIZE[@]}" --json="$OUT/r$r-nb.json" > "$OUT/r$r-nb.log" 2>&1
  elif ((i == 0)); then
    "${MPIRUN[@]}" "${BIN_DIRS[0]}/syncline-bench-mpi" --system=mpi-shm "${SIZE[@]}" \
      --json="$OUT/r$r-raw.json" > "$OUT/r$r-raw.log" 2>&1
  else
    local bin=${BIN_DIRS[i - 1]}
    "${MPIRUN[@]}" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$(free_port)" \
      "$bin/syncline-bench-collectives" --backends=mpi "${SIZE[@]}" "${VARIANTS[@]}" \
      --json="$OUT/r$r-b$i.json" > "$OUT/r$r-b$i.log" 2>&1
  fi || { echo "variants_ab: launch $i of round $r failed:" >&2; tail -5 "$OUT/r$r-"*.log >&2; exit 1; }
}
n=$((${#BIN_DIRS[@]} + 1))
[ "${NB:-0}" != 1 ] || n=$((n + 1))
for ((r = 0; r < ROUNDS; r++)); do
  echo "# round $r, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((k = 0; k < n; k++)); do launch $(((k + r) % n)) "$r"; done
done
echo "# end, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT" "$BINS" <<'PY'
import glob, json, os, statistics, sys
out, bins = sys.argv[1], sys.argv[2].split(",")
times = {}  # (system, bytes) -> [us per round]
for path in sorted(glob.glob(os.path.join(out, "r*.json"))):
    which = os.path.basename(path).split("-")[1][:-5]
    for row in json.load(open(path))["rows"]:
        system = row["system"]
        if which.startswith("b") and len(bins) > 1:
            system += " [" + bins[int(which[1:]) - 1] + "]"
        times.setdefault((system, row["bytes"]), []).append(row["time_us"])
for nbytes in sorted({b for _, b in times}):
    raw = times.get(("mpi-shm", nbytes))
    print(f"{nbytes} B")
    for (system, b), xs in sorted(times.items()):
        if b != nbytes:
            continue
        line = f"  {system:<40} {statistics.median(xs):10.1f} us ({min(xs):.1f}-{max(xs):.1f})"
        if raw and system != "mpi-shm":
            line += f"  {statistics.median(raw) / statistics.median(xs):.2f}x mpi-shm"
            per_round = sorted(r / x for r, x in zip(raw, xs))
            line += f" (rounds {per_round[0]:.2f}-{per_round[-1]:.2f})"
        print(line)
    if len(bins) == 2:  # two builds: the second's time over the first's, round by round
        for (system, b), xs in sorted(times.items()):
            other = (system.replace("[" + bins[0] + "]", "[" + bins[1] + "]"), b)
            if b == nbytes and system.endswith("[" + bins[0] + "]") and other in times:
                ratios = sorted(y / x for x, y in zip(xs, times[other]))
                print(f"  {bins[1]} / {bins[0]} time, per round: median "
                      f"{statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})")
PY
