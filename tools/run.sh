#!/usr/bin/env bash
# Builds LatentServe for the CPU and starts the server with the shipped tiny model (or MODEL_DIR):
# OpenAI-compatible HTTP on :8000, gRPC on :50051. Extra arguments go to the server.
# Usage: tools/run.sh [MODEL_DIR] [latentserve flags]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
model=models/tiny
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then model=$1; shift; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATENTSERVE_CUDA=OFF -DLATENTSERVE_BUILD_TESTS=OFF
cmake --build build -j "$(nproc)" --target latentserve
exec build/bin/latentserve --model "$model" "$@"
