#!/usr/bin/env bash
# Installs the Debian packages LatentServe needs (run as root, or with sudo available): `run` the
# ones to build and start the server (tools/run.sh, and the CPU container image's build step),
# `test` those plus everything the test suite uses (tools/test.sh). Default: test.
# Usage: tools/setup.sh [run|test]
set -euo pipefail

run_packages=(
  cmake ninja-build g++ ccache pkg-config      # build
  libpcre2-dev                                 # tokenizer pre-tokenization regexes (Unicode properties)
  libutf8proc-dev                              # NFC normalization for tokenizers that ask for it
  libabsl-dev                                  # Status/StatusOr, flags, strings
  nlohmann-json3-dev                           # config.json, safetensors headers
  libgrpc++-dev protobuf-compiler-grpc         # gRPC front end (+ health, reflection)
  libprotobuf-dev protobuf-compiler            # the API's protobuf messages
  libboost-dev libboost-system-dev libssl-dev  # HTTP front end (Beast/Asio), TLS
)
test_packages=(
  libgtest-dev libgmock-dev googletest         # tests (googletest: the sources, for the aarch64 cross build)
  python3-pytest python3-grpcio python3-requests python3-venv python3-pip  # server integration tests
  python3-yaml yamllint                        # deployment manifest checks
  python3-jinja2                               # the chat tests render their template with jinja2, the oracle
  python3-jsonschema                           # structured-output tests validate the outputs with it, the oracle
  clang libclang-rt-14-dev                     # libFuzzer targets (tools/fuzz.sh)
  openssl curl                                 # TLS test certificates; README examples
  chromium python3-websocket                   # the dashboard's browser test (headless, DevTools protocol)
  openmpi-bin libopenmpi-dev                   # rank groups: mpirun launches the ranks, MPI carries step plans,
                                               # the CPU expert exchange and NCCL's bootstrap (tests: mpirun -np 2/4)
  g++-aarch64-linux-gnu qemu-user-static       # the CPU kernels cross-built for aarch64 and tested under qemu
)

case ${1:-test} in
  run) packages=("${run_packages[@]}") ;;
  test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: tools/setup.sh [run|test]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
