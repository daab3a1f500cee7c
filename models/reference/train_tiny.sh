#!/usr/bin/env bash
# Re-trains and re-exports the shipped tiny model (models/tiny) and its test vectors (tests/data/tiny).
# Usage: bash models/reference/train_tiny.sh [--compare]
#   default:   tokenizer -> Quantile Balancing training -> export + reference checks -> calibration vectors
#   --compare: also the same-step runs with an auxiliary balance loss and with no balancing, the
#              comparison plot docs/quantile-balancing.png and its table (build-tiny/table.md)
# Needs a python with torch, numpy and tokenizers==0.23.3 (PYTHON, default /usr/bin/python3) and the
# Debian bible-kjv reader. Work files (token ids, checkpoints, logs) go to WORK (default build-tiny/);
# STEPS (default 400), MODEL_OUT, TESTS_OUT and DOCS_OUT override the step count and the output folders.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
ref="$root/models/reference"
py="${PYTHON:-/usr/bin/python3}"
work="${WORK:-$root/build-tiny}"
steps="${STEPS:-400}"
model_out="${MODEL_OUT:-$root/models/tiny}"
tests_out="${TESTS_OUT:-$root/tests/data/tiny}"
docs_out="${DOCS_OUT:-$root/docs}"
compare=0
[[ "${1:-}" == "--compare" ]] && compare=1

# One thread everywhere; Debian's serial OpenBLAS, when installed, is ~6x faster than the reference BLAS.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
blas=/usr/lib/x86_64-linux-gnu/openblas-serial
[[ -d "$blas" ]] && export LD_LIBRARY_PATH="$blas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

mkdir -p "$work" "$docs_out"
"$py" "$ref/train.py" tokenizer --work "$work"
runs=(qb)
((compare)) && runs+=(aux none)
for run in "${runs[@]}"; do
  "$py" "$ref/train.py" train --work "$work" --run "$run" --balance "$run" --steps "$steps" --minutes 60 \
      --eval-every 100 > "$work/$run.out"
  tail -n 1 "$work/$run.out"
done

extra=()
((compare)) && extra=(--compare aux none)
"$py" "$ref/export_tiny.py" --work "$work" --run qb --out "$model_out" --tests "$tests_out" "${extra[@]}"
"$py" "$ref/quantile_balancing.py" vectors --out-dir "$tests_out/calibration" \
    --model "latent_sigmoid_situ_bf16=$root/tests/data/fixtures/latent_sigmoid_situ_bf16=tests/data/fixtures/latent_sigmoid_situ_bf16" \
    --model "tiny=$model_out=models/tiny" --with-scores latent_sigmoid_situ_bf16
if ((compare)); then
  "$py" "$ref/train.py" plot --work "$work" --runs qb aux none --out "$docs_out/quantile-balancing.png" \
      --table "$work/table.md"
fi
