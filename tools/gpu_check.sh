#!/usr/bin/env bash
# GPU check of the CUDA kernels, run from the repository root on a machine with an NVIDIA GPU, the
# CUDA toolkit, CMake, Ninja and python3 but none of the server's libraries: configures the
# kernels-only build (LATENTSERVE_KERNELS_ONLY), builds it, runs the CUDA tests (label cuda) and
# the MoE kernel benchmark, and ends with a short summary table. Everything it writes goes under
# $OUT (default /tmp/gpu-check-out), at most 8 files:
#   gpu_check.log    this script's whole output      build.log          configure and build
#   cuda_tests.log   ctest output                    cuda_tests.xml     ctest results as JUnit XML
#   moe_kernels.json benchmark results (a K3-like MoE layer; K3's routed experts, BF16 against
#                    MXFP4)                          moe_kernels.log    benchmark progress
#   memcheck.log     compute-sanitizer on the tests that failed (only when some did)
#   decode_bench.json the model's decode step on the CUDA backend, batches 1 to 256, on a random
#                    d=1024 and a d=2048 model after 64 prompt tokens, and the d=2048 model at
#                    batches 1 and 32 after 1024 with a float32 and a BF16 KV cache, and the
#                    d=2048 model's greedy steps, tokens chosen on the host against on the
#                    device (a JSON array of the five runs)
# Needs .gpu_deps (googletest; abseil and nlohmann_json for the end-to-end model test), made by
# tools/gpu_prepare.sh (git-ignored: bring it along).
# Takes under 8 minutes when the tests pass (a memcheck of failed tests adds up to 2); exits
# non-zero when a step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check-out}
BUILD=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
start=$SECONDS
step() { echo; echo "== $* ($((SECONDS - start)) s)"; }
join() { local IFS=';'; echo "$*"; }

