#!/usr/bin/env bash
# Builds LatentServe on the CPU and runs greedy generation with a model directory.
# Usage: tools/run.sh [MODEL_DIR] [extra latentserve-generate flags]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
model=${1:-tests/data/fixtures/latent_sigmoid_situ_bf16}
shift || true
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATENTSERVE_CUDA=OFF
cmake --build build -j "$(nproc)" --target latentserve-generate
exec build/bin/latentserve-generate --model "$model" --prompt-ids 1,2,3,4 --max-tokens 16 "$@"
