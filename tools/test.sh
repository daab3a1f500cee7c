#!/usr/bin/env bash
# Builds everything (CUDA kernels too when nvcc is present) and runs the whole test suite:
# unit and model tests, the kernels under every SIMD target the CPU has, the server driven over the
# network, deployment checks and a 2-minute soak; then the CPU kernels cross-built for aarch64 and
# tested under qemu (tools/cross_test.sh), the x86 build on an emulated AVX2-only CPU and a CPU
# without AVX (tools/x86_emulated_test.sh), the suite again under ASan+UBSan and its threaded parts
# under TSan (tools/sanitize.sh), and each libFuzzer target for 30 s (tools/fuzz.sh). Prints the
# time of each stage at the end.
# LATENTSERVE_QUICK=1 stops after the first ctest run. LS_CONFIGURE_ONLY=1 configures the build
# directory and stops (the two-commands test).
# Usage: tools/test.sh [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: key compilations on paths relative to the checkout, so any clone reuses the cache.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
build=${BUILD_DIR:-build}
stages=()
stage() {  # name command...: runs and times one stage
  local name=$1 start=$SECONDS
  shift
  "$@"
  stages+=("$(printf '%-18s %5d s' "$name" $((SECONDS - start)))")
}
started=$(mktemp)
# The first assertion lines of the tests a ctest run of this script failed, in every build
# directory it tests: a failed run's cause stays in its last lines.
failure_lines() {
  local dir
  for dir in "$build" build-asan build-tsan; do
    local failed=$dir/Testing/Temporary/LastTestsFailed.log
    [ -s "$failed" ] && [ "$failed" -nt "$started" ] || continue
    echo "== failed in $dir: $(cut -d: -f2 "$failed" | tr '\n' ' ')"
    grep -E '^E  |: Failure$|^Expected|Which is|AssertionError|Timeout' "$dir/Testing/Temporary/LastTest.log" |
      head -n 12 | cut -c1-300
  done
}
report() {
  [ "$1" = 0 ] || failure_lines
  rm -f "$started"
  echo "== stage times"
  printf '%s\n' "${stages[@]}"
}
trap 'report $?' EXIT
[ "${LS_CONFIGURE_ONLY:-0}" = 1 ] || stage setup tools/setup.sh test
# Every option the suite relies on is set here, whatever an earlier configure of $build chose
# (tools/run.sh configures the same directory without tests and without CUDA).
stage configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATENTSERVE_BUILD_TESTS=ON \
  -DLATENTSERVE_CUDA=AUTO -DLATENTSERVE_SANITIZE= -DLATENTSERVE_FUZZ=OFF -DLATENTSERVE_KERNELS_ONLY=OFF \
  -DLATENTSERVE_SIMD_TARGETS=all
[ "${LS_CONFIGURE_ONLY:-0}" = 1 ] && exit 0
stage build cmake --build "$build" -j "$(nproc)"
# The integration tests' Python environment (the build's python_env target prepares it too, but
# only as far as it can; here a failure stops the run).
stage python_env tools/python_env.sh "$build/venv"
stage ctest ctest --test-dir "$build" -j "$(nproc)" --no-tests=error --output-on-failure "$@"
if [ "${LATENTSERVE_QUICK:-0}" != 1 ]; then
  stage aarch64_qemu tools/cross_test.sh
  stage x86_emulated tools/x86_emulated_test.sh "$build"
  stage asan tools/sanitize.sh address
  stage tsan tools/sanitize.sh thread
  stage fuzz tools/fuzz.sh 30
fi
