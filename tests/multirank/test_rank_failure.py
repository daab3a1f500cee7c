"""A worker rank that dies mid-run: the leader notices within its deadline, answers every request in
flight (HTTP 503, or an error event and [DONE] in a stream; gRPC UNAVAILABLE), turns /ready off and
exits with status 3 — no request hangs, no rank hangs — so that the orchestrator restarts the group;
the same when the dead rank shared the leader's tensor-parallel group.
Each rank runs under a shell that records its exit status."""
import json
import os
import signal
import subprocess
import tempfile
import threading
import time

import grpc
import pytest
import requests

from conftest import BIN, MODEL, launcher, mpi_env

DEADLINE_S = 5


def start_group(ranks, status_dir, *extra):
    # Each rank's exit status lands in status_dir/rank<N> (Open MPI names the rank in the environment)
    # and is passed on to mpirun.
    cmd = f'"{BIN}" "$@"; s=$?; echo $s > "{status_dir}/rank$OMPI_COMM_WORLD_RANK"; exit $s'
    args = [*launcher(ranks), "bash", "-c", cmd, "latentserve", "--model", MODEL, "--host", "127.0.0.1",
            "--http_port", "0", "--grpc_port", "0", "--kv_cache_mb", "64", "--threads", "1", "--max_num_seqs", "2",
            "--rank_timeout_s", str(DEADLINE_S), "--rank_heartbeat_ms", "200", *extra]
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=mpi_env())
    deadline = time.time() + 90
    while time.time() < deadline:
        with open(log.name) as f:
            for line in f:
                if '"event":"ready"' in line:
                    return proc, log.name, json.loads(line)
        assert proc.poll() is None, open(log.name).read()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the group did not become ready: " + open(log.name).read())


def http_request(url, prompt, stream, results, i):
    body = {"prompt": prompt, "max_tokens": 200, "temperature": 0, "ignore_eos": True, "stream": stream}
    try:
        r = requests.post(url + "/v1/completions", json=body, stream=stream, timeout=60)
        if not stream:
            results[i] = ("http", r.status_code, r.text)
            return
        events = [line for line in r.iter_lines() if line.startswith(b"data: ")]
        results[i] = ("stream", r.status_code, events)
    except requests.RequestException as e:
        results[i] = ("error", None, repr(e))


def grpc_request(port, stubs, results, i):
    pb2, pb2_grpc = stubs
    stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    req = pb2.GenerateRequest(text="In the beginning", sampling=pb2.SamplingParams(max_tokens=200, ignore_eos=True))
    try:
        for _ in stub.Generate(req, timeout=60):
            pass
        results[i] = ("grpc", "OK", "")
    except grpc.RpcError as e:
        results[i] = ("grpc", e.code(), e.details())


def start_requests(url, grpc_port, stubs):
    """Requests in flight: more than the running batch holds (--max_num_seqs 2), so some wait."""
    results = [None] * 16
    threads = [threading.Thread(target=http_request, args=(url, "And the LORD said", i % 2 == 0, results, i))
               for i in range(14)]
    threads += [threading.Thread(target=grpc_request, args=(grpc_port, stubs, results, i)) for i in (14, 15)]
    for t in threads:
        t.start()
    return results, threads


def requests_wait(url, threads, timeout=30):
    """True once the server reports requests waiting behind the running batch: killing a rank from
    then on is sure to catch requests in flight. False when every request finished before this
    poll saw any wait (a fast host, or a poll starved on a loaded one)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in requests.get(url + "/metrics", timeout=10).text.splitlines():
            if line.startswith("latentserve_num_requests_waiting") and float(line.split()[-1]) > 0:
                return True
        if not any(t.is_alive() for t in threads):
            return False
        time.sleep(0.01)
    raise AssertionError("no request waited behind the running batch, and the requests did not finish")


@pytest.mark.parametrize("ranks,tensor_parallel", [(2, 1), (4, 1), (2, 2)])
def test_worker_death_gets_every_request_answered_and_the_leader_out(ranks, tensor_parallel, grpc_stubs):
    # With --tensor_parallel_size 2 the victim is the leader's partner in its tensor-parallel group:
    # the leader waits for it in a layer's all-reduce.
    status_dir = tempfile.mkdtemp()
    proc, log, ready = start_group(ranks, status_dir, "--tensor_parallel_size", str(tensor_parallel))
    url = f"http://127.0.0.1:{ready['http_port']}"
    victim = ready["workers"]["1"]["pid"]
    try:
        for _ in range(5):  # until requests are seen waiting behind the running ones
            results, threads = start_requests(url, ready["grpc_port"], grpc_stubs)
            if requests_wait(url, threads):
                break
            for t in threads:
                t.join(timeout=60)
        else:
            raise AssertionError("in 5 tries, no request was seen waiting behind the running batch")
        assert requests.get(url + "/ready").status_code == 200
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)
        for t in threads:
            t.join(timeout=60)
        answered_at = time.time()
        assert not any(t.is_alive() for t in threads), "a request hung"
        leader_status = os.path.join(status_dir, "rank0")
        while not os.path.exists(leader_status) and time.time() < killed_at + 60:
            time.sleep(0.05)
        exited_at = time.time()
        # mpirun itself ends once its own abort has run (it waits out its kill timeout, twice).
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = open(log).read()
    # Answered: none hung up on, each told the server is unavailable (unless it finished before the death).
    for kind, status, body in results:
        if kind == "http":
            assert status in (200, 503), (status, body)
            if status == 503:
                assert "rank group failed" in json.loads(body)["error"]["message"]
        elif kind == "stream":
            assert status == 200 and body[-1] == b"data: [DONE]", body
            if not json.loads(body[-2][6:]).get("choices"):
                assert "rank group failed" in json.loads(body[-2][6:])["error"]["message"], body[-2]
        elif kind == "grpc":
            assert status in ("OK", grpc.StatusCode.UNAVAILABLE), (status, body)
        else:
            raise AssertionError(f"a request got no answer: {body}")
    assert any(r[1] in (503, grpc.StatusCode.UNAVAILABLE) or (r[0] == "stream" and b"rank group failed" in b"".join(r[2]))
               for r in results), "the death cut some request off"
    # Noticed within the deadline (plus a step), answered, and out with status 3 (the front ends get
    # up to 5 s to write the answers).
    assert answered_at - killed_at < DEADLINE_S + 10, answered_at - killed_at
    assert exited_at - killed_at < DEADLINE_S + 15, exited_at - killed_at
    assert '"event":"rank_group_failed"' in text, text
    assert open(os.path.join(status_dir, "rank0")).read().strip() == "3", text
    assert proc.returncode != 0
    # The other workers did not hang either: each ended on its own deadline with status 3 (or was
    # stopped by mpirun once the leader had gone).
    for r in range(2, ranks):
        path = os.path.join(status_dir, f"rank{r}")
        assert not os.path.exists(path) or open(path).read().strip() in ("3", "143", "137"), open(path).read()
