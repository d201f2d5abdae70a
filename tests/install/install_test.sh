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
grep -q "downstream rank 0/2 over gloo: OK; plugin search path starts at $prefix/lib" <<< "$out" ||
  { echo "FAILED: the installed plugins were not the ones found"; exit 1; }
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs syncline-core)
grep -q -- "-lsyncline" <<< "$flags" ||
  { echo "FAILED: pkg-config syncline-core"; exit 1; }
# Shared-library hygiene: versioned SONAMEs, and none of the static or private
# dependencies (spdlog, fmt, absl, gloo) exported. (libtorch marks its own
# classes visible, so their inline members may appear in libsyncline_ddp.)
for lib in libsyncline.so libsyncline_ddp.so; do
  [ -f "$prefix/lib/$lib" ] || continue
  # Capture first: with pipefail, `grep -q` closing the pipe early would
  # fail the producer with SIGPIPE.
  dynamic=$(readelf -d "$prefix/lib/$lib")
  grep -q "SONAME.*$lib\.0" <<< "$dynamic" || { echo "FAILED: $lib has no versioned SONAME"; exit 1; }
  leaked=$(nm -D --defined-only "$prefix/lib/$lib" | c++filt | cut -d' ' -f3- |
           grep -E "^(spdlog|fmt|absl|gloo)::" | head -3 || true)
  [ -z "$leaked" ] || { echo "FAILED: $lib exports its dependencies' symbols: $leaked"; exit 1; }
done
exported=$(nm -D --defined-only "$prefix/lib/libsyncline.so" | c++filt)
grep -q "syncline::Communicator::Create" <<< "$exported" ||
  { echo "FAILED: libsyncline.so does not export syncline::Communicator::Create"; exit 1; }
echo "PASSED: installed package used by a downstream project"
