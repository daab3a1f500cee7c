#!/usr/bin/env bash
# Serving figures for docs/benchmarks.md, in one run on one machine: latentserve-bench against the
# real server (HTTP, concurrency 1/8/32/64; TTFT, TPOT, output tok/s), and the front-end overhead
# at concurrency 1 — HTTP and gRPC vs the in-process engine (serving_bench) on the same workload.
# Usage: bench/serving_matrix.sh [BUILD_DIR] [MODEL_DIR]   (prints JSON)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
model=${2:-models/tiny}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=$(port); grpc=$(port)
"$build/bin/latentserve" --model "$model" --host 127.0.0.1 --http_port "$http" --grpc_port "$grpc" \
  --log_level warning --max_waiting 4096 >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$http/ready" >/dev/null && break; sleep 0.1; done
tmp=$(mktemp -d)
common=(--input-len 32 --output-len 64 --progress=false --warmup 4)
for c in 1 8 32 64; do
  n=$((c * 4)); [ "$n" -lt 16 ] && n=16
  "$build/bin/latentserve-bench" --backend http --target "127.0.0.1:$http" --concurrency "$c" --num-requests "$n" \
    "${common[@]}" --json "$tmp/http_$c.json" >/dev/null
done
"$build/bin/latentserve-bench" --backend grpc --target "127.0.0.1:$grpc" --concurrency 1 --num-requests 16 \
  "${common[@]}" --json "$tmp/grpc_1.json" >/dev/null
kill $server; wait $server 2>/dev/null || true
"$build/bin/serving_bench" "$model" > "$tmp/inproc.json"
python3 - "$tmp" <<'PY'
import json, sys, os
d = sys.argv[1]
load = lambda n: json.load(open(os.path.join(d, n)))["runs"][0]
inproc = json.load(open(os.path.join(d, "inproc.json")))["levels"][0]["output_tokens_per_s"]
rows = []
for c in (1, 8, 32, 64):
    r = load(f"http_{c}.json")
    rows.append({"concurrency": c, "output_tok_s": round(r["output_throughput"], 1),
                 "ttft_p50_ms": round(r["ttft"]["p50_ms"], 2), "ttft_p99_ms": round(r["ttft"]["p99_ms"], 2),
                 "tpot_p50_ms": round(r["tpot"]["p50_ms"], 3), "tpot_p99_ms": round(r["tpot"]["p99_ms"], 3),
                 "failed": r["failed"]})
h1, g1 = load("http_1.json")["output_throughput"], load("grpc_1.json")["output_throughput"]
print(json.dumps({"benchmark": "serving_matrix", "workload": "32-token prompts, 64 output tokens, greedy, ignore_eos",
                  "http": rows,
                  "frontend_overhead_at_concurrency_1": {
                      "in_process_tok_s": inproc, "http_tok_s": round(h1, 1), "grpc_tok_s": round(g1, 1),
                      "http_over_in_process": round(h1 / inproc, 3), "grpc_over_in_process": round(g1 / inproc, 3)}},
                 indent=1))
PY
rm -rf "$tmp"
