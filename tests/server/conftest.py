"""Starts the real latentserve binary on free ports for the integration tests and stops it after.

Environment: LATENTSERVE_BIN (the binary), LATENTSERVE_TEST_MODEL (model directory, default
models/tiny), LATENTSERVE_PROTO_DIR (proto/ for the gRPC client stubs), LATENTSERVE_START_TIMEOUT_S
(how long a server may take to become ready, default 60; the sanitizer builds give 300, as their
portable kernels warm up slowly), LATENTSERVE_TEST_SHARD=I/N (run only the I-th of N shards, whole
files each, so that ctest can run the suite on several cores), LATENTSERVE_TEST_WARMUP=0 (start
servers without the start-up warm-up unless a test asks for it; the sanitizer builds set it).
"""
import json
import os
import shutil
import signal
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
START_TIMEOUT_S = float(os.environ.get("LATENTSERVE_START_TIMEOUT_S", "60"))
# Whether servers run the start-up warm-up unless a test says (default yes, as users run them). The
# sanitizer passes set LATENTSERVE_TEST_WARMUP=0: there the warm-up costs seconds per start, over a
# hundred starts, and tests/server/test_warmup.py still runs it.
WARMUP = os.environ.get("LATENTSERVE_TEST_WARMUP", "1") != "0"


# Each file's share of the suite's time (seconds under ASan plus seconds under TSan, servers started
# without the warm-up), for splitting it into shards of about equal length in every pass; a file
# not listed counts 2.
_FILE_COST = {
    "test_lifecycle.py": 67, "test_expert_parallel.py": 59, "test_tool_call_grammar.py": 47,
    "test_structured_output.py": 44, "test_responses_api.py": 19, "test_generation_config.py": 18,
    "test_chat_tools.py": 16, "test_connections.py": 15, "test_bad_input.py": 13,
    "test_published_families.py": 12, "test_speculative.py": 11, "test_warmup.py": 10, "test_dashboard.py": 8,
    "test_request_fields.py": 5, "test_completions_scoring.py": 5,
}


def shard_of_files(files, shards):
    """Deals whole files to SHARDS shards, costliest first, each to the shard with the least so far:
    {file: shard index}. The same files give the same deal in every process."""
    def cost(f):
        return _FILE_COST.get(os.path.basename(f), 2)

    load = [0.0] * shards
    deal = {}
    for f in sorted(files, key=lambda f: (-cost(f), f)):
        i = min(range(shards), key=lambda k: (load[k], k))
        deal[f] = i
        load[i] += cost(f)
    return deal


def pytest_collection_modifyitems(config, items):
    shard = os.environ.get("LATENTSERVE_TEST_SHARD")
    if not shard:
        return
    index, count = (int(x) for x in shard.split("/"))
    if not 1 <= index <= count:
        raise pytest.UsageError(f"LATENTSERVE_TEST_SHARD={shard}: want I/N with 1 <= I <= N")
    deal = shard_of_files({str(item.path) for item in items}, count)
    kept = [item for item in items if deal[str(item.path)] == index - 1]
    config.hook.pytest_deselected(items=[item for item in items if deal[str(item.path)] != index - 1])
    items[:] = kept


def _ready_line(log):
    """The server's "ready" log line as a dict, once it has been written whole; else None."""
    for line in log.splitlines():
        if '"event":"ready"' in line:
            try:
                return json.loads(line)
            except ValueError:
                return None  # still being written
    return None


def self_signed_cert(tmp_path, name):
    """A fresh self-signed certificate for localhost / 127.0.0.1 and its key: (cert, key) paths."""
    cert, key = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


class Server:
    """A running latentserve process. It listens on ports the kernel picks (--http_port 0
    --grpc_port 0: no other process can take them between choosing and binding) and is ready
    when its "ready" log line, which names both ports, has been written (after both servers
    listen) and /ready answers 200."""

    def __init__(self, *extra, env=None, ready_scheme="http", ca=None, launcher=(), model=None, warmup=None):
        # launcher: a command the server runs under (mpirun and its options, for a rank group).
        # warmup: None follows LATENTSERVE_TEST_WARMUP (see WARMUP); a --warmup flag or a
        # LATENTSERVE_WARMUP variable among the arguments decides for itself.
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        if warmup is None:
            warmup = WARMUP or any(a.startswith(("--warmup", "--nowarmup")) for a in extra) or \
                "LATENTSERVE_WARMUP" in (env or {})
        args = [*launcher, BIN, "--model", model or MODEL, "--host", "127.0.0.1", "--http_port", "0", "--grpc_port",
                "0", "--kv_cache_mb", "64", *([] if warmup else ["--nowarmup"]), *extra]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + START_TIMEOUT_S
        ready = None
        while time.time() < deadline and ready is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.logs()}")
            ready = _ready_line(self.logs())
            time.sleep(0.02)
        if ready is None:
            raise RuntimeError("server did not become ready: " + self.logs())
        self.ready = ready  # the ready log line's fields: ports, backend, warm-up, ...
        self.http_port, self.grpc_port = ready["http_port"], ready["grpc_port"]
        self.url = f"http://127.0.0.1:{self.http_port}"
        r = requests.get(f"{ready_scheme}://127.0.0.1:{self.http_port}/ready", timeout=10, verify=ca or True)
        assert r.status_code == 200, r.text

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

    def settle_migration(self):
        """Waits (up to 30 s) until the expert-migration chunk counter stops moving: a re-plan being
        copied under --replan_itl_budget_ms goes on while the server is idle, chunk after chunk, so
        figures read at different times only agree once it has finished."""
        last = None
        for _ in range(150):
            now = self.metric("latentserve_expert_migration_chunks_total")
            if now == last:
                return
            last = now
            time.sleep(0.2)

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
        # Whatever the tests sent, no handler may have failed: an exception out of one is a fault of
        # the server's (answered 500 or INTERNAL) that no input may cause.
        failures = [line for line in self.logs().splitlines() if '_handler_failed"' in line]
        os.unlink(self.log.name)
        assert not failures, "a request handler failed:\n" + "\n".join(failures[:10])


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
