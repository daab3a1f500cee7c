#!/usr/bin/env bash
# Runs an integration test with the Python of the tests' environment (tools/python_env.sh), or,
# when that environment is missing, reports the test skipped (exit 77) saying how to make it.
# Usage: tools/test_python.sh PYTHON ARGS...
python=${1:?usage: tools/test_python.sh PYTHON ARGS...}
shift
if ! "$python" -c "import pytest, requests, grpc, yaml" 2>/dev/null; then
  venv=$(dirname "$(dirname "$python")")
  echo "SKIPPED: $python is missing or lacks pytest/requests/grpc/yaml. Run tools/test.sh, which installs" \
    "the Debian packages and prepares it, or tools/python_env.sh $venv after tools/setup.sh."
  exit 77
fi
exec "$python" "$@"
