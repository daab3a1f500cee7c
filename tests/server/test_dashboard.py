"""/v1/expert_load and /dashboard through the real server: the JSON carries what gRPC GetExpertLoad
carries (tokens since start, device rows, replica map) plus the load window, agrees with /metrics,
answers fast; the page is self-contained; with --api_key_file the page, the JSON and /metrics need a
key or the session cookie the login form sets, and that cookie opens nothing else.
(tests/browser/test_dashboard_browser.py drives the page itself in Chromium.)"""
import os
import re
import tempfile
import time

import grpc
import requests

from conftest import Server

C = "/v1/completions"


def complete(s, n=6, headers=None):
    for i in range(n):
        r = requests.post(s.url + C, json={"prompt": f"And it came to pass {i}", "max_tokens": 12, "temperature": 0,
                                           "ignore_eos": True}, headers=headers)
        assert r.status_code == 200, r.text


def metric_samples(text, name):
    """{labels string: value} for every sample of `name`."""
    out = {}
    for line in text.splitlines():
        m = re.match(re.escape(name) + r"(\{[^}]*\})? (\S+)$", line)
        if m:
            out[m.group(1) or ""] = float(m.group(2))
    return out


def test_expert_load_is_the_grpc_twin_plus_the_window(grpc_stubs):
    s = Server("--devices", "2", "--expert_slots", "40", "--replan_interval", "4", "--load_window", "16")
    try:
        start = time.time()
        complete(s)
        # A plan runs in the background and switches in at a later step: send more until one has.
        deadline = time.time() + 30
        while requests.get(s.url + "/v1/expert_load").json()["replans"] == 0 and time.time() < deadline:
            complete(s, 2)
        # A step is counted before its tokens reach the client, so with no request running the
        # window holds still; the three views are compared between two reads of it that agree.
        pb2, pb2_grpc = grpc_stubs
        stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
        for _ in range(50):
            t0 = time.perf_counter()
            r = requests.get(s.url + "/v1/expert_load?totals=true")
            elapsed = time.perf_counter() - t0
            assert r.status_code == 200, r.text
            assert r.headers["Content-Type"] == "application/json"
            j = r.json()
            g = stub.GetExpertLoad(pb2.GetExpertLoadRequest())
            metrics = requests.get(s.url + "/metrics").text
            after = requests.get(s.url + "/v1/expert_load?totals=true").json()
            if after["window"] == j["window"] and after["layers"] == j["layers"]:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the expert load kept changing with no request running")

        assert j["object"] == "expert_load" and j["model"] == "tiny"
        assert j["num_devices"] == g.num_devices == 2 and j["slots_per_device"] == g.slots_per_device == 40
        assert j["num_experts"] == 64 and j["num_layers"] == 4
        assert j["replans"] == g.replans >= 1
        assert start - 1 <= j["time"] <= time.time() + 1
        assert [l["layer"] for l in j["layers"]] == [l.layer for l in g.layers] == [0, 1, 2, 3]
        for lj, lg in zip(j["layers"], g.layers):
            assert lj["tokens_total"] == list(lg.tokens_per_expert)
            assert abs(lj["total_max_over_mean"] - lg.max_over_mean) < 1e-9
            assert lj["device_rows"] == list(lg.rows_per_device)
            assert abs(lj["device_max_over_mean"] - lg.device_max_over_mean) < 1e-9
            assert [e for dev in lj["slot_expert"] for e in dev] == list(lg.slot_expert)
            assert [len(dev) for dev in lj["slot_expert"]] == [40, 40]
            placed = {e for dev in lj["slot_expert"] for e in dev if e >= 0}
            assert placed == set(range(64)), "every expert has a replica"
            for dev in lj["slot_expert"]:
                assert len([e for e in dev if e >= 0]) == len({e for e in dev if e >= 0}), "one copy per device"

        # The window: at most --load_window steps, between the server's start and now; each layer
        # but the last routed the same tokens (top-4 each), and no more than since start. The last
        # layer routes only the rows whose logits are read (a prompt's last token), so fewer.
        w = j["window"]
        assert 0 < w["steps"] <= 16 and w["capacity"] == 16
        assert start - 1 <= w["first_step_time"] <= w["last_step_time"] <= j["time"]
        sums = {sum(l["tokens"]) for l in j["layers"][:-1]}
        assert len(sums) == 1
        every, last = sums.pop(), sum(j["layers"][-1]["tokens"])
        assert every % 4 == 0 and last % 4 == 0 and 0 < last <= every
        for l in j["layers"]:
            assert all(0 <= a <= b for a, b in zip(l["tokens"], l["tokens_total"]))
            mx, mean = max(l["tokens"]), sum(l["tokens"]) / 64
            assert abs(l["max_over_mean"] - mx / mean) < 1e-9

        window_gauge = metric_samples(metrics, "latentserve_expert_load_window_max_over_mean")
        assert {k: round(v, 5) for k, v in window_gauge.items()} == \
            {f'{{layer="{l["layer"]}"}}': round(l["max_over_mean"], 5) for l in j["layers"]}
        assert metric_samples(metrics, "latentserve_expert_load_window_steps") == {"": w["steps"]}

        events = j["replan_events"]
        assert len(events) == min(j["replans"], 64)
        assert [e["time"] for e in events] == sorted(e["time"] for e in events)
        assert all(start - 1 <= e["time"] <= j["time"] and e["plan_seconds"] > 0 for e in events)
        assert all(e["device_max_over_mean_before"] >= 1 - 1e-9 and e["device_max_over_mean_after"] >= 1 - 1e-9
                   for e in events)
        assert elapsed < 0.5, f"/v1/expert_load took {elapsed:.3f} s"

        # Without ?totals the since-start counts are left out.
        assert "tokens_total" not in requests.get(s.url + "/v1/expert_load").json()["layers"][0]
    finally:
        s.stop()


