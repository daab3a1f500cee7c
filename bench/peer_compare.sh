#!/usr/bin/env bash
# Decode throughput side by side with the CPU peer (ik_llama.cpp) on one model, in one run:
# the peer's llama-batched-bench (64-token prompts, 32 generated tokens, 1/8/32 sequences,
# 2 threads; every position feeds token 0), then decode_bench --token0 on the same weights in
# our format, then the peer again to show drift. The model comes from ../shared/tools/peer_model.py.
#   bench/peer_compare.sh PEER_BUILD_DIR MODEL_OUTDIR
# PEER_BUILD_DIR holds bin/llama-batched-bench; MODEL_OUTDIR holds peer.gguf and latentserve/.
set -euo pipefail
peer=${1:?peer build directory}
model=${2:?directory written by peer_model.py}
here=$(cd "$(dirname "$0")/.." && pwd)
run_peer() {
  "$peer/bin/llama-batched-bench" -m "$model/peer.gguf" -c 8192 -b 2048 -ub 512 -npp 64 -ntg 32 -npl 1,8,32 -t 2 \
    2>&1 | grep -E '^\|'
}
echo "== peer (S_TG is decode tokens/s)"
run_peer
echo "== latentserve decode_bench --token0"
"$here/build/bin/decode_bench" --token0 0 "$model/latentserve" 1 8 32
echo "== peer again"
run_peer
