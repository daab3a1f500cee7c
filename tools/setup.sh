#!/usr/bin/env bash
# Installs the Debian packages LatentServe builds and tests with (run as root, or with sudo
# available). The same script is the build step of the CPU container image.
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache pkg-config      # build
  libpcre2-dev                                 # tokenizer pre-tokenization regexes (Unicode properties)
  libutf8proc-dev                              # NFC normalization for tokenizers that ask for it
  libabsl-dev                                  # Status/StatusOr, flags, strings
  nlohmann-json3-dev                           # config.json, safetensors headers
  libgrpc++-dev protobuf-compiler-grpc         # gRPC front end (+ health, reflection)
  libprotobuf-dev protobuf-compiler            # the API's protobuf messages
  libboost-dev libboost-system-dev libssl-dev  # HTTP front end (Beast/Asio), TLS
  libgtest-dev libgmock-dev                    # tests
  python3-pytest python3-grpcio python3-requests python3-venv python3-pip  # server integration tests
  protobuf-compiler-grpc                       # grpc_python_plugin for the tests' client stubs
  python3-yaml yamllint                        # deployment manifest checks
  python3-jinja2                               # the chat tests render their template with jinja2, the oracle
  clang libclang-rt-14-dev                     # libFuzzer targets (tools/fuzz.sh)
  openssl curl                                 # TLS test certificates; README examples
  chromium python3-websocket                   # the dashboard's browser test (headless, DevTools protocol)
  openmpi-bin libopenmpi-dev                   # rank groups: mpirun launches the ranks, MPI carries step plans,
                                               # the CPU expert exchange and NCCL's bootstrap (tests: mpirun -np 2/4)
)

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
