"""Auth, admission control (429), cancellation freeing KV blocks, SIGTERM drain with requests in
flight, and 1000 concurrent streaming connections."""
import asyncio
import os
import re
import signal
import tempfile
import threading
import time

import grpc
import pytest
import requests

from conftest import Server, self_signed_cert

C = "/v1/completions"


def test_api_key_required_except_health_ready_and_version(grpc_stubs):
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write("# keys\nsecret-one\n\nsecret-two\n")
    s = Server("--api_key_file", f.name)
    try:
        assert requests.get(s.url + "/health").status_code == 200
        assert requests.get(s.url + "/ready").status_code == 200
        assert requests.get(s.url + "/version").status_code == 200
        assert requests.post(s.url + C, json={"prompt": "x", "max_tokens": 1}).status_code == 401
        bad = {"Authorization": "Bearer nope"}
        assert requests.post(s.url + C, json={"prompt": "x", "max_tokens": 1}, headers=bad).status_code == 401
        assert requests.get(s.url + "/metrics").status_code == 401
        good = {"Authorization": "Bearer secret-two"}
        assert requests.post(s.url + C, json={"prompt": "x", "max_tokens": 1}, headers=good).status_code == 200
        assert requests.get(s.url + "/v1/models", headers=good).status_code == 200
        # Stored responses are the key holders' too: every route under /v1/responses/ asks for one.
        stored = requests.post(s.url + "/v1/responses", json={"input": "x", "max_output_tokens": 1}, headers=good)
        rid = stored.json()["id"]
        for method, path in (("GET", rid), ("GET", rid + "/input_items"), ("POST", rid + "/cancel"), ("DELETE", rid)):
            assert requests.request(method, f"{s.url}/v1/responses/{path}").status_code == 401, (method, path)
            assert requests.request(method, f"{s.url}/v1/responses/{path}", headers=bad).status_code == 401
        assert requests.get(f"{s.url}/v1/responses/{rid}", headers=good).json()["id"] == rid
        assert "secret-two" not in s.logs() and "secret-one" not in s.logs()
        pb2, pb2_grpc = grpc_stubs
        stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
        with pytest.raises(grpc.RpcError) as e:
            stub.GetModelInfo(pb2.GetModelInfoRequest())
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        info = stub.GetModelInfo(pb2.GetModelInfoRequest(), metadata=[("authorization", "Bearer secret-one")])
        assert info.vocab_size > 0
    finally:
        s.stop()
        os.unlink(f.name)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS:")).split()[1])


