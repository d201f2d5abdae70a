#!/usr/bin/env bash
# Installs the build into a temporary prefix whose name has a space and
# punctuation in it (no comma: GCC's -Wl,-rpath,<dir> would split there), then MOVES the installed tree to another such folder
# (nothing is left at the prefix it was installed to), and checks that the
# moved tree works on its own, without SYNCLINE_PLUGIN_PATH:
#   cmake           a downstream project (tests/install/downstream) found with
#                   find_package, run on 2 ranks with the installed launcher,
#                   then again through its own interposer plugin (built with
#                   syncline_add_plugin and the installed plugin SDK alone);
#                   plus shared-library hygiene (SONAMEs, exported symbols)
#   pkg-config      the same program compiled and linked with
#                   `pkg-config --cflags --libs syncline-core` alone
#   pkg-config-ddp  a DDP program compiled and linked with
#                   `pkg-config --cflags --libs syncline-ddp` alone
#   doctor          syncline-doctor reports the moved plugin folder, after
#                   SYNCLINE_PLUGIN_PATH when that is set
#   python          the moved syncline_torch module runs 2 ranks over
#                   init_process_group("syncline") and finds libsyncline and
#                   the plugins in the moved tree; and the folder it installs
#                   to under the configured prefix is on that Python's
#                   sys.path, so no PYTHONPATH is needed after a real install
#   <file>.sh       a check of its own that a plugin's folder provides (a
#                   backend built alone against the moved tree, as a third
#                   party would: backends/mpi/tests/install_check.sh), sourced
#                   here with src, build, work, prefix and expected_path set
#                   and the functions below at hand; it exits 1 on failure
# Every check of the plugin search path compares it whole with the moved
# tree's lib and lib/syncline: a path fixed at configure or install time
# (a stale /usr/local/lib/syncline, the original prefix) fails it.
# Usage: install_test.sh <source dir> <build dir> <check>
set -euo pipefail
src=$1
build=$2
check=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/syncline install XXXXXX")
trap 'rm -rf "$work"' EXIT
installed="$work/installed here"
cmake --install "$build" --prefix "$installed" > "$work/install.log"
mkdir "$work/moved elsewhere+1"
mv "$installed" "$work/moved elsewhere+1/tree"
prefix=$(realpath "$work/moved elsewhere+1/tree")
expected_path="$prefix/lib:$prefix/lib/syncline"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
unset SYNCLINE_PLUGIN_PATH LD_LIBRARY_PATH

# Runs `$@` on 2 ranks with the moved tree's launcher and checks that both
# ranks reduced correctly over gloo, searching for plugins in the moved tree
# only.
run_downstream() {
  local out
  out=$("$prefix/bin/syncline-run" -n 2 -- "$@" 2>&1) || {
    echo "$out"; echo "FAILED: downstream run of $1"; exit 1; }
  echo "$out"
  for rank in 0 1; do
    # The launcher prefixes each line with its rank.
    grep -qxF "[rank $rank] downstream rank $rank/2 over gloo: OK; plugin search path $expected_path" \
      <<< "$out" || {
      echo "FAILED: rank $rank did not reduce over the moved tree's plugins (search path" \
           "expected: $expected_path)"
      exit 1; }
  done
}

# Configures and builds tests/install/downstream against the moved tree into
# $work/build (the program $work/build/downstream and its count interposer).
build_downstream() {
  cmake -S "$src/tests/install/downstream" -B "$work/build" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" ||
    { cat "$work/configure.log"; echo "FAILED: downstream configure"; exit 1; }
  cmake --build "$work/build" > "$work/build.log" || { cat "$work/build.log"; echo "FAILED: downstream build"; exit 1; }
}

