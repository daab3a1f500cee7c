#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for SECONDS (default 30)
# from its committed seed corpus (copied, so the corpus in the tree does not change), as many at once
# as there are cores (FUZZ_JOBS).
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: key compilations on paths relative to the checkout, so any clone reuses the cache.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors_header model_config tokenizer chat_template openai_request grpc_request structured_output chat_output http_server)
build=${FUZZ_BUILD_DIR:-build-fuzz}
# The targets parse and compile text and never run a kernel: the portable CPU kernels alone.
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DLATENTSERVE_FUZZ=ON -DLATENTSERVE_SIMD_TARGETS=portable >/dev/null
cmake --build "$build" -j "$(nproc)" --target $(printf '%s_fuzz ' "${targets[@]}")
# One target per core at a time (a libFuzzer run is single-threaded); each writes its own log, and
# the reports are printed in the targets' order once all have run.
jobs=${FUZZ_JOBS:-$(nproc)}
logs=$(mktemp -d)
run_one() {  # target: runs it from a copy of its corpus; the log and exit status land in $logs
  local t=$1 work
  work=$(mktemp -d)
  cp -r "fuzz/corpus/$t/." "$work/"
  local rc=0
  "$build/bin/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$work/crash-" "$work" >"$logs/$t.log" 2>&1 || rc=$?
  echo $rc >"$logs/$t.rc"
  rm -rf "$work"
}
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_one "$t" &
done
wait
passed=0 failed=0
for t in "${targets[@]}"; do
  if [ "$(cat "$logs/$t.rc")" = 0 ]; then
    passed=$((passed + 1))
    echo "fuzz $t: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$logs/$t.log" | grep -o '[0-9]*$') runs in ${seconds}s, clean"
  else
    failed=$((failed + 1))
    echo "fuzz $t: FAILED"; tail -40 "$logs/$t.log"
  fi
done
rm -rf "$logs"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
