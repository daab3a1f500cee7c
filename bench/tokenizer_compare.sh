#!/usr/bin/env bash
# Encode throughput of our tokenizer next to its reference library, same text, same run: Hugging
# Face `tokenizers` for a tokenizer.json, `tiktoken` for a model directory with a tiktoken.model
# (Kimi's pattern). Needs python3 with that library for the peer figure (omitted when unavailable).
# Usage: bench/tokenizer_compare.sh [BUILD_DIR] [TOKENIZER_JSON | MODEL_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tok=${2:-tests/data/tokenizer/llama3_8192/tokenizer.json}
text=$(mktemp)
trap 'rm -f "$text"' EXIT
python3 bench/make_mixed_text.py "$text" >/dev/null
ours=$("$build/bin/tokenizer_bench" "$tok" "$text")
if [ -f "$tok/tiktoken.model" ]; then
  peer_name=tiktoken
  peer_cmd=(python3 bench/tiktoken_encode.py "$tok" "$text")
else
  peer_name=hf_tokenizers
  peer_cmd=(python3 bench/hf_tokenizer_encode.py "$tok" "$text")
fi
if peer=$("${peer_cmd[@]}" 2>/dev/null); then
  python3 - "$ours" "$peer" "$peer_name" <<'PY'
import json, sys
ours, peer, name = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
print(json.dumps({"benchmark": "tokenizer_encode", "ours": ours, name: peer,
                  "ours_over_" + name: round(ours["mb_per_s"] / peer["mb_per_s"], 2),
                  "same_token_count": ours["tokens"] == peer["tokens"]}, indent=1))
PY
else
  echo "{\"benchmark\": \"tokenizer_encode\", \"ours\": $ours, \"$peer_name\": null}"
fi
