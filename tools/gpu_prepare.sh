#!/usr/bin/env bash
# Prepares a GPU check (tools/gpu_check.sh) for a machine without network access or the server's
# libraries, in .gpu_deps/ (git-ignored: a run on the GPU machine must bring it along):
#   googletest/   this machine's GoogleTest sources (Debian's googletest package), for the CUDA tests;
#   abseil-cpp/   abseil sources at the version Debian ships (20220623.1), and
#   include/      nlohmann/json.hpp, so that the kernels-only build there can also compile the
#                 model loader and the end-to-end CUDA model test.
# Usage: tools/gpu_prepare.sh [abseil git repository or source tree]   (default: clone from GitHub)
set -euo pipefail
cd "$(dirname "$0")/.."
gtest=/usr/src/googletest
absl_tag=20220623.1
if [ ! -f "$gtest/CMakeLists.txt" ]; then
  echo "gpu_prepare: no GoogleTest sources at $gtest (install the googletest package)" >&2
  exit 1
fi
if [ ! -f /usr/include/nlohmann/json.hpp ]; then
  echo "gpu_prepare: no /usr/include/nlohmann/json.hpp (install nlohmann-json3-dev)" >&2
  exit 1
fi
rm -rf .gpu_deps
mkdir -p .gpu_deps/include
cp -r "$gtest" .gpu_deps/googletest
cp -r /usr/include/nlohmann .gpu_deps/include/
absl_src=${1:-}
if [ -z "$absl_src" ]; then
  git clone -q --depth 1 --branch "$absl_tag" https://github.com/abseil/abseil-cpp .gpu_deps/abseil-cpp
  rm -rf .gpu_deps/abseil-cpp/.git
elif git -C "$absl_src" rev-parse --git-dir >/dev/null 2>&1 && git -C "$absl_src" rev-parse -q --verify "$absl_tag^{commit}" >/dev/null; then
  mkdir -p .gpu_deps/abseil-cpp
  git -C "$absl_src" archive "$absl_tag" | tar -x -C .gpu_deps/abseil-cpp
else
  cp -r "$absl_src" .gpu_deps/abseil-cpp
  rm -rf .gpu_deps/abseil-cpp/.git
fi
# Tests and benchmarks of abseil itself are not needed there.
rm -rf .gpu_deps/abseil-cpp/ci .gpu_deps/abseil-cpp/.github
grep -qxF '/.gpu_deps/' .gitignore || echo '/.gpu_deps/' >> .gitignore
echo "gpu_prepare: .gpu_deps ready ($(du -sh .gpu_deps | cut -f1))"
