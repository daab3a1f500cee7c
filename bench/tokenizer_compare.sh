#!/usr/bin/env bash
# Encode throughput of our tokenizer next to Hugging Face `tokenizers`, same text, same run.
# Needs python3 with `tokenizers` for the peer figure (omitted when unavailable).
# Usage: bench/tokenizer_compare.sh [BUILD_DIR] [TOKENIZER_JSON]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tok=${2:-tests/data/tokenizer/llama3_8192/tokenizer.json}
text=$(mktemp)
trap 'rm -f "$text"' EXIT
python3 bench/make_mixed_text.py "$text" >/dev/null
ours=$("$build/bin/tokenizer_bench" "$tok" "$text")
if hf=$(python3 bench/hf_tokenizer_encode.py "$tok" "$text" 2>/dev/null); then
  python3 - "$ours" "$hf" <<'PY'
import json, sys
ours, hf = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({"benchmark": "tokenizer_encode", "ours": ours, "hf_tokenizers": hf,
                  "ours_over_hf": round(ours["mb_per_s"] / hf["mb_per_s"], 2)}, indent=1))
PY
else
  echo "{\"benchmark\": \"tokenizer_encode\", \"ours\": $ours, \"hf_tokenizers\": null}"
fi
