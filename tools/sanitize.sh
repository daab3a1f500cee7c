#!/usr/bin/env bash
# Sanitizer runs of the test suite: ASan + UBSan over the whole suite (build-asan), and TSan over
# the threaded parts — thread pool, engine, scheduler and the server driven over the network
# (build-tsan). Uses the Python environment tools/test.sh prepared in build/venv.
# Usage: tools/sanitize.sh [address|thread]...
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: key compilations on paths relative to the checkout, so any clone reuses the cache.
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(address thread)
python=$PWD/${BUILD_DIR:-build}/venv/bin/python
for kind in "${kinds[@]}"; do
  case $kind in
    address) dir=build-asan; labels=""; targets="" ;;
    thread) dir=build-tsan; labels="thread_safety"; targets=thread_safety_tests ;;
    *) echo "unknown sanitizer $kind" >&2; exit 2 ;;
  esac
  # -O1 -g1: a third of -O2 -g's compile time; line tables are all a sanitizer report needs. Only the
  # CPU kernel targets this machine runs: the others' tests would be SKIPPED here anyway (the
  # optimized pass compiles every target, and runs each one this CPU has).
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DLATENTSERVE_CUDA=OFF -DLATENTSERVE_BUILD_TESTS=ON -DLATENTSERVE_SIMD_TARGETS=native \
    -DLATENTSERVE_SANITIZE="$kind" -DLS_TEST_PYTHON="$python" >/dev/null
  # TSan runs the threaded suites only, so it builds only them (and the binaries they drive).
  cmake --build "$dir" -j "$(nproc)" ${targets:+--target $targets}
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tools/tsan.supp"
  export LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp"
  if [ -n "$labels" ]; then
    ctest --test-dir "$dir" -j "$(nproc)" --no-tests=error --output-on-failure -L "$labels"
  else
    # The soak's RSS check does not apply under ASan (its quarantine holds freed memory).
    ctest --test-dir "$dir" -j "$(nproc)" --no-tests=error --output-on-failure -LE soak
  fi
done