def test_overload_gets_429_and_service_recovers(grpc_stubs):
    # 10x the waiting-queue limit in flight at once.
    s = Server("--max_waiting", "4", "--max_num_seqs", "2")
    try:
        rss_before = rss_kib(s.proc.pid)
        codes = []
        lock = threading.Lock()

        def call():
            r = requests.post(s.url + C, json={"prompt": "x", "max_tokens": 40, "ignore_eos": True})
            with lock:
                codes.append((r.status_code, r.headers.get("Retry-After")))

        threads = [threading.Thread(target=call) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = [c for c, _ in codes]
        assert statuses.count(429) > 0, statuses
        assert set(statuses) <= {200, 429}
        assert all(ra == "1" for c, ra in codes if c == 429)
        assert rss_kib(s.proc.pid) < rss_before + 64 * 1024, "memory stays bounded under overload"
        pb2, pb2_grpc = grpc_stubs
        stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
        # Service is normal right after.
        assert requests.post(s.url + C, json={"prompt": "x", "max_tokens": 2}).status_code == 200
        # A request that alone fans out past the queue (prompts times n) could never be queued: 400,
        # not a 429 to retry for ever.
        for body in ({"prompt": "x", "max_tokens": 2, "n": 5}, {"prompt": ["x", "y", "z"], "max_tokens": 2, "n": 2}):
            r = requests.post(s.url + C, json=body)
            assert r.status_code == 400 and "could never be queued" in r.text, r.text
        assert requests.post(s.url + C, json={"prompt": "x", "max_tokens": 2, "n": 4}).status_code == 200
        assert list(stub.Generate(pb2.GenerateRequest(text="x", sampling=pb2.SamplingParams(max_tokens=2))))
    finally:
        s.stop()


def test_client_disconnect_cancels_and_frees_blocks(server, grpc_stubs):
    cancelled = 'latentserve_engine_requests_finished_total{reason="cancelled"}'
    before = server.metric(cancelled)  # the session's server: other tests' cancellations count too
    # HTTP: read the first chunk of a long stream, then hang up.
    r = requests.post(server.url + C, json={"prompt": "x", "max_tokens": 240, "ignore_eos": True, "stream": True},
                      stream=True)
    next(r.iter_lines())
    r.close()
    # gRPC: cancel a long stream.
    pb2, pb2_grpc = grpc_stubs
    stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
    call = stub.Generate(pb2.GenerateRequest(text="x", sampling=pb2.SamplingParams(max_tokens=240, ignore_eos=True)))
    next(call)
    call.cancel()
    deadline = time.time() + 60
    # Both requests end cancelled and give their blocks back (the counter and the gauges are
    # separate metrics, read one after the other: wait for all three).
    while time.time() < deadline:
        if (server.metric("latentserve_kv_cache_blocks_used") == 0 and
                server.metric("latentserve_num_requests_running") == 0 and server.metric(cancelled) >= before + 2):
            break
        time.sleep(0.1)
    state = {name: server.metric("latentserve_" + name) for name in
             ("kv_cache_blocks_used", "num_requests_running", "num_requests_waiting")}
    assert state["kv_cache_blocks_used"] == 0, (state, server.logs()[-4000:])
    assert server.metric(cancelled) >= before + 2


def test_sigterm_drains_in_flight_requests():
    s = Server("--drain_timeout_s", "60")
    results = []

    def call():
        r = requests.post(s.url + C, json={"prompt": "x", "max_tokens": 240, "ignore_eos": True})
        results.append(r.json())

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    # SIGTERM while the engine generates for all four (a request still in the listen backlog is
    # not in flight: draining closes it unanswered, which is right but not what this test is about).
    deadline = time.time() + 30
    while time.time() < deadline and seen_by_engine(s) < 4:
        time.sleep(0.005)
    s.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join()
    assert s.proc.wait(timeout=60) == 0
    assert len(results) == 4
    assert all(r["choices"][0]["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 240 for r in results)
    draining = next(line for line in s.logs().splitlines() if '"event":"draining"' in line)
    assert int(re.search(r'"in_flight":(\d+)', draining).group(1)) >= 1, draining
    os.unlink(s.log.name)


def live_in_engine(s):
    """Requests the engine holds now: running or waiting."""
    return s.metric("latentserve_num_requests_running") + s.metric("latentserve_num_requests_waiting")


def seen_by_engine(s):
    """Requests the engine has taken in so far: finished, running or waiting."""
    finished = sum(s.metric(f'latentserve_engine_requests_finished_total{{reason="{r}"}}')
                   for r in ("stop", "length", "cancelled", "error"))
    return finished + live_in_engine(s)


def test_not_ready_while_draining():
    # One sequence at a time and twelve requests of about 0.1 s each (timed first, so on a fast
    # build and under a sanitizer alike): the drain outlasts the checks below by a wide margin.
    n = 12
    s = Server("--drain_timeout_s", "600", "--max_num_seqs", "1")
    start = time.time()
    assert requests.post(s.url + C, json={"prompt": "x", "max_tokens": 32, "ignore_eos": True}).status_code == 200
    tokens = max(20, min(250, int(0.1 / ((time.time() - start) / 32))))
    codes = []

    def call():
        r = requests.post(s.url + C, json={"prompt": "x", "max_tokens": tokens, "ignore_eos": True})
        codes.append(r.status_code)

    threads = [threading.Thread(target=call) for _ in range(n)]
    for t in threads:
        t.start()
    deadline = time.time() + 30
    while seen_by_engine(s) < n + 1:  # and the timing request
        assert time.time() < deadline
        time.sleep(0.01)
    s.proc.send_signal(signal.SIGTERM)
    deadline = time.time() + 5
    while requests.get(s.url + "/ready").status_code != 503:  # the signal takes a moment to land
        assert time.time() < deadline
        time.sleep(0.01)
    assert requests.post(s.url + C, json={"prompt": "x", "max_tokens": 1}).status_code == 503
    for t in threads:
        t.join()
    assert codes == [200] * n
    assert s.proc.wait(timeout=300) == 0
    os.unlink(s.log.name)


def test_drain_timeout_answers_what_it_cancels(grpc_stubs):
    # One sequence at a time and no time to drain: SIGTERM cancels what is in flight, and every
    # client is told so (HTTP 503, an error event in a stream, gRPC UNAVAILABLE), not hung up on.
    # The signal goes once the engine has seen all five requests; on a fast build the first ones
    # may have finished by then (250 steps each).
    s = Server("--drain_timeout_s", "0", "--max_num_seqs", "1")
    pb2, pb2_grpc = grpc_stubs
    stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
    long = {"prompt": "x", "max_tokens": 250, "ignore_eos": True}
    results = {}

    def http_call(i):
        r = requests.post(s.url + C, json=long)
        results[f"http{i}"] = (r.status_code, r.json())

    def stream_call():
        with requests.post(s.url + C, json={**long, "stream": True}, stream=True) as r:
            results["stream"] = [line for line in r.iter_lines() if line]

    def grpc_call():
        try:
            results["grpc"] = list(stub.Generate(pb2.GenerateRequest(
                text="x", sampling=pb2.SamplingParams(max_tokens=250, ignore_eos=True))))
        except grpc.RpcError as e:
            results["grpc"] = e

    threads = [threading.Thread(target=http_call, args=(i,)) for i in range(3)]
    threads += [threading.Thread(target=stream_call), threading.Thread(target=grpc_call)]
    for t in threads:
        t.start()
    deadline = time.time() + 30
    while seen_by_engine(s) < 5:
        assert time.time() < deadline
        time.sleep(0.005)
    live = live_in_engine(s)
    s.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(timeout=60)
    assert s.proc.wait(timeout=60) == 0
    logs = s.logs()
    os.unlink(s.log.name)
    assert len(results) == 5, (results, logs[-3000:])
    # A request may have finished before the signal (one runs at a time): the rest were cancelled.
    cancelled = 0
    for i in range(3):
        code, body = results[f"http{i}"]
        if code == 200:
            assert body["choices"][0]["finish_reason"] == "length"
            continue
        cancelled += 1
        assert code == 503, body
        assert "shutting down" in body["error"]["message"], body
    stream = results["stream"]
    assert stream[-1] == b"data: [DONE]", stream[-3:]
    errors = [line for line in stream if line.startswith(b'data: {"error"')]
    if errors:
        cancelled += 1
        assert "shutting down" in errors[0].decode(), errors
    if isinstance(results["grpc"], grpc.RpcError):
        cancelled += 1
        assert results["grpc"].code() == grpc.StatusCode.UNAVAILABLE
        assert "shutting down" in results["grpc"].details()
    # One sequence at a time: with two or more live, the second cannot finish before the signal.
    assert cancelled >= 1 or live < 2, (live, results)


async def _stream(port, i):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = b'{"prompt": "x", "max_tokens": 3, "stream": true, "ignore_eos": true}'
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    await writer.drain()
    data = b""
    while b"[DONE]" not in data:
        chunk = await reader.read(65536)
        if not chunk:
            break
        data += chunk
    writer.close()
    return b"[DONE]" in data


def test_thousand_concurrent_streams():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    s = Server("--max_waiting", "2048", "--max_num_seqs", "64")
    try:
        async def main():
            return await asyncio.gather(*[_stream(s.http_port, i) for i in range(1000)])

        ok = asyncio.run(main())
        assert sum(ok) == 1000
        threads = int(open(f"/proc/{s.proc.pid}/status").read().split("Threads:")[1].split()[0])
        assert threads < 64, f"{threads} threads for 1000 connections"
    finally:
        s.stop()


def test_tls_on_both_ports(tmp_path, grpc_stubs):
    cert, key = self_signed_cert(tmp_path, "server")
    s = Server("--tls_cert", str(cert), "--tls_key", str(key), ready_scheme="https", ca=str(cert))
    try:
        https = f"https://127.0.0.1:{s.http_port}"
        r = requests.post(https + C, json={"prompt": "x", "max_tokens": 2}, verify=str(cert))
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
        with pytest.raises(requests.RequestException):
            requests.get(f"http://127.0.0.1:{s.http_port}/health", timeout=5)
        pb2, pb2_grpc = grpc_stubs
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        ch = grpc.secure_channel(f"localhost:{s.grpc_port}", creds)
        assert pb2_grpc.GenerationServiceStub(ch).GetModelInfo(pb2.GetModelInfoRequest()).vocab_size > 0
    finally:
        s.stop()
