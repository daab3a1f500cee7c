#!/usr/bin/env bash
# Prepares the Python environment of the integration tests (server, deployment, soak) at VENV:
# Debian's pytest / grpcio / requests / yaml (tools/setup.sh installs them) through
# --system-site-packages, plus, from PyPI, the `openai` and `openai-agents` packages and gRPC's health/reflection
# client stubs (matching Debian's grpcio). Does nothing when they are all there already.
# tools/test.sh runs it, and so does ctest (test `python_env`, before the tests that need it).
# Exits 0 when the environment has at least what every test needs (pytest, requests, grpc, yaml);
# the PyPI packages only widen it, and a test that needs one skips without it. Exits 77 (ctest:
# skipped) when it cannot be made, saying why.
# Usage: tools/python_env.sh VENV   (LATENTSERVE_NO_PYPI=1: Debian's packages only)
set -uo pipefail
venv=${1:?usage: tools/python_env.sh VENV}
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv" || {
    echo "python_env: could not create $venv (Debian: python3-venv; tools/setup.sh installs it)" >&2
    exit 77
  }
fi
if [ "${LATENTSERVE_NO_PYPI:-0}" != 1 ] &&
  ! "$venv/bin/python" -c "import openai, agents, grpc_health.v1, grpc_reflection.v1alpha" 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check openai openai-agents==0.24.0 &&
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps \
      grpcio-health-checking==1.51.1 grpcio-reflection==1.51.1 ||
    echo "python_env: could not install openai / openai-agents / grpcio-health-checking / grpcio-reflection from PyPI;" \
      "the tests that use them will skip" >&2
fi
missing=$("$venv/bin/python" - <<'EOF' || echo "(python does not run)"
import importlib.util
print(" ".join(m for m in ("pytest", "requests", "grpc", "yaml") if importlib.util.find_spec(m) is None))
EOF
)
if [ -n "$missing" ]; then
  echo "python_env: $venv lacks $missing (Debian: python3-pytest python3-requests python3-grpcio" \
    "python3-yaml; tools/setup.sh installs them)" >&2
  exit 77
fi
echo "python_env: $venv is ready"
