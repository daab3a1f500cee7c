#!/usr/bin/env bash
# The README's two commands in the order a new user runs them: tools/run.sh, then tools/test.sh, in
# one checkout and one build directory. The second must configure what the suite needs whatever the
# first chose (tests on, CUDA when nvcc is there, every CPU kernel target), so that its ctest finds
# the tests instead of passing on none. Configures only (LS_CONFIGURE_ONLY=1), in a scratch build directory.
# Usage: two_commands_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?source directory}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export BUILD_DIR=$dir LS_CONFIGURE_ONLY=1
"$src/tools/run.sh" >/dev/null
grep -q '^LATENTSERVE_BUILD_TESTS:BOOL=OFF' "$dir/CMakeCache.txt" || { echo "FAIL: run.sh should configure without tests"; exit 1; }
grep -q '^LATENTSERVE_SIMD_TARGETS:STRING=native' "$dir/CMakeCache.txt" ||
  { echo "FAIL: run.sh should build only the CPU kernel targets this machine runs"; exit 1; }
"$src/tools/test.sh" >/dev/null
grep -q '^LATENTSERVE_BUILD_TESTS:BOOL=ON' "$dir/CMakeCache.txt" || { echo "FAIL: test.sh left the tests off"; exit 1; }
grep -q '^LATENTSERVE_CUDA:STRING=AUTO' "$dir/CMakeCache.txt" || { echo "FAIL: test.sh left CUDA as run.sh set it"; exit 1; }
grep -q '^LATENTSERVE_SIMD_TARGETS:STRING=all' "$dir/CMakeCache.txt" ||
  { echo "FAIL: test.sh left the CPU kernel targets as run.sh set them"; exit 1; }
tests=$(ctest --test-dir "$dir" -N | sed -n 's/^Total Tests: //p')
if [ "${tests:-0}" -lt 10 ]; then
  echo "FAIL: after run.sh then test.sh, ctest lists ${tests:-0} tests"
  exit 1
fi
# And ctest refuses an empty suite rather than passing it.
if ctest --test-dir "$dir" --no-tests=error -R '^no_such_test$' >/dev/null 2>&1; then
  echo "FAIL: ctest --no-tests=error passed with no tests"
  exit 1
fi
echo "ok: run.sh then test.sh configure $tests tests (before the build discovers the GoogleTest cases)"