# The whole check; its output also goes to gpu_check.log.
check() {
status=0

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv || status=1
nvcc --version | tail -2
cmake --version | head -1

step "configure"
if [ ! -f .gpu_deps/googletest/CMakeLists.txt ]; then
  echo "missing .gpu_deps/googletest: run tools/gpu_prepare.sh first and bring .gpu_deps along" >&2
  return 1
fi
# cuBLASLt and NCCL outside the toolkit (e.g. from Python wheels): hint where they are.
lib_hints=() inc_hints=()
for name in libcublasLt.so libnccl.so; do
  if ! ls /usr/local/cuda/lib64/$name* >/dev/null 2>&1; then
    f=$(find /usr/local /opt /usr/lib -name "$name*" 2>/dev/null | head -1)
    [ -n "$f" ] && lib_hints+=("$(dirname "$f")")
  fi
done
for name in cublasLt.h nccl.h; do
  if [ ! -f /usr/local/cuda/include/$name ]; then
    f=$(find /usr/local /opt /usr/include -name "$name" 2>/dev/null | head -1)
    [ -n "$f" ] && inc_hints+=("$(dirname "$f")")
  fi
done
echo "library hints: ${lib_hints[*]:-none}; include hints: ${inc_hints[*]:-none}"
# With abseil and nlohmann_json sources along, the end-to-end model test is built too.
model_test_deps=()
if [ -f .gpu_deps/abseil-cpp/CMakeLists.txt ] && [ -f .gpu_deps/include/nlohmann/json.hpp ]; then
  model_test_deps=(-DLS_ABSL_SOURCE_DIR="$PWD/.gpu_deps/abseil-cpp" -DLS_JSON_INCLUDE_DIR="$PWD/.gpu_deps/include")
else
  echo "no .gpu_deps/abseil-cpp: the end-to-end model test (cuda_model_test) is not built"
fi
timeout 60 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATENTSERVE_KERNELS_ONLY=ON \
  -DLATENTSERVE_CUDA=ON -DLS_GTEST_SOURCE_DIR="$PWD/.gpu_deps/googletest" "${model_test_deps[@]}" \
  -DLS_CUDA_LIBRARY_HINTS="$(join "${lib_hints[@]}")" -DLS_CUDA_INCLUDE_HINTS="$(join "${inc_hints[@]}")" \
  >"$OUT/build.log" 2>&1
configured=$?
tail -5 "$OUT/build.log"

built=1
if [ $configured -eq 0 ]; then
  step "build"
  timeout 210 cmake --build "$BUILD" -j"$JOBS" -- -k 0 >>"$OUT/build.log" 2>&1
  built=$?
  grep -E "warning|error" "$OUT/build.log" | head -20
  tail -3 "$OUT/build.log"
else
  echo "configure failed: see build.log"
fi
[ $built -eq 0 ] || status=1

# After a failed build, whatever targets did build are still tested and timed.
if [ -x "$BUILD/bin/cuda_test" ] || [ -x "$BUILD/bin/cuda_model_test" ]; then
  step "CUDA tests"
  timeout 100 ctest --test-dir "$BUILD" -L cuda -j4 --output-on-failure --timeout 90 \
    --output-junit "$OUT/cuda_tests.xml" >"$OUT/cuda_tests.log" 2>&1 || status=1
  grep -E "Passed|Failed|Skipped|\*\*\*|tests passed|Total Test time" "$OUT/cuda_tests.log" | tail -40
  # Failed tests run again under compute-sanitizer's memcheck (out-of-bounds and misaligned
  # accesses, API errors), which the plain run cannot tell from wrong arithmetic.
  failed=$(grep -oP 'Test +#\d+: \K\S+(?=.*\*\*\*(Failed|Exception))' "$OUT/cuda_tests.log" | sort -u | paste -sd: -)
  if [ -n "$failed" ] && command -v compute-sanitizer >/dev/null; then
    step "memcheck of the failed tests"
    for bin in cuda_test cuda_model_test; do
      [ -x "$BUILD/bin/$bin" ] || continue
      timeout 60 compute-sanitizer --tool memcheck --print-limit 20 "$BUILD/bin/$bin" --gtest_filter="$failed" \
        >>"$OUT/memcheck.log" 2>&1
    done
    grep -E "ERROR SUMMARY|Invalid|misaligned|out of bounds" "$OUT/memcheck.log" | head -20
  fi
fi
if [ -x "$BUILD/bin/moe_kernels" ]; then
  step "MoE kernel benchmark"
  timeout 150 "$BUILD/bin/moe_kernels" >"$OUT/moe_kernels.json" 2>"$OUT/moe_kernels.log" || status=1
  tail -12 "$OUT/moe_kernels.log"
fi

if [ -x "$BUILD/bin/decode_bench" ]; then
  step "decode benchmark"
  {
    echo "["
    timeout 60 "$BUILD/bin/decode_bench" --backend cuda || status=1
    echo ","
    timeout 90 "$BUILD/bin/decode_bench" --backend cuda --large || status=1
    echo ","
    timeout 90 "$BUILD/bin/decode_bench" --backend cuda --large --prefill 1024 0 - 1 32 || status=1
    echo ","
    timeout 90 "$BUILD/bin/decode_bench" --backend cuda --large --prefill 1024 --kv_cache_dtype bfloat16 0 - 1 32 ||
      status=1
    echo ","
    timeout 90 "$BUILD/bin/decode_bench" --backend cuda --large --greedy --repeat 3 0 - 1 32 256 || status=1
    echo "]"
  } >"$OUT/decode_bench.json"
fi

step "summary"
python3 - "$OUT" <<'PY'
import json, os, re, sys
out = sys.argv[1]
log = os.path.join(out, "cuda_tests.log")
if os.path.exists(log):
    text = open(log).read()
    m = re.search(r"(\d+)% tests passed(, \d+ tests failed)? out of (\d+)", text)
    skipped = text.count("***Skipped")
    print("CUDA tests:", m.group(0) if m else "no ctest summary", f"({skipped} skipped)")
    for line in text.splitlines():
        if "***Failed" in line or "***Exception" in line or "***Timeout" in line:
            print("  FAILED", line.strip())
path = os.path.join(out, "moe_kernels.json")
try:
    bench = json.load(open(path))
except Exception as e:
    print("moe_kernels: no results:", e)
    sys.exit(0)
copy = bench['copy_gbps']
try:
    runs = json.load(open(os.path.join(out, "decode_bench.json")))
except Exception as e:
    runs = []
    print("decode_bench: no results:", e)
for run in runs:
    m = run["model"]
    print(f"decode, d={m['d']} layers={m['layers']} experts={m['experts']} top-{m['top_k']} f={m['f']} d_lat={m['d_lat']}, "
          f"after {run['prefill_tokens']} prompt tokens, {run['kv_cache_dtype']} KV cache:")
    print(f"{'batch':>6} {'tok/s':>10} {'x b=1':>6} {'step ms':>8} {'MB/step':>8} {'GB/s':>7} {'of copy':>7}")
    for r in run["results"]:
        print(f"{r['batch']:>6} {r['tokens_per_s']:>10.0f} {r['over_batch1']:>6.2f} {r['step_ms']:>8.3f} "
              f"{r['weight_mb_per_step']:>8.1f} {r['weight_read_gbps']:>7.0f} {r['weight_read_gbps'] / copy:>7.1%}")
        print("       device ms per step:", ", ".join(f"{k} {v:.3f}" for k, v in r["parts_ms_per_step"].items() if v))
    for g in run.get("greedy_results", []):
        print(f"  greedy, batch {g['batch']}: step with the argmax on the host {g['host_argmax_step_ms']:.3f} ms, "
              f"with the model's records {g['records_step_ms']:.3f} ms ({g['records_over_host']:.2f}x)")
print(f"moe_kernels on {bench['device']}: copy {copy:.0f} GB/s")
print(f"{'d_lat':>5} {'tokens':>6} {'ms':>8} {'eager ms':>8} {'grouped':>7} {'GB/s':>7} {'of copy':>7} "
      f"{'TFLOP/s':>8} {'of dense':>8}")
for c in bench["cases"]:
    print(f"{c['d_lat']:>5} {c['tokens']:>6} {c['time_ms']:>8.3f} {c['eager_time_ms']:>8.3f} "
          f"{c['grouped_gemm_share']:>7.0%} {c['gbps']:>7.0f} {c['gbps_fraction_of_copy']:>7.0%} "
          f"{c['tflops']:>8.1f} {c['tflops_fraction_of_dense']:>8.0%}")
k3 = bench.get("k3_mxfp4")
if k3:
    print(f"K3 routed experts, grouped GEMMs (d_lat {k3['d_lat']}, f {k3['f']}, top-{k3['top_k']} of "
          f"{k3['experts']}): BF16 against MXFP4")
    print(f"{'tokens':>6} {'active':>6} {'BF16 ms':>8} {'MXFP4 ms':>8} {'ratio':>6} {'BF16 GB/s':>9} "
          f"{'MXFP4 GB/s':>10} {'same bits':>9}")
    for c in k3["cases"]:
        same = {True: "yes", False: "NO", None: "-"}[c["outputs_bit_identical"]]
        print(f"{c['tokens']:>6} {c['active_experts']:>6.0f} {c['bf16_ms']:>8.3f} {c['mxfp4_ms']:>8.3f} "
              f"{c['mxfp4_over_bf16_time']:>6.2f} {c['bf16_weight_gbps']:>9.0f} {c['mxfp4_weight_gbps']:>10.0f} "
              f"{same:>9}")
PY
echo "gpu_check: $((SECONDS - start)) s, status $status"
return $status
}

check 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
