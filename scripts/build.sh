#!/usr/bin/env bash
# Configures and builds Syncline into build/ (Ninja, ccache, -j2 by default).
# Usage: scripts/build.sh [ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SYNCLINE_BUILD_DIR:-build}
JOBS=${SYNCLINE_JOBS:-2}
# Share the compiler cache between clones of the repository.
export CCACHE_BASEDIR="$PWD"
export CCACHE_NOHASHDIR=1
# CI builds with warnings as errors (SYNCLINE_WERROR); elsewhere they are
# shown and the build goes on.
WERROR=OFF
if [ "${CI:-}" = true ] || [ "${SYNCLINE_WERROR:-}" = ON ]; then WERROR=ON; fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSYNCLINE_BUILD_TESTS=ON -DSYNCLINE_BUILD_BENCH=ON -DSYNCLINE_WERROR="$WERROR"
elif [ "$WERROR" = ON ]; then
  cmake -S . -B "$BUILD_DIR" -DSYNCLINE_WERROR=ON > /dev/null
fi
cmake --build "$BUILD_DIR" -j "$JOBS" ${1:+--target "$@"}