# Configures and builds the plugin folder `$1` (relative to the source tree)
# alone, as a project of its own against the moved tree, into $work/$2, and
# checks that its $2 library (libsyncline-$2.so: backend-<name> or
# plugin-<name>) exports its entry point `$3` and nothing else.
build_plugin_alone() {
  local folder=$1 lib="$work/$2/libsyncline-$2.so" exported
  cmake -S "$src/$folder" -B "$work/$2" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" 2>&1 ||
    { cat "$work/configure.log"; echo "FAILED: configuring $folder alone"; exit 1; }
  cmake --build "$work/$2" > "$work/build.log" 2>&1 ||
    { cat "$work/build.log"; echo "FAILED: building $folder alone"; exit 1; }
  [ -f "$lib" ] || { echo "FAILED: $folder built no $lib"; exit 1; }
  exported=$(nm -D --defined-only "$lib" | awk '{print $3}')
  [ "$exported" = "$3" ] ||
    { echo "FAILED: $folder's plugin exports more than its entry point $3: $exported"; exit 1; }
}

# Compiles and links `$2` into `$3` with pkg-config's flags for `$1` alone.
# pkg-config escapes the spaces in the moved prefix with backslashes, as a
# Makefile's shell expects, so the command line goes through eval.
compile_with_pkg_config() {
  local flags
  flags=$(pkg-config --cflags --libs "$1") || { echo "FAILED: pkg-config $1"; exit 1; }
  echo "pkg-config --cflags --libs $1: $flags"
  eval "c++ -std=c++17 -o \"\$3\" \"\$2\" $flags" > "$work/compile.log" 2>&1 || {
    cat "$work/compile.log"; echo "FAILED: compiling $2 with pkg-config $1 alone"; exit 1; }
}

case $check in
cmake)
  test -f "$prefix/lib/cmake/Syncline/SynclineConfig.cmake" || { echo "FAILED: no package config"; exit 1; }
  ls "$prefix"/lib/syncline/libsyncline-backend-gloo.so > /dev/null || { echo "FAILED: gloo plugin not installed"; exit 1; }
  build_downstream
  run_downstream "$work/build/downstream"
  # The project's own interposer, built with syncline_add_plugin against the
  # installed plugin SDK alone: it exports its entry point and nothing else,
  # and the core loads it from SYNCLINE_PLUGIN_PATH and stacks it on gloo.
  count_plugin="$work/build/libsyncline-plugin-count.so"
  [ -f "$count_plugin" ] || { echo "FAILED: downstream plugin not built: $count_plugin"; exit 1; }
  exported=$(nm -D --defined-only "$count_plugin" | awk '{print $3}')
  [ "$exported" = "syncline_interposer_plugin_v2" ] ||
    { echo "FAILED: the downstream plugin exports more than its entry point: $exported"; exit 1; }
  out=$(SYNCLINE_PLUGIN_PATH="$work/build" SYNCLINE_PLUGINS=count \
        "$prefix/bin/syncline-run" -n 2 -- "$work/build/downstream" 2>&1) || {
    echo "$out"; echo "FAILED: downstream run with its own plugin"; exit 1; }
  echo "$out"
  for rank in 0 1; do
    grep -qF "[rank $rank] count interposer: rank $rank/2 posted 1 op over gloo" <<< "$out" &&
      grep -qF "[rank $rank] downstream rank $rank/2 over gloo: OK" <<< "$out" || {
      echo "FAILED: rank $rank did not reduce through the downstream plugin"; exit 1; }
  done
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
  ;;
pkg-config)
  compile_with_pkg_config syncline-core "$src/tests/install/downstream/main.cc" "$work/downstream"
  # pkg-config gives no RPATH: the program finds libsyncline as such programs
  # do, and the plugins from libsyncline's own folder.
  LD_LIBRARY_PATH="$prefix/lib" run_downstream "$work/downstream"
  plugindir=$(pkg-config --variable=plugindir syncline-core)
  eval "test -f $plugindir/libsyncline-backend-gloo.so" ||
    { echo "FAILED: pkg-config's plugindir ($plugindir) has no gloo plugin"; exit 1; }
  ;;
