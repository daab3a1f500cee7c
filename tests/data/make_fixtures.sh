#!/usr/bin/env bash
# Regenerates every model fixture under tests/data/fixtures/ from the PyTorch reference (deterministic).
# Usage: bash tests/data/make_fixtures.sh   (needs python3 with torch and numpy)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ref="$here/../../models/reference"
out="$here/fixtures"
py="${PYTHON:-python3}"

presets=(
  latent_sigmoid_situ_bf16
  plain_softmax_silu_tied_f32
  latent_softmax_situ_hd12_f16
  plain_sigmoid_silu_shared_hd24_bf16_sharded
  latent_sigmoid_silu_norm_f32
  router_ties_sigmoid_f32
)

seed=1
for name in "${presets[@]}"; do
  rm -rf "${out:?}/$name"
  "$py" "$ref/make_random_model.py" "$out/$name" --preset "$name" --seed "$seed"
  "$py" "$ref/make_goldens.py" "$out/$name"
  seed=$((seed + 1))
done
