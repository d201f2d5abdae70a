#!/usr/bin/env bash
# mpi.train: syncline-train on 2 mpirun ranks over the mpi backend for 2
# epochs. Checks that it trains (the train loss falls from epoch 1 to 2 and
# the validation accuracy ends above 80%), and that its final parameters
# equal those of the same run over gloo (syncline-run -n 2): two ranks'
# gradients summed and halved are the same floats whichever transport adds
# them.
# Usage: train_test.sh <build bin dir>
set -euo pipefail
bin=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/syncline-mpi-train-XXXXXX")
trap 'rm -rf "$work"' EXIT
args=(--epochs=2 --seed=7)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mpi_out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe --bind-to none -np 2 --mca btl self,vader --mca oob_tcp_if_include lo \
    -x SYNCLINE_BACKEND=mpi -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
    "$bin/syncline-train" "${args[@]}" --save-params="$work/mpi.bin" 2>&1) ||
  { echo "$mpi_out"; echo "FAILED: syncline-train over mpi under mpirun"; exit 1; }
# The progress bar's carriage returns and erase-line codes, taken out.
lines() { tr '\r' '\n' <<< "$1" | sed 's/\x1b\[K//g'; }
lines "$mpi_out" | grep -v '^epoch .*\[' || true
loss() { lines "$1" | sed -n "s|^epoch $2/2  train loss \([0-9.]*\) .*backend $3 x2$|\1|p"; }
first=$(loss "$mpi_out" 1 mpi)
second=$(loss "$mpi_out" 2 mpi)
[ -n "$first" ] && [ -n "$second" ] ||
  { echo "FAILED: no 'epoch N/2 train loss ... backend mpi x2' lines"; exit 1; }
python3 -c "import sys; sys.exit(not float('$second') < float('$first'))" ||
  { echo "FAILED: the train loss did not fall over mpi: $first -> $second"; exit 1; }
acc=$(lines "$mpi_out" | sed -n 's|^done: .*, val acc \([0-9.]*\)% .*backend mpi.*|\1|p')
python3 -c "import sys; sys.exit(not float('${acc:-0}') > 80)" ||
  { echo "FAILED: validation accuracy over mpi is ${acc:-missing}%, not above 80%"; exit 1; }
gloo_out=$(SYNCLINE_BACKEND=gloo "$bin/syncline-run" -n 2 -- \
  "$bin/syncline-train" "${args[@]}" --save-params="$work/gloo.bin" 2>&1) ||
  { echo "$gloo_out"; echo "FAILED: the same run over gloo"; exit 1; }
python3 - "$work/mpi.bin" "$work/gloo.bin" <<'PY' || exit 1
import array, sys
a, b = (array.array("f", open(p, "rb").read()) for p in sys.argv[1:])
worst = max((abs(x - y) for x, y in zip(a, b)), default=0.0)
print(f"{len(a)} parameters; largest difference mpi vs gloo: {worst:g}")
if len(a) != len(b) or len(a) == 0 or worst > 1e-5:
    sys.exit("FAILED: the mpi run's parameters differ from gloo's")
PY
echo "PASSED: trained over mpi (train loss $first -> $second, val acc $acc%), parameters equal to gloo's"
