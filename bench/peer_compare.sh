#!/usr/bin/env bash
# The CPU peer (ik_llama.cpp) and LatentServe on one model, in one run: greedy tokens of both on
# three prompts (an external check of the plain-MoE path), then decode throughput side by side:
# the peer's llama-batched-bench (64-token prompts, 32 generated tokens, 1/8/32 sequences,
# 2 threads; every position feeds token 0), decode_bench --token0 on the same weights in our
# format, and the peer again to show drift. The model comes from ../shared/tools/peer_model.py.
#   bench/peer_compare.sh PEER_CHECKOUT MODEL_OUTDIR
# PEER_CHECKOUT is the peer's source tree, built in PEER_CHECKOUT/build (bin/llama-batched-bench,
# src/libllama.so); MODEL_OUTDIR holds peer.gguf and latentserve/.
set -euo pipefail
src=$(realpath "${1:?peer source tree}")
model=$(realpath "${2:?directory written by peer_model.py}")
peer=$src/build
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
cd "$work"  # the peer writes its log file into the working directory
greedy=$work/peer_greedy
g++ -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" "$here/bench/peer_greedy.cc" -L"$peer/src" \
  -L"$peer/ggml/src" -lllama -lggml -Wl,-rpath,"$peer/src:$peer/ggml/src" -o "$greedy"
echo "== greedy tokens, 32 per prompt"
for prompt in 1,100,2000,345,7000,12,999 1,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19 1,4000,4001,17,3,260,261; do
  theirs=$("$greedy" "$model/peer.gguf" 32 ${prompt//,/ } 2>/dev/null)
  # A float32 KV cache: nearest to the peer's F16 one (with auto, a BF16 checkpoint gets a BF16
  # cache, whose rounding moves this random model's nearly flat logits enough to change a token).
  ours=$("$here/build/bin/latentserve-generate" --model "$model/latentserve" --prompt-ids "$prompt" --max-tokens 32 \
    --kv_cache_dtype float32)
  same=0
  IFS=, read -ra a <<<"$theirs"
  IFS=, read -ra b <<<"$ours"
  while [ $same -lt ${#a[@]} ] && [ "${a[$same]}" = "${b[$same]:-}" ]; do same=$((same + 1)); done
  echo "prompt $prompt: $same of ${#a[@]} leading tokens identical"
done
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
