"""The README's curl and gRPC examples, run exactly as printed (only the ports are changed when
the defaults are taken) against a server started as `tools/run.sh` starts it."""
import os
import re
import subprocess

import pytest

from conftest import ROOT, Server


def blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        return re.findall(r"```sh\n(.*?)```", f.read(), re.S)


@pytest.fixture(scope="module")
def default_server():
    s = Server("--served_model_name", "tiny")
    yield s
    s.stop()


def test_readme_examples_run(default_server):
    found = blocks()
    assert len(found) >= 4
    for block in found:
        cmd = block.replace("localhost:8000", f"localhost:{default_server.http_port}")
        cmd = cmd.replace("localhost:50051", f"localhost:{default_server.grpc_port}")
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{block}\n{r.stdout}\n{r.stderr}"
        assert r.stdout.strip(), block
        assert '"error"' not in r.stdout, r.stdout
