#!/usr/bin/env bash
# The UCX backend's switch points, measured: every op with a switch point
# (allreduce, broadcast, reduce, allgather, reduce_scatter) on 2, 3 and 4
# ranks of this machine, sizes by 2, with the latency algorithm forced
# (every *_small_max = 1 GiB, rows "syncline-ucx/small") and the bandwidth
# algorithm forced (every *_small_max = 0, "syncline-ucx/large") in one job,
# their repetitions interleaved (syncline-bench-collectives --variant), so
# load changes hit both alike. bench/model/switch_points.py reads the JSON.
#
# Usage: bench/model/sweep_switch_points.sh BIN_DIR OUT.json
#   [SWEEP_MIN_BYTES=64] [SWEEP_MAX_BYTES=16M] [SWEEP_REPETITIONS=7]
#   [SWEEP_WORLD_SIZES=2,3,4]
set -euo pipefail
BIN=$1
OUT=$2
SMALL="allreduce_small_max=1g;broadcast_small_max=1g;reduce_small_max=1g"
SMALL+=";allgather_small_max=1g;reduce_scatter_small_max=1g"
LARGE="allreduce_small_max=0;broadcast_small_max=0;reduce_small_max=0"
LARGE+=";allgather_small_max=0;reduce_scatter_small_max=0"
exec "$BIN/syncline-bench-collectives" --backends=ucx \
  --world_sizes="${SWEEP_WORLD_SIZES:-2,3,4}" \
  --ops=allreduce,broadcast,reduce,allgather,reduce_scatter \
  --min_bytes="${SWEEP_MIN_BYTES:-64}" --max_bytes="${SWEEP_MAX_BYTES:-16M}" --factor=2 \
  --repetitions="${SWEEP_REPETITIONS:-7}" \
  --variant="small:$SMALL" --variant="large:$LARGE" --json="$OUT"
