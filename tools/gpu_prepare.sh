#!/usr/bin/env bash
# Prepares a GPU check (tools/gpu_check.sh) on a machine without network access: copies the
# GoogleTest sources of this machine (/usr/src/googletest, Debian's googletest package) into
# .gpu_deps/googletest, which the kernels-only build there compiles the CUDA tests with.
# .gpu_deps/ is git-ignored: a run on the GPU machine must bring it along with the checkout.
# Usage: tools/gpu_prepare.sh [googletest source dir]
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-/usr/src/googletest}
if [ ! -f "$src/CMakeLists.txt" ]; then
  echo "gpu_prepare: no GoogleTest sources at $src (install the googletest package)" >&2
  exit 1
fi
rm -rf .gpu_deps/googletest
mkdir -p .gpu_deps
cp -r "$src" .gpu_deps/googletest
grep -qxF '/.gpu_deps/' .gitignore || echo '/.gpu_deps/' >> .gitignore
echo "gpu_prepare: .gpu_deps/googletest ready ($(du -sh .gpu_deps | cut -f1))"
