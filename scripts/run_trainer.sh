#!/usr/bin/env bash
# Sets up a fresh machine, builds the trainer and the launcher, and trains on
# the digits dataset with 2 CPU ranks over the default backend (Gloo).
# Extra arguments go to syncline-train, e.g. --model cnn --epochs 10.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh syncline-run syncline-train syncline-backend-gloo
BUILD_DIR=${SYNCLINE_BUILD_DIR:-build}
exec "$BUILD_DIR/bin/syncline-run" -n 2 -- "$BUILD_DIR/bin/syncline-train" "$@"
