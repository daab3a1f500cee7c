#!/usr/bin/env bash
# The CPU kernels and their tests cross-built for aarch64 (the NEON and dot-product targets) and run
# under qemu-user-static: the kernel tests under each Arm target, the table-driven check that
# every target gives the portable bits, that the build compiled both Arm targets, and the
# table-driven backend op test (each binary whole, in two shards: tests/test_functions.cmake).
# Used by tools/test.sh; needs Debian's g++-aarch64-linux-gnu, qemu-user-static and googletest
# (tools/setup.sh installs them).
# Usage: tools/cross_test.sh [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
dir=${CROSS_BUILD_DIR:-build-aarch64}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DLATENTSERVE_KERNELS_ONLY=ON -DLATENTSERVE_CUDA=OFF -DLS_GTEST_SOURCE_DIR=/usr/src/googletest >/dev/null
cmake --build "$dir" -j "$(nproc)" --target kernels_test simd_targets_test simd_build_test thread_pool_test backend_ops_test
ctest --test-dir "$dir" -j "$(nproc)" --no-tests=error --output-on-failure -L kernels "$@"
