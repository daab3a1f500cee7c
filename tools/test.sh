#!/usr/bin/env bash
# Builds everything (CUDA kernels too when nvcc is present) and runs the whole test suite:
# unit and model tests, the server driven over the network, deployment checks and a 2-minute
# soak; then the suite again under ASan+UBSan and its threaded parts under TSan
# (tools/sanitize.sh), and each libFuzzer target for 30 s (tools/fuzz.sh).
# LATENTSERVE_QUICK=1 stops after the first ctest run.
# Usage: tools/test.sh [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: key compilations on paths relative to the checkout, so any clone reuses the cache.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
tools/setup.sh
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"
# The integration tests' Python environment (the build's python_env target prepares it too, but
# only as far as it can; here a failure stops the run).
tools/python_env.sh "$build/venv"
ctest --test-dir "$build" -j "$(nproc)" --output-on-failure "$@"
if [ "${LATENTSERVE_QUICK:-0}" != 1 ]; then
  tools/sanitize.sh address thread
  tools/fuzz.sh 30
fi