def test_expert_figures_answer_before_the_first_request(grpc_stubs):
    """With expert parallelism on, /metrics, /v1/expert_load and GetExpertLoad answer before any
    request has run (the per-layer counters exist from the start)."""
    s = Server("--devices", "2", "--expert_slots", "40")
    try:
        assert "latentserve_device_load_max_over_mean{layer=\"0\"} 0" in requests.get(s.url + "/metrics").text
        j = requests.get(s.url + "/v1/expert_load").json()
        assert j["window"]["steps"] == 0 and j["layers"][0]["device_rows"] == [0, 0]
        pb2, pb2_grpc = grpc_stubs
        g = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}")).GetExpertLoad(
            pb2.GetExpertLoadRequest())
        assert list(g.layers[0].rows_per_device) == [0, 0] and len(g.layers[0].slot_expert) == 80
        assert s.proc.poll() is None
    finally:
        s.stop()


def test_expert_load_without_expert_parallelism_and_bad_requests(server):
    complete(server, 2)
    j = requests.get(server.url + "/v1/expert_load").json()
    assert j["num_devices"] == 0 and j["replan_events"] == [] and j["replans"] == 0
    assert "slot_expert" not in j["layers"][0] and len(j["layers"][0]["tokens"]) == 64
    bad = requests.get(server.url + "/v1/expert_load?totl=1")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "totl"
    assert requests.get(server.url + "/v1/expert_load?totals=maybe").status_code == 400
    assert requests.post(server.url + "/v1/expert_load").status_code == 405


def test_dashboard_page_is_self_contained(server):
    r = requests.get(server.url + "/dashboard")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    page = r.text
    assert '<canvas id="heatmap"' in page
    assert not re.search(r'<script[^>]+src=|<link[^>]+stylesheet|@import|https?://', page), "nothing from elsewhere"
    csp = r.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert r.headers["Cache-Control"] == "no-store"
    assert requests.post(server.url + "/dashboard").status_code == 405


def test_with_api_keys_the_views_need_a_key_or_the_login_session():
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write("dash-key-1\ndash-key-2\n")
    s = Server("--api_key_file", f.name)
    try:
        no = requests.get(s.url + "/dashboard", allow_redirects=False)
        assert no.status_code == 401 and 'action="/dashboard/login"' in no.text and "heatmap" not in no.text
        assert requests.get(s.url + "/v1/expert_load").status_code == 401
        assert requests.get(s.url + "/v1/expert_load").json()["error"]["type"] == "authentication_error"
        key = {"Authorization": "Bearer dash-key-2"}
        assert requests.get(s.url + "/dashboard", headers=key).status_code == 200
        assert requests.get(s.url + "/v1/expert_load", headers=key).status_code == 200

        wrong = requests.post(s.url + "/dashboard/login", data={"key": "nope"}, allow_redirects=False)
        assert wrong.status_code == 401 and "not valid" in wrong.text and "Set-Cookie" not in wrong.headers
        login = requests.post(s.url + "/dashboard/login", data={"key": "dash-key-1"}, allow_redirects=False)
        assert login.status_code == 303 and login.headers["Location"] == "/dashboard"
        assert "HttpOnly" in login.headers["Set-Cookie"] and "SameSite=Strict" in login.headers["Set-Cookie"]
        assert "dash-key-1" not in login.headers["Set-Cookie"]
        jar = login.cookies
        assert requests.get(s.url + "/dashboard", cookies=jar).status_code == 200
        assert requests.get(s.url + "/v1/expert_load", cookies=jar).status_code == 200
        assert requests.get(s.url + "/metrics", cookies=jar).status_code == 200
        # The session is for the read-only views: generation and the rest of the API still need a key.
        assert requests.get(s.url + "/v1/models", cookies=jar).status_code == 401
        assert requests.post(s.url + C, json={"prompt": "x", "max_tokens": 1}, cookies=jar).status_code == 401

        out = requests.post(s.url + "/dashboard/logout", cookies=jar, allow_redirects=False)
        assert out.status_code == 303 and "Max-Age=0" in out.headers["Set-Cookie"]
        assert requests.get(s.url + "/dashboard", cookies=out.cookies).status_code == 401
        assert "dash-key-1" not in s.logs() and "dash-key-2" not in s.logs()
    finally:
        s.stop()
        os.unlink(f.name)
