#!/usr/bin/env bash
# Startup at scale: builds syncline-bench-store-scale and runs run.py (Syncline's
# rendezvous, flat and with node leaders, against PyTorch's TCPStore barrier),
# writing bench/results/store_scale.{csv,png}. Extra arguments go to run.py,
# e.g. --sizes 256,1024 --repeats 1. Run it on a quiet machine: it prints the
# load average first, and each CSV row records it.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${SYNCLINE_BUILD_DIR:-build}
PY=/usr/bin/python3  # Debian's python3-torch and python3-matplotlib live here
if ! "$PY" -c 'import torch, matplotlib' 2>/dev/null; then
  echo "store_scale: installing Debian's python3-torch and python3-matplotlib"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-matplotlib
fi
bash scripts/build.sh syncline-bench-store-scale
# Each simulated rank holds a socket in its worker and one in the server.
ulimit -n "$(ulimit -Hn)"
echo "store_scale: load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, ulimit -n $(ulimit -n)"
mkdir -p bench/results
exec "$PY" bench/store_scale/run.py --binary "$BUILD_DIR/bin/syncline-bench-store-scale" \
  --csv bench/results/store_scale.csv --png bench/results/store_scale.png "$@"
