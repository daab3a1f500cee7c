"""OpenAI-compatible HTTP API over the network: completions and chat, streaming and not,
models, health, readiness and Prometheus metrics."""
import json
import os
import re
import subprocess
import time

import requests

from conftest import BIN, ROOT


def sse_events(resp):
    events = []
    for line in resp.iter_lines(decode_unicode=True):
        if line.startswith("data: "):
            events.append(line[len("data: "):])
    return events


def test_health_ready_models(server):
    assert requests.get(server.url + "/health").json() == {"status": "ok"}
    assert requests.get(server.url + "/ready").status_code == 200
    models = requests.get(server.url + "/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["object"] == "model"


def test_version_is_the_projects_on_every_face(server):
    """GET /version, --version of every program and the ready line give the version of CMakeLists.txt's
    project() line."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        want = re.search(r"project\(LatentServe VERSION (\d+\.\d+\.\d+)", f.read()).group(1)
    assert requests.get(server.url + "/version").json() == {"version": want}
    assert requests.post(server.url + "/version").status_code == 405
    bins = os.path.dirname(BIN)
    # The sanitizer builds make the server and the generator only; a Release build makes them all.
    others = [os.path.join(bins, p) for p in ("latentserve-tokenize", "latentserve-calibrate", "latentserve-bench")]
    for program in [BIN, os.path.join(bins, "latentserve-generate")] + [p for p in others if os.path.exists(p)]:
        r = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stdout == f"LatentServe {want}\n", (program, r.stdout, r.stderr)
    assert f'"version":"{want}"' in server.logs()


def test_completion_non_stream_has_usage_and_is_deterministic_when_greedy(server):
    body = {"prompt": "In the beginning", "max_tokens": 8, "temperature": 0}
    a = requests.post(server.url + "/v1/completions", json=body).json()
    b = requests.post(server.url + "/v1/completions", json=body).json()
    assert a["object"] == "text_completion"
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    assert a["choices"][0]["finish_reason"] in ("stop", "length")
    u = a["usage"]
    assert u["prompt_tokens"] > 0 and 0 < u["completion_tokens"] <= 8
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]


def test_completion_stream_equals_non_stream(server):
    body = {"prompt": "And God said", "max_tokens": 10, "temperature": 0, "ignore_eos": True}
    full = requests.post(server.url + "/v1/completions", json=body).json()["choices"][0]["text"]
    with requests.post(server.url + "/v1/completions", json={**body, "stream": True,
                       "stream_options": {"include_usage": True}}, stream=True) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    assert text == full
    assert chunks[-1]["usage"]["completion_tokens"] == 10
    assert [c for c in chunks if c["choices"]][-1]["choices"][0]["finish_reason"] == "length"


def test_continuous_usage_stats_put_each_choices_usage_in_every_chunk(server):
    """vLLM's stream_options.continuous_usage_stats (with include_usage): every chunk carries its
    choice's usage so far, counting up to the final usage; without include_usage, none does."""
    body = {"prompt": ["And God said", "In the beginning God"], "n": 2, "max_tokens": 6, "temperature": 0.8,
            "seed": 3, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    with requests.post(server.url + "/v1/completions", json=body, stream=True) as r:
        assert r.status_code == 200, r.text
        chunks = [json.loads(e) for e in sse_events(r)[:-1]]
    prompts = [len(requests.post(server.url + "/tokenize", json={"prompt": p}).json()["tokens"]) for p in body["prompt"]]
    seen = {}
    for c in chunks[:-1]:
        i = c["choices"][0]["index"]
        u = c["usage"]
        assert u["prompt_tokens"] == prompts[i // 2], (i, u)
        assert u["completion_tokens"] >= seen.get(i, 0) and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
        seen[i] = u["completion_tokens"]
    assert seen == {0: 6, 1: 6, 2: 6, 3: 6}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 24
    body["stream_options"] = {"continuous_usage_stats": True, "include_obfuscation": False}
    with requests.post(server.url + "/v1/completions", json=body, stream=True) as r:
        chunks = [json.loads(e) for e in sse_events(r)[:-1]]
    assert chunks and not any("usage" in c for c in chunks)
    r = requests.post(server.url + "/v1/completions", json={**body, "stream_options": {"include_usage": 1}})
    assert r.status_code == 400 and "'stream_options.include_usage' must be true or false" in r.json()["error"]["message"]
    r = requests.post(server.url + "/v1/completions", json={**body, "stream_options": {"usage": True}})
    assert r.status_code == 400 and "'stream_options.usage' is not a stream option" in r.json()["error"]["message"]


def test_x_request_id_is_echoed_and_logged(server):
    """A client's X-Request-Id comes back on the reply (whole or streamed, and on every route) and
    in the request's log line; without one, a generation's reply carries its own id."""
    body = {"prompt": "And God said", "max_tokens": 2}
    r = requests.post(server.url + "/v1/completions", json=body, headers={"X-Request-Id": "trace-42.a:b_c"})
    assert r.status_code == 200 and r.headers["X-Request-Id"] == "trace-42.a:b_c"
    with requests.post(server.url + "/v1/chat/completions", stream=True, headers={"X-Request-Id": "trace-43"},
                       json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "stream": True}) as s:
        assert s.headers["X-Request-Id"] == "trace-43"
        sse_events(s)
    r = requests.post(server.url + "/v1/completions", json=body)
    assert r.headers["X-Request-Id"] == r.json()["id"]
    r = requests.post(server.url + "/v1/completions", json=body, headers={"X-Request-Id": "not ok <script>"})
    assert r.headers["X-Request-Id"] == r.json()["id"]  # not echoed: it is not a plain id
    assert requests.get(server.url + "/health", headers={"X-Request-Id": "hc-1"}).headers["X-Request-Id"] == "hc-1"
    r = requests.post(server.url + "/v1/completions", json={"prompt": "x", "max_tokens": 0},
                      headers={"X-Request-Id": "bad-1"})
    assert r.status_code == 400 and r.headers["X-Request-Id"] == "bad-1"
    for _ in range(50):
        lines = [json.loads(l) for l in server.logs().splitlines() if '"client_request_id"' in l]
        if {l["client_request_id"] for l in lines} >= {"trace-42.a:b_c", "trace-43"}:
            break
        time.sleep(0.1)
    assert {l["client_request_id"] for l in lines} >= {"trace-42.a:b_c", "trace-43"}, lines
    assert all(l["id"].startswith(("cmpl-", "chatcmpl-")) for l in lines)


def test_prompt_as_token_ids(server):
    r = requests.post(server.url + "/v1/completions", json={"prompt": [5, 6, 7, 8], "max_tokens": 3})
    assert r.status_code == 200
    assert r.json()["usage"]["prompt_tokens"] == 4


def test_chat_non_stream_and_stream(server):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who made the heaven?"}]
    r = requests.post(server.url + "/v1/chat/completions", json={"messages": msgs, "max_tokens": 6, "temperature": 0})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    with requests.post(server.url + "/v1/chat/completions",
                       json={"messages": msgs, "max_tokens": 6, "temperature": 0, "stream": True}, stream=True) as s:
        events = sse_events(s)
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == body["choices"][0]["message"]["content"]


def test_sampling_extensions_and_logprobs(server):
    body = {"prompt": "The Lord", "max_tokens": 5, "temperature": 0.8, "top_k": 20, "top_p": 0.9, "min_p": 0.05,
            "repetition_penalty": 1.1, "seed": 7, "logprobs": 3, "priority": 1}
    a = requests.post(server.url + "/v1/completions", json=body).json()
    b = requests.post(server.url + "/v1/completions", json=body).json()
    assert a["choices"][0]["text"] == b["choices"][0]["text"], "same seed, same text"
    lp = a["choices"][0]["logprobs"]
    assert len(lp["token_logprobs"]) == a["usage"]["completion_tokens"]
    assert all(len(t) <= 3 for t in lp["top_logprobs"])


def test_n_choices(server):
    r = requests.post(server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 3, "n": 3, "seed": 1})
    assert r.status_code == 200
    assert [c["index"] for c in r.json()["choices"]] == [0, 1, 2]
    # Up to OpenAI's 128 choices, each choice i drawn with seed + i, streamed or not.
    body = {"prompt": "In the beginning", "max_tokens": 6, "n": 128, "seed": 3, "temperature": 1.0}
    many = requests.post(server.url + "/v1/completions", json=body, timeout=120).json()["choices"]
    assert [c["index"] for c in many] == list(range(128))
    assert len({c["text"] for c in many}) > 64, "distinct draws"
    one = requests.post(server.url + "/v1/completions", json={**body, "n": 1, "seed": 3 + 100}).json()["choices"][0]
    assert one["text"] == many[100]["text"]
    events = requests.post(server.url + "/v1/completions", json={**body, "stream": True}, stream=True, timeout=120)
    texts = [""] * 128
    for line in events.iter_lines(decode_unicode=True):
        if line.startswith("data: {"):
            for c in json.loads(line[6:])["choices"]:
                texts[c["index"]] += c["text"]
    assert texts == [c["text"] for c in many]
    r = requests.post(server.url + "/v1/completions", json={**body, "n": 129})
    assert r.status_code == 400 and "'n'" in r.text


def test_stop_string_is_not_emitted(server):
    base = {"prompt": "And God said", "max_tokens": 12, "temperature": 0, "ignore_eos": True}
    full = requests.post(server.url + "/v1/completions", json=base).json()["choices"][0]["text"]
    words = full.split()
    if len(words) < 3:
        return
    stop = words[2]
    cut = requests.post(server.url + "/v1/completions", json={**base, "stop": [stop]}).json()["choices"][0]
    assert stop not in cut["text"]
    assert full.startswith(cut["text"])
    assert cut["finish_reason"] == "stop"
    # include_stop_str_in_output (vLLM's): the same text, then the stop string; streamed too.
    for stream in (False, True):
        body = {**base, "stop": [stop], "include_stop_str_in_output": True, "stream": stream}
        r = requests.post(server.url + "/v1/completions", json=body)
        text = "".join(json.loads(line[6:])["choices"][0]["text"] for line in r.text.splitlines()
                       if line.startswith("data: {")) if stream else r.json()["choices"][0]["text"]
        assert text == cut["text"] + stop, (text, cut["text"], stop)


def test_metrics_exposition(server):
    requests.post(server.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2})
    text = requests.get(server.url + "/metrics").text
    for name in ("latentserve_requests_total", "latentserve_handler_failures_total",
                 "latentserve_time_to_first_token_seconds_bucket",
                 "latentserve_inter_token_latency_seconds_bucket", "latentserve_e2e_request_latency_seconds_bucket",
                 "latentserve_num_requests_running", "latentserve_num_requests_waiting",
                 "latentserve_kv_cache_usage_ratio", "latentserve_prefix_cache_hits_tokens_total",
                 "latentserve_expert_load_max_over_mean"):
        assert name in text, name
    version = requests.get(server.url + "/version").json()["version"]
    assert f'latentserve_build_info{{version="{version}"}} 1\n' in text


