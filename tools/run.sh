#!/usr/bin/env bash
# Builds LatentServe for the CPU and starts the server with the shipped tiny model (or MODEL_DIR):
# OpenAI-compatible HTTP on :8000, gRPC on :50051. Extra arguments go to the server.
# Installs only what the server needs (tools/setup.sh run) and builds only the server.
# LS_CONFIGURE_ONLY=1 configures the build directory and stops (the two-commands test).
# Usage: tools/run.sh [MODEL_DIR] [latentserve flags]
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
build=${BUILD_DIR:-build}
[ "${LS_CONFIGURE_ONLY:-0}" = 1 ] || tools/setup.sh run
model=models/tiny
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then model=$1; shift; fi
# native: only the CPU kernel targets this machine runs (on an AVX2-only CPU the AVX-512 ones, an
# eighth of the build's compile time, are left out); tools/test.sh builds every target.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATENTSERVE_CUDA=OFF -DLATENTSERVE_BUILD_TESTS=OFF \
  -DLATENTSERVE_SIMD_TARGETS=native
[ "${LS_CONFIGURE_ONLY:-0}" = 1 ] && exit 0
cmake --build "$build" -j "$(nproc)" --target latentserve
exec "$build/bin/latentserve" --model "$model" "$@"
