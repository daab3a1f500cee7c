#!/usr/bin/env bash
# The CPU peer (ik_llama.cpp) and LatentServe on one model, in one run: greedy tokens of both on
# three prompts (an external check of the plain-MoE path), then, in alternating rounds, decode
# throughput side by side at 1, 8 and 32 sequences (the peer's llama-batched-bench with 64-token
# prompts and 32 generated tokens, 2 threads, every position feeding token 0; decode_bench --token0
# on the same weights in our format) and the 512-token prefill (llama-bench -p 512; decode_bench
# --prefill 512), for each weight format: the peer's BF16, Q8_0 and Q4_K_M (each with and without
# -rtr, its run-time repacking) and ours in BF16 (with float32 activations, and with
# --activation_dtype bfloat16: rounded to BF16 per element, as the peer's BF16 type does) and with
# --quantization int8, w8a8, int4 and w4a8 (w8a8/w4a8: activations rounded to int8 per row, as the
# peer's quantized types do). Host
# memory bandwidth jumps between two levels within tens of seconds, so every configuration runs
# once per round, in the same order, and the figures are medians over the rounds. Prints the
# per-round figures, then one JSON object with the medians and our ratios to the peer.
#   bench/peer_compare.sh PEER_CHECKOUT MODEL_OUTDIR [ROUNDS (default 5)]
# With PEER_COMPARE_TARGETS=1 a round runs only the headline pairs, so rounds are short: BF16 with BF16,
# w8a8 with Q8_0 -rtr, w4a8 with Q4_K_M -rtr, and the 512-token prefill against the peer's BF16.
# Each round also records the host's copy bandwidth (decode_bench's, GB/s) beside the figures.
# PEER_COMPARE_BIN: where our binaries are (default build/bin). PEER_COMPARE_PEER_BUILD: the peer's
# build directory (default PEER_CHECKOUT/build), e.g. one built for AVX2 alone, to stand for an
# AVX2-only host on a wider CPU beside LS_CPU_ISA=avx2 for ours.
# PEER_CHECKOUT is the peer's source tree, built in PEER_CHECKOUT/build (bin/llama-batched-bench,
# bin/llama-bench, bin/llama-quantize, src/libllama.so; the build in docs/benchmarks.md, "Measuring
# against ik_llama.cpp", with -DGGML_IQK_FA_ALL_QUANTS=OFF to shorten it: its F16 KV cache needs none
# of those kernels); MODEL_OUTDIR holds peer.gguf and latentserve/ (bench/peer_model.py); the peer's
# Q8_0 and Q4_K_M files are made beside them on first use.
set -euo pipefail
src=$(realpath "${1:?peer source tree}")
model=$(realpath "${2:?directory written by bench/peer_model.py}")
rounds=${3:-5}
threads=2
peer=${PEER_COMPARE_PEER_BUILD:-$src/build}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PEER_COMPARE_BIN:-$here/build/bin}
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
  ours=$("$bin/latentserve-generate" --model "$model/latentserve" --prompt-ids "$prompt" --max-tokens 32 \
    --kv_cache_dtype float32)
  same=0
  IFS=, read -ra a <<<"$theirs"
  IFS=, read -ra b <<<"$ours"
  while [ $same -lt ${#a[@]} ] && [ "${a[$same]}" = "${b[$same]:-}" ]; do same=$((same + 1)); done
  echo "prompt $prompt: $same of ${#a[@]} leading tokens identical"
done

for q in q8_0 q4_k_m; do
  [ -f "$model/peer-$q.gguf" ] || "$peer/bin/llama-quantize" "$model/peer.gguf" "$model/peer-$q.gguf" "${q^^}" "$threads" \
    >/dev/null 2>&1
done

log=$work/figures.tsv  # config  round  metric  value
: >"$log"
# llama-batched-bench: decode tokens/s (S_TG) per number of sequences.
peer_decode() {  # name gguf [extra flags]
  local name=$1 file=$2
  shift 2
  "$peer/bin/llama-batched-bench" -m "$file" -c 8192 -b 2048 -ub 512 -npp 64 -ntg 32 -npl 1,8,32 -t $threads "$@" \
    2>&1 | awk -F'|' -v n="$name" -v r="$round" \
    '$2 ~ /^ *[0-9]+ *$/ { gsub(/ /, "", $4); gsub(/ /, "", $9); print n "\t" r "\tdecode_" $4 "\t" $9 }' >>"$log"
}
# llama-bench: prompt processing of 512 tokens, tokens/s.
peer_prefill() {  # name gguf [extra flags]
  local name=$1 file=$2
  shift 2
  "$peer/bin/llama-bench" -m "$file" -p 512 -n 0 -t $threads -r 1 -o csv "$@" 2>/dev/null |
    python3 -c 'import csv, sys; rows = list(csv.DictReader(sys.stdin)); print(rows[-1]["avg_ts"])' |
    sed "s/^/$name\t$round\tprefill_512\t/" >>"$log"
}
ours() {  # name quantization [extra flags]
  local name=$1 q=$2 out
  shift 2
  out=$("$bin/decode_bench" --token0 --quantization "$q" "$@" $threads "$model/latentserve" 1 8 32)
  python3 - "$out" "$name" "$round" >>"$log" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
for r in d["token0_results"]:
    print("%s\t%s\tdecode_%d\t%s" % (sys.argv[2], sys.argv[3], r["batch"], r["tokens_per_s"]))
print("host\t%s\tcopy_gbps\t%s" % (sys.argv[3], d["copy_bandwidth_gbps"]))
PY
  out=$("$bin/decode_bench" --prefill 512 --quantization "$q" "$@" $threads "$model/latentserve" 1)
  python3 - "$out" "$name" "$round" >>"$log" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
print("%s\t%s\tprefill_512\t%s" % (sys.argv[2], sys.argv[3], d["results"][0]["prefill_tokens_per_s"]))
PY
}

# A long prompt: the peer's prefill and decode tokens/s at 1 and 4 sequences, then ours.
peer_prompt() {  # name gguf [extra flags]
  local name=$1 file=$2
  shift 2
  "$peer/bin/llama-batched-bench" -m "$file" -c $((4 * PEER_COMPARE_PROMPT + 256)) -b 4096 -ub 512 \
    -npp "$PEER_COMPARE_PROMPT" -ntg 32 -npl 1,4 -t $threads "$@" 2>&1 | awk -F'|' -v n="$name" -v r="$round" \
    -v p="$PEER_COMPARE_PROMPT" '$2 ~ /^ *[0-9]+ *$/ { gsub(/ /, "", $4); gsub(/ /, "", $7); gsub(/ /, "", $9);
      print n "\t" r "\tprompt_" p "_pp_" $4 "\t" $7; print n "\t" r "\tprompt_" p "_tg_" $4 "\t" $9 }' >>"$log"
}
ours_prompt() {  # name [extra flags]
  local name=$1 out
  shift
  out=$("$bin/decode_bench" --token0 --prefill "$PEER_COMPARE_PROMPT" --kv_cache_dtype bfloat16 "$@" $threads \
    "$model/latentserve" 1 4)
  python3 - "$out" "$name" "$round" "$PEER_COMPARE_PROMPT" >>"$log" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
name, rnd, p = sys.argv[2:5]
for r, t in zip(d["results"], d["token0_results"]):
    print("%s\t%s\tprompt_%s_pp_%d\t%s" % (name, rnd, p, r["batch"], r["prefill_tokens_per_s"]))
    print("%s\t%s\tprompt_%s_tg_%d\t%s" % (name, rnd, p, t["batch"], t["tokens_per_s"]))
PY
}

for round in $(seq 1 "$rounds"); do
  echo "== round $round of $rounds (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  if [ -n "${PEER_COMPARE_PROMPT:-}" ]; then  # long prompts only
    peer_prompt peer_bf16 "$model/peer.gguf"
    ours_prompt ours_bf16
    ours_prompt ours_bf16_bf16act --activation_dtype bfloat16
    peer_prompt peer_q8_0_rtr "$model/peer-q8_0.gguf" -rtr
    ours_prompt ours_w8a8 --quantization w8a8
    peer_prompt peer_q4_k_m_rtr "$model/peer-q4_k_m.gguf" -rtr
    ours_prompt ours_w4a8 --quantization w4a8
    grep -P "\t$round\t" "$log" | awk -F'\t' '{ printf "%s %s %.1f\n", $1, $3, $4 }' | paste -sd' ' | fold -w 160
    continue
  fi
  if [ "${PEER_COMPARE_TARGETS:-0}" = 1 ]; then  # only the pairs the targets name, so rounds are short
    peer_decode peer_bf16 "$model/peer.gguf"
    ours ours_bf16 none
    ours ours_bf16_bf16act none --activation_dtype bfloat16
    peer_decode peer_q8_0_rtr "$model/peer-q8_0.gguf" -rtr
    ours ours_w8a8 w8a8
    peer_decode peer_q4_k_m_rtr "$model/peer-q4_k_m.gguf" -rtr
    ours ours_w4a8 w4a8
    peer_prefill peer_bf16 "$model/peer.gguf"
    grep -P "\t$round\t" "$log" | awk -F'\t' '{ printf "%s %s %.1f\n", $1, $3, $4 }' | paste -sd' ' | fold -w 160
    continue
  fi
  peer_decode peer_bf16 "$model/peer.gguf"
  ours ours_bf16 none
  ours ours_bf16_bf16act none --activation_dtype bfloat16
  peer_decode peer_q8_0 "$model/peer-q8_0.gguf"
  peer_decode peer_q8_0_rtr "$model/peer-q8_0.gguf" -rtr
  ours ours_int8 int8
  ours ours_w8a8 w8a8
  peer_decode peer_q4_k_m "$model/peer-q4_k_m.gguf"
  peer_decode peer_q4_k_m_rtr "$model/peer-q4_k_m.gguf" -rtr
  ours ours_int4 int4
  ours ours_w4a8 w4a8
  peer_prefill peer_bf16 "$model/peer.gguf"
  peer_prefill peer_q8_0_rtr "$model/peer-q8_0.gguf" -rtr 1
  peer_prefill peer_q4_k_m_rtr "$model/peer-q4_k_m.gguf" -rtr 1
  grep -P "\t$round\t" "$log" | awk -F'\t' '{ printf "%s %s %.1f\n", $1, $3, $4 }' | paste -sd' ' | fold -w 160
done

python3 - "$log" "$rounds" <<'EOF'
import collections, json, statistics, sys
values = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, _, metric, v = line.rstrip("\n").split("\t")
    values[(name, metric)].append(float(v))
med = {f"{n} {m}": round(statistics.median(v), 1) for (n, m), v in sorted(values.items())}
def ratio(a, b, metric):
    x, y = med.get(f"{a} {metric}"), med.get(f"{b} {metric}")
    return round(x / y, 2) if x and y else None
ratios = {}
for ours, peer in [("ours_bf16", "peer_bf16"), ("ours_bf16_bf16act", "peer_bf16"), ("ours_int8", "peer_q8_0_rtr"), ("ours_w8a8", "peer_q8_0_rtr"),
                   ("ours_w8a8", "peer_q8_0"), ("ours_int4", "peer_q4_k_m_rtr"), ("ours_w4a8", "peer_q4_k_m_rtr"),
                   ("ours_w4a8", "peer_q4_k_m")]:
    for n in (1, 8, 32):
        ratios[f"{ours}/{peer} decode_{n}"] = ratio(ours, peer, f"decode_{n}")
for ours in ("ours_bf16", "ours_bf16_bf16act", "ours_int8", "ours_w8a8", "ours_int4", "ours_w4a8"):
    ratios[f"{ours}/peer_bf16 prefill_512"] = ratio(ours, "peer_bf16", "prefill_512")
for metric in sorted({m for _, m in values if m.startswith("prompt_")}):
    for ours, peer in [("ours_bf16", "peer_bf16"), ("ours_bf16_bf16act", "peer_bf16"), ("ours_w8a8", "peer_q8_0_rtr"),
                       ("ours_w4a8", "peer_q4_k_m_rtr")]:
        ratios[f"{ours}/{peer} {metric}"] = ratio(ours, peer, metric)
ratios = {k: v for k, v in ratios.items() if v is not None}
print(json.dumps({"benchmark": "peer_compare", "threads": 2, "rounds": int(sys.argv[2]),
                  "statistic": "median over alternating rounds", "medians_tokens_per_s": med, "ratios": ratios},
                 indent=2))
EOF
