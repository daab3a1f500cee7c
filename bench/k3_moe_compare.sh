#!/usr/bin/env bash
# Kimi K3's MoE layer at its real sizes on the CPU, routed experts in MXFP4 against BF16: decode at
# 1, 8 and 32 sequences through decode_bench --k3_moe, the two forms alternating over ROUNDS rounds
# (the host's memory bandwidth drifts), medians printed as JSON with the MXFP4/BF16 ratios of
# tokens/s, of the MoE layer's time (router, latent projections, experts, shared experts) and of
# the bytes read a step (the routed experts', and the whole step's with the small attention and
# head), against the copy bandwidth measured in the same runs.
# Usage: bench/k3_moe_compare.sh [BUILD_DIR] [ROUNDS] [EXPERTS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-5}
experts=${3:-64}
threads=${4:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
  for form in bf16 mxfp4; do
    flag=(); [ "$form" = mxfp4 ] && flag=(--mxfp4)
    "$build/bin/decode_bench" --k3_moe --experts "$experts" "${flag[@]}" --model_out "$tmp/$form" \
      "$threads" - 1 8 32 > "$tmp/$form.$r.json"
  done
done
python3 - "$tmp" "$rounds" "$experts" <<'PY'
import json, statistics, sys
tmp, rounds, experts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = {f: [json.load(open(f"{tmp}/{f}.{r}.json")) for r in range(1, rounds + 1)] for f in ("bf16", "mxfp4")}
moe_parts = ("router", "latent", "experts", "shared_or_dense")
out = {"benchmark": "k3_moe", "experts": experts, "top_k": 16, "d": 7168, "latent": 3584, "f": 3072,
       "rounds": rounds, "copy_bandwidth_gbps": statistics.median(
           j["copy_bandwidth_gbps"] for f in runs for j in runs[f]), "batches": []}
for i, batch in enumerate(r["batch"] for r in runs["bf16"][0]["results"]):
    row = {"batch": batch}
    for f in ("bf16", "mxfp4"):
        res = [j["results"][i] for j in runs[f]]
        row[f] = {"tokens_per_s": statistics.median(x["tokens_per_s"] for x in res),
                  "moe_ms": statistics.median(sum(x["parts_ms_per_step"][p] for p in moe_parts) for x in res),
                  "weight_mb_per_step": statistics.median(x["weight_mb_per_step"] for x in res),
                  "expert_mb_per_step": statistics.median(x["expert_mb_per_step"] for x in res),
                  "weight_read_over_copy": statistics.median(x["weight_read_over_copy"] for x in res)}
    # Paired ratios per round, then their median.
    row["mxfp4_over_bf16_tokens_per_s"] = statistics.median(
        m["results"][i]["tokens_per_s"] / b["results"][i]["tokens_per_s"] for b, m in zip(runs["bf16"], runs["mxfp4"]))
    row["bf16_over_mxfp4_moe_time"] = statistics.median(
        sum(b["results"][i]["parts_ms_per_step"][p] for p in moe_parts) /
        sum(m["results"][i]["parts_ms_per_step"][p] for p in moe_parts) for b, m in zip(runs["bf16"], runs["mxfp4"]))
    row["mxfp4_expert_bytes_over_bf16"] = row["mxfp4"]["expert_mb_per_step"] / row["bf16"]["expert_mb_per_step"]
    row["mxfp4_step_bytes_over_bf16"] = row["mxfp4"]["weight_mb_per_step"] / row["bf16"]["weight_mb_per_step"]
    out["batches"].append(row)
print(json.dumps(out, indent=1))
PY
