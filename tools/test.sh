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
# Python environment for the external-client tests: Debian's pytest/grpcio/requests plus, from
# PyPI, the `openai` package and gRPC's health/reflection client stubs (matching Debian's grpcio).
if [ ! -x "$build/venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$build/venv"
fi
if ! "$build/venv/bin/python" -c "import openai, grpc_health.v1, grpc_reflection.v1alpha" 2>/dev/null; then
  "$build/venv/bin/pip" install -q --disable-pip-version-check openai
  "$build/venv/bin/pip" install -q --disable-pip-version-check --no-deps \
    grpcio-health-checking==1.51.1 grpcio-reflection==1.51.1
fi
ctest --test-dir "$build" -j "$(nproc)" --output-on-failure "$@"
if [ "${LATENTSERVE_QUICK:-0}" != 1 ]; then
  tools/sanitize.sh address thread
  tools/fuzz.sh 30
fi