pkg-config-ddp)
  compile_with_pkg_config syncline-ddp "$src/tests/install/downstream/ddp_main.cc" "$work/downstream_ddp"
  out=$(LD_LIBRARY_PATH="$prefix/lib" "$prefix/bin/syncline-run" -n 2 -- "$work/downstream_ddp" 2>&1) || {
    echo "$out"; echo "FAILED: downstream DDP run"; exit 1; }
  echo "$out"
  for rank in 0 1; do
    grep -q "^\[rank $rank\] downstream ddp rank $rank/2: OK" <<< "$out" ||
      { echo "FAILED: rank $rank of the DDP program"; exit 1; }
  done
  ;;
doctor)
  # `$@`: environment assignments for the doctor.
  doctor_json() {
    env "$@" "$prefix/bin/syncline-doctor" --json ||
      { echo "FAILED: syncline-doctor $*" >&2; exit 1; }
  }
  # `$1`: a Python expression of the report `d` read from stdin.
  field() { python3 -c "import json, sys; d = json.load(sys.stdin); print($1)"; }
  report=$(doctor_json)
  path=$(field 'd["plugin_path"]' <<< "$report")
  echo "syncline-doctor plugin_path: $path"
  [ "$path" = "$expected_path" ] ||
    { echo "FAILED: syncline-doctor's plugin search path is not the moved tree's: $expected_path"; exit 1; }
  gloo=$(field '[b["loaded"] for b in d["backends"] if b["name"] == "gloo"]' <<< "$report")
  [ "$gloo" = "[True]" ] || { echo "FAILED: syncline-doctor did not load gloo from the moved tree"; exit 1; }
  # SYNCLINE_PLUGIN_PATH still comes first.
  mkdir "$work/extra plugins"
  path=$(doctor_json SYNCLINE_PLUGIN_PATH="$work/extra plugins" | field 'd["plugin_path"]')
  [ "$path" = "$work/extra plugins:$expected_path" ] ||
    { echo "FAILED: with SYNCLINE_PLUGIN_PATH, the plugin search path is $path"; exit 1; }
  ;;
python)
  cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
  py=$(cache SYNCLINE_PYTHON_EXECUTABLE)
  pydir=$(cache SYNCLINE_PYTHON_INSTALL_DIR)
  configured="$(cache CMAKE_INSTALL_PREFIX)/$pydir"
  "$py" -c "import sys; sys.exit(sys.argv[1] not in sys.path)" "$configured" ||
    { echo "FAILED: $py does not look in $configured, where syncline_torch installs"; exit 1; }
  test -f "$prefix/$pydir/syncline_torch/__init__.py" ||
    { echo "FAILED: syncline_torch not installed in $prefix/$pydir"; exit 1; }
  out=$(cd "$work" && PYTHONPATH="$prefix/$pydir" SYNCLINE_BACKEND=gloo \
        "$py" "$src/tests/python/ranks.py" 2 "$src/tests/python/init_methods_test.py" env 2>&1) ||
    { echo "$out"; echo "FAILED: 2 ranks over the installed syncline_torch"; exit 1; }
  echo "$out"
  grep -qF "reduced over syncline ($prefix/$pydir/syncline_torch/__init__.py)" <<< "$out" ||
    { echo "FAILED: the run did not use the moved tree's syncline_torch"; exit 1; }
  loaded=$(cd "$work" && PYTHONPATH="$prefix/$pydir" "$py" -c "import syncline_torch
print(*{l.split(None, 5)[5].strip() for l in open('/proc/self/maps') if 'libsyncline.so' in l})")
  [ "$(realpath "$loaded")" = "$(realpath "$prefix/lib/libsyncline.so.0")" ] ||
    { echo "FAILED: syncline_torch loaded libsyncline from '$loaded', not the moved tree"; exit 1; }
  ;;
*.sh)
  # shellcheck source=/dev/null
  source "$check"
  ;;
*)
  echo "usage: install_test.sh <source dir> <build dir> cmake|pkg-config|pkg-config-ddp|doctor|python|<check>.sh"
  exit 2
  ;;
esac
echo "PASSED: $check, from an installed tree moved to $prefix"
