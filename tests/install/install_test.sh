#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds tests/install/downstream
# against it with find_package(Syncline), runs it on 2 ranks with the
# installed launcher, and checks that the installed plugins are found without
# SYNCLINE_PLUGIN_PATH or LD_LIBRARY_PATH. Also checks the pkg-config file.
# Usage: install_test.sh <source dir> <build dir>
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d /tmp/syncline-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
test -f "$prefix/lib/cmake/Syncline/SynclineConfig.cmake" || { echo "FAILED: no package config"; exit 1; }
ls "$prefix"/lib/syncline/libsyncline-backend-gloo.so > /dev/null || { echo "FAILED: gloo plugin not installed"; exit 1; }
cmake -S "$src/tests/install/downstream" -B "$work/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" ||
  { cat "$work/configure.log"; echo "FAILED: downstream configure"; exit 1; }
cmake --build "$work/build" > "$work/build.log" || { cat "$work/build.log"; echo "FAILED: downstream build"; exit 1; }
out=$(env -u SYNCLINE_PLUGIN_PATH -u LD_LIBRARY_PATH \
      "$prefix/bin/syncline-run" -n 2 -- "$work/build/downstream" 2>&1) || {
  echo "$out"; echo "FAILED: downstream run"; exit 1; }
echo "$out"
echo "$out" | grep -q "downstream rank 0/2 over gloo: OK; plugin search path starts at $prefix/lib" ||
  { echo "FAILED: the installed plugins were not the ones found"; exit 1; }
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs syncline-core | grep -q -- "-lsyncline" ||
  { echo "FAILED: pkg-config syncline-core"; exit 1; }
echo "PASSED: installed package used by a downstream project"