def test_cache_salt_scopes_the_prefix_cache(server, grpc_stubs):
    """Requests share cached prefixes only with requests of the same cache_salt (vLLM's), over HTTP
    and gRPC; the text is the same either way."""
    import grpc
    prompt = list(range(300, 364))  # 64 ids: four full blocks of 16
    body = {"prompt": prompt, "max_tokens": 4, "temperature": 0, "ignore_eos": True}

    def cached(**extra):
        r = requests.post(server.url + "/v1/completions", json={**body, **extra}).json()
        return r["usage"]["prompt_tokens_details"]["cached_tokens"], r["choices"][0]["text"]

    first, text = cached(cache_salt="tenant-a")
    assert first == 0
    assert cached(cache_salt="tenant-a") == (48, text), "the same salt shares"
    assert cached(cache_salt="tenant-b") == (0, text), "another salt does not"
    assert cached()[0] == 0, "nor does a request without one"
    pb2, pb2_grpc = grpc_stubs
    stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
    for salt, want in (("tenant-a", 48), ("tenant-c", 0)):
        msgs = list(stub.Generate(pb2.GenerateRequest(token_ids=pb2.TokenIds(ids=prompt), cache_salt=salt,
                                                      sampling=pb2.SamplingParams(max_tokens=2, temperature=0))))
        assert msgs[-1].usage.cached_prompt_tokens == want, salt
    for bad in ("", 5):
        r = requests.post(server.url + "/v1/completions", json={**body, "cache_salt": bad})
        assert r.status_code == 400 and r.json()["error"]["param"] == "cache_salt", r.text
