#!/usr/bin/env bash
# Installs every Debian package Syncline needs to build, test and benchmark.
# Safe to re-run: packages already present are skipped by apt.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libabsl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgloo-dev libucx-dev
  libtorch-dev libopenblas-dev
  iproute2 procps zlib1g-dev
  clang libclang-rt-14-dev
  python3-torch python3-dev pybind11-dev openmpi-bin libopenmpi-dev python3-matplotlib
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Debian's libtorch uses whatever BLAS the alternatives point to; the reference
# BLAS is ~8x slower than OpenBLAS. Point libblas/liblapack at OpenBLAS.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
for lib in libblas.so.3 liblapack.so.3; do
  target=$(ls /usr/lib/"$arch"/openblas-pthread/"$lib" 2>/dev/null || true)
  if [ -n "$target" ]; then
    $SUDO update-alternatives --set "$lib-$arch" "$target" >/dev/null 2>&1 || true
  fi
done
echo "setup: all packages present"
