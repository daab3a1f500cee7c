"""Starts the real latentserve binary on free ports for the integration tests and stops it after.

Environment: LATENTSERVE_BIN (the binary), LATENTSERVE_TEST_MODEL (model directory, default
models/tiny), LATENTSERVE_PROTO_DIR (proto/ for the gRPC client stubs).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("LATENTSERVE_BIN", os.path.join(ROOT, "build", "bin", "latentserve"))
MODEL = os.environ.get("LATENTSERVE_TEST_MODEL", os.path.join(ROOT, "models", "tiny"))
PROTO_DIR = os.environ.get("LATENTSERVE_PROTO_DIR", os.path.join(ROOT, "proto"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running latentserve process."""

    def __init__(self, *extra, env=None, ready_scheme="http", ca=None):
        self.http_port, self.grpc_port = free_port(), free_port()
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        args = [BIN, "--model", MODEL, "--host", "127.0.0.1", "--http_port", str(self.http_port),
                "--grpc_port", str(self.grpc_port), "--kv_cache_mb", "64", *extra]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.url = f"http://127.0.0.1:{self.http_port}"
        ready_url = f"{ready_scheme}://127.0.0.1:{self.http_port}/ready"
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.logs()}")
            try:
                if requests.get(ready_url, timeout=1, verify=ca or True).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError("server did not become ready: " + self.logs())

    def logs(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def metric(self, name, headers=None):
        text = requests.get(self.url + "/metrics", headers=headers, timeout=5).text
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        raise KeyError(name)

    def stop(self):
        if self.proc.poll() is not None and self.proc.returncode != 0:
            # The server died during the tests: keep its log and say where it is.
            kept = self.log.name + ".died"
            shutil.copy(self.log.name, kept)
            sys.stderr.write(f"latentserve exited with {self.proc.returncode}; its log: {kept}\n{self.logs()[-20000:]}\n")
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.unlink(self.log.name)


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def grpc_stubs(tmp_path_factory):
    """Generates Python stubs from proto/ with protoc and the gRPC Python plugin, and imports them."""
    out = str(tmp_path_factory.mktemp("stubs"))
    plugin = shutil.which("grpc_python_plugin")
    assert plugin, "grpc_python_plugin (Debian: protobuf-compiler-grpc) is needed for the gRPC tests"
    subprocess.run(["protoc", f"-I{PROTO_DIR}", f"--python_out={out}", f"--grpc_out={out}",
                    f"--plugin=protoc-gen-grpc={plugin}", os.path.join(PROTO_DIR, "latentserve/v1/generation.proto")],
                   check=True)
    sys.path.insert(0, out)
    from latentserve.v1 import generation_pb2, generation_pb2_grpc
    return generation_pb2, generation_pb2_grpc
