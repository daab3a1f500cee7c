#!/usr/bin/env bash
# The x86-64 build run on CPUs this host is not, under qemu-user-static's x86-64 emulation: an
# AVX2-only CPU (EPYC-Rome: AVX2, FMA, F16C, no AVX-512, the class of most cloud VMs) and one
# without AVX (Westmere). On each, the SIMD dispatch must choose that CPU's target by itself (avx2,
# portable), the kernel tests (and, on the AVX2 CPU, most model tests) pass, and latentserve-generate
# gives the native run's logits bit for bit in every weight and activation format. An instruction
# of a wider set reached outside the dispatch stops such a CPU with SIGILL: this finds at run time
# what tests/kernels/isa_linkage_test.py looks for in the binaries. Used by tools/test.sh; needs
# qemu-user-static (tools/setup.sh installs it).
# Usage: tools/x86_emulated_test.sh [BUILD_DIR (default build)]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build}/bin
qemu=$(command -v qemu-x86_64-static || command -v qemu-x86_64 || true)
[ -n "$qemu" ] || { echo "qemu-x86_64-static not found (Debian package qemu-user-static)" >&2; exit 1; }
case $(uname -m) in x86_64 | amd64) ;; *) echo "SKIPPED: an x86-64 build is needed"; exit 0 ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run CPU COMMAND...: under the emulated CPU; qemu's notes on host features it does not model are
# dropped from stderr.
run() {
  local cpu=$1
  shift
  "$qemu" -cpu "$cpu" "$@" 2> >(grep -v "TCG doesn't support requested feature" >&2)
}

# gtest CPU SHARDS BINARY [FILTER]: the binary's tests (those FILTER selects: a GoogleTest filter) on
# the emulated CPU, in SHARDS processes side by side.
gtest() {
  local cpu=$1 shards=$2 binary=$3 filter=${4:-*} pids=() i rc
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i run "$cpu" "$bin/$binary" --gtest_brief=1 \
      --gtest_filter="$filter" >"$work/$binary.$cpu.$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < shards; ++i)); do
    rc=0
    wait "${pids[$i]}" || rc=$?
    if [ "$rc" -eq 0 ]; then
      grep -h "PASSED\|SKIPPED \]" "$work/$binary.$cpu.$i.log" | sed "s/^/$binary on $cpu: /"
    else
      tail -n 30 "$work/$binary.$cpu.$i.log"
      fail "$binary on $cpu (shard $i of $shards; exit $rc)"
    fi
  done
}

# The generations compared: model directory, then latentserve-generate's format flags.
cases=(
  "models/tiny|"
  "models/tiny|--activation_dtype bfloat16"
  "models/tiny|--quantization w8a8"
  "models/tiny|--quantization w4a8"
  "models/tiny|--quantization int4"
  "models/tiny|--quantization fp8"
  "tests/data/hf/qwen3_moe_fp8|"
  "tests/data/hf/deepseek_v3_fp8|--activation_dtype bfloat16"
  "tests/data/hf/kimi_linear_bf16|--activation_dtype bfloat16"
  "tests/data/k3/k3_tiny_mxfp4|"
)
prompt=1,5,9,13,17,21,25,29,33,37,41

# The native run of every case, once: what each emulated CPU must give.
n=0
for entry in "${cases[@]}"; do
  n=$((n + 1))
  # shellcheck disable=SC2086  # flags split into words on purpose
  "$bin/latentserve-generate" --model "${entry%%|*}" --prompt_ids $prompt --max_tokens 4 ${entry#*|} --threads 2 \
    --dump_logits "$work/native.$n.npy" >/dev/null 2>"$work/native.$n.err" ||
    { cat "$work/native.$n.err"; echo "FAIL: the native run of ${entry/|/ }"; exit 1; }
done

# generate CPU EXPECTED_ISA: every case on the emulated CPU against the native run.
generate() {
  local cpu=$1 want=$2 n=0 entry dir flags isa
  for entry in "${cases[@]}"; do
    dir=${entry%%|*}
    flags=${entry#*|}
    n=$((n + 1))
    # shellcheck disable=SC2086  # flags split into words on purpose
    if ! run "$cpu" "$bin/latentserve-generate" --model "$dir" --prompt_ids $prompt --max_tokens 4 $flags \
      --threads 2 --dump_logits "$work/$cpu.$n.npy" >"$work/$cpu.$n.out" 2>"$work/$cpu.$n.err"; then
      cat "$work/$cpu.$n.err"
      fail "latentserve-generate on $cpu: $dir $flags"
      continue
    fi
    isa=$(sed -n 's/^latentserve-generate: cpu_isa //p' "$work/$cpu.$n.err")
    [ "${isa%%+*}" = "$want" ] || fail "on $cpu the dispatch chose '$isa', not $want"
    if cmp -s "$work/native.$n.npy" "$work/$cpu.$n.npy"; then
      echo "generate on $cpu ($isa): $dir $flags: tokens $(cat "$work/$cpu.$n.out"), logits equal the native run's"
    else
      fail "on $cpu the logits of $dir $flags differ from the native run's"
    fi
  done
}

# On a host that is itself AVX2-only the native passes (Release and sanitizers) already ran the
# whole suite on such a CPU: emulating one again would only repeat them, several times slower.
if grep -q -w avx2 /proc/cpuinfo && ! grep -q -w avx512f /proc/cpuinfo; then
  echo "EPYC-Rome: not emulated, this host is an AVX2-only CPU (the native passes ran on it)"
else
  gtest EPYC-Rome 1 simd_targets_test
  gtest EPYC-Rome 2 kernels_test
  # Not the model tests whose cost is the kernels' arithmetic over long or many sequences (each
  # 0.05-0.9 s natively and about 200 times that here, two thirds of the binary's time): what
  # they would add, the same kernels' bits on this CPU, the kernel tests and the generations below
  # check (every weight and activation format's logits against the native run, bit for bit).
  gtest EPYC-Rome 2 models_test "-Checkpoints/MlaForms.AbsorbedAndExpanded*:Checkpoints/MlaForms.ChunkedPrefill*:\
*/kimi_linear_f32:TinyModel.OnlineQuantization*:TinyModel.Bf16Activations*:TinyModel.PlacedQuantized*:\
TinyModel.FrozenBiases*:TinyModel.HeldoutLoss*:ModelFileFaults.EveryTruncationPoint*"
  generate EPYC-Rome avx2
fi
gtest Westmere 1 simd_targets_test
gtest Westmere 2 kernels_test
generate Westmere portable
if [ "$failures" -gt 0 ]; then
  echo "$failures failures"
  exit 1
fi
echo "ok: each emulated CPU ran its own target and gave the native results"
