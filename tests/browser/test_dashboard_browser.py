"""The dashboard in a real browser (headless Debian chromium over the DevTools protocol):
- under load with expert parallelism and re-planning, the heatmap is drawn (coloured pixels over
  the whole plot in a screenshot) and re-plans are marked on the time axis; once the load stops,
  every number the page shows equals what /v1/expert_load and /metrics answer at that moment
  (TTFT and inter-token percentiles recomputed here from the histograms, the speculative-decoding
  acceptance from its counters), the hottest and idlest
  experts' cells are red and blue on screen, and nothing reached the console as an error;
- with --replan_itl_budget_ms, the chunks a re-plan was copied in are ticked on the charts, one
  per chunk the server lists;
- with --api_key_file, the key form signs the browser in and the page works from the session cookie,
  which its scripts cannot read;
- at K3's size (92 MoE layers x 896 experts, 32 devices x 32 slots; the answer is supplied through
  the protocol) a poll is drawn in well under a second.
Screenshots are kept under LATENTSERVE_ARTIFACT_DIR (default build/artifacts) and their paths printed."""
import importlib.util
import json
import os
import random
import re
import tempfile
import threading
import time

import pytest
import requests

from cdp import Browser
from png import read_png

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
_spec = importlib.util.spec_from_file_location("server_conftest", os.path.join(ROOT, "tests", "server", "conftest.py"))
server_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(server_conftest)
Server = server_conftest.Server

ARTIFACTS = os.environ.get("LATENTSERVE_ARTIFACT_DIR", os.path.join(ROOT, "build", "artifacts"))

def artifact(name):
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, name)
    print(f"\nscreenshot: {path}")
    return path


# ---- what the server says -------------------------------------------------------------------

def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if m:
            out.setdefault(m.group(1), []).append((m.group(2) or "", float(m.group(3))))
    return out


def value(metrics, name):
    return metrics[name][0][1]


def buckets(metrics, name):
    """[(upper bound, cumulative count)] ascending, +Inf last."""
    out = []
    for labels, v in metrics[name + "_bucket"]:
        le = re.search(r'le="([^"]+)"', labels).group(1)
        out.append((float("inf") if le == "+Inf" else float(le), v))
    return sorted(out)


def histogram_quantile(q, bk):
    """Prometheus' histogram_quantile: linear inside the bucket holding rank q * count."""
    total = bk[-1][1]
    if total <= 0:
        return None
    rank = q * total
    for i, (le, cum) in enumerate(bk):
        if cum >= rank:
            if le == float("inf"):
                return bk[-2][0]
            lo, below = (bk[i - 1][0], bk[i - 1][1]) if i else (0.0, 0.0)
            return lo + (le - lo) * (rank - below) / (cum - below)
    return bk[-2][0]


def snapshot(url, headers=None):
    """/v1/expert_load and /metrics read back to back."""
    load = requests.get(url + "/v1/expert_load", headers=headers, timeout=10).json()
    metrics = parse_metrics(requests.get(url + "/metrics", headers=headers, timeout=10).text)
    return load, metrics


# ---- what the page shows ---------------------------------------------------------------------

READ_PAGE = """(() => {
  const t = (id) => document.getElementById(id).textContent.trim();
  const ids = [...document.querySelectorAll('[id^="v-"]')].map(e => e.id);
  const rows = [...document.querySelectorAll('#layers tbody tr')].map(r => {
    const c = (k) => r.querySelector('.' + k).textContent.trim();
    return {layer: Number(r.dataset.layer), expert: c('expert-mom'), total: c('total-mom'), device: c('device-mom'),
            hottest: c('hottest'), tokens: c('hottest-tokens'), replicas: c('hottest-replicas')};
  });
  const heat = document.getElementById('heatmap'), rect = heat.getBoundingClientRect();
  return {tiles: Object.fromEntries(ids.map(id => [id, t(id)])), rows,
          polls: Number(document.body.dataset.polls || 0), loadTime: Number(document.body.dataset.loadTime || 0),
          renderMs: Number(document.body.dataset.renderMs || 0),
          heat: {x: rect.left + scrollX, y: rect.top + scrollY, width: rect.width, height: rect.height,
                 geometry: JSON.parse(heat.dataset.geometry || 'null')},
          replanMarks: Number(document.getElementById('c-tokens').dataset.replanMarks || 0),
          replanRows: document.querySelectorAll('#replans tbody tr').length,
          firstReplanStep: (document.querySelector('#replans tbody tr td:nth-child(2)') || {}).textContent,
          replicaNote: t('replica-note'), status: t('status'), cookie: document.cookie};
})()"""


def close_to(shown, expected, tol):
    return shown not in ("", "–") and abs(float(shown) - expected) <= tol


def hottest(tokens):
    return max(range(len(tokens)), key=lambda e: (tokens[e], -e))


def replicas_of(layer, expert):
    return sum(dev.count(expert) for dev in layer["slot_expert"])


# ---- load ------------------------------------------------------------------------------------

class Load:
    """`clients` threads sending completions until stopped (at most `limit_s` seconds)."""

    def __init__(self, url, clients=4, limit_s=90, headers=None):
        self.stop_event, self.errors, self.sent = threading.Event(), [], 0
        deadline = time.time() + limit_s

        def client(seed):
            rng = random.Random(seed)
            with requests.Session() as http:
                while not self.stop_event.is_set() and time.time() < deadline:
                    prompt = " ".join(rng.choice(["light", "the", "LORD", "waters", "said", "and", "earth", "day"])
                                      for _ in range(rng.randint(4, 40)))
                    try:
                        r = http.post(url + "/v1/completions", json={"prompt": prompt, "max_tokens": rng.randint(8, 40),
                                                                     "temperature": 0.8, "ignore_eos": True},
                                      headers=headers, timeout=60)
                        if r.status_code != 200:
                            self.errors.append(r.text)
                        self.sent += 1
                    except requests.RequestException as e:
                        self.errors.append(str(e))

        self.threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=90)


def wait_quiet(url, headers=None, timeout=60):
    """Waits until nothing runs or waits and the generated-token count holds still."""
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        m = parse_metrics(requests.get(url + "/metrics", headers=headers, timeout=10).text)
        now = (value(m, "latentserve_num_requests_running"), value(m, "latentserve_num_requests_waiting"),
               value(m, "latentserve_generation_tokens_total"))
        if now[0] == 0 and now[1] == 0 and now == last:
            return
        last = now
        time.sleep(0.5)
    raise AssertionError("the server did not go quiet")


# ---- tests -------------------------------------------------------------------------------------

def test_dashboard_under_load_draws_the_heatmap_and_shows_the_servers_numbers():
    s = Server("--devices", "2", "--expert_slots", "40", "--replan_interval", "48", "--load_window", "64",
               "--max_num_seqs", "8", "--speculative_config", '{"method": "ngram", "num_speculative_tokens": 3}')
    try:
        with Browser(width=1400, height=1000) as b:
            b.navigate(s.url + "/dashboard?poll_ms=500")
            b.wait_for("Number(document.body.dataset.polls || 0) >= 2", timeout=30)
            load = Load(s.url)
            try:
                # Under load: several polls, at least one re-plan switched in and marked.
                b.wait_for("Number(document.getElementById('v-replans').textContent) >= 2 && "
                           "Number(document.getElementById('c-tokens').dataset.replanMarks || 0) >= 1", timeout=60)
                b.pump(3)
                shown = b.evaluate(READ_PAGE)
                b.screenshot(artifact("dashboard_under_load.png"))
                g = shown["heat"]["geometry"]
                assert g["Lc"] == 4 and g["N"] == 64, g
                plot = {"x": shown["heat"]["x"] + g["left"], "y": shown["heat"]["y"] + g["top"],
                        "width": g["pw"], "height": g["rowH"] * g["Lc"]}
                img = read_png(b.screenshot(clip=plot))
                card_white = (255, 255, 255)
                pixels = [img.pixel(x, y) for y in range(0, img.height, 3) for x in range(0, img.width, 3)]
                coloured = sum(p != card_white for p in pixels)
                assert coloured / len(pixels) > 0.95, f"only {coloured} of {len(pixels)} heatmap pixels drawn"
                assert len(set(pixels)) >= 8, "the heatmap has more than a few colours under load"
            finally:
                load.stop()
            assert not load.errors, load.errors[:3]
            assert load.sent >= 10

            # Quiet: the page's next polls must show exactly what the server answers now.
            wait_quiet(s.url)
            quiet_at = time.time()
            b.wait_for(f"Number(document.body.dataset.loadTime || 0) > {quiet_at} && "
                       f"Number(document.body.dataset.polls) >= 2", timeout=30)
            load_json, metrics = snapshot(s.url)
            shown = b.evaluate(READ_PAGE)
            tiles = shown["tiles"]

            assert tiles["v-running"] == "0" and tiles["v-waiting"] == "0"
            kv_used, kv_total = value(metrics, "latentserve_kv_cache_blocks_used"), value(metrics, "latentserve_kv_cache_blocks_total")
            assert tiles["v-kv-blocks"] == f"{int(kv_used)} / {int(kv_total)}"
            assert close_to(tiles["v-kv"], 100 * value(metrics, "latentserve_kv_cache_usage_ratio"), 0.051)
            assert tiles["v-gen-total"] == str(int(value(metrics, "latentserve_generation_tokens_total")))
            finished = sum(v for _, v in metrics["latentserve_engine_requests_finished_total"])
            assert tiles["v-finished"] == str(int(finished)) and finished >= load.sent
            # The page's percentile window (5 minutes) covers every request: it was opened before the load.
            for name, metric in (("ttft", "latentserve_time_to_first_token_seconds"),
                                 ("itl", "latentserve_inter_token_latency_seconds")):
                for q in (50, 90, 99):
                    expected = histogram_quantile(q / 100, buckets(metrics, metric)) * 1000
                    assert close_to(tiles[f"v-{name}-p{q}"], expected, 0.06 + 1e-6 * expected), \
                        (name, q, tiles[f"v-{name}-p{q}"], expected)
            assert tiles["v-replans"] == str(load_json["replans"])
            assert tiles["v-window-steps"] == str(load_json["window"]["steps"]) == "64"
            layers = load_json["layers"]
            mean = lambda v: sum(v) / len(v)
            assert close_to(tiles["v-expert-mom"], mean([l["max_over_mean"] for l in layers]), 0.0006)
            assert close_to(tiles["v-device-mom"], mean([l["device_max_over_mean"] for l in layers]), 0.0006)
            steps, drafted, accepted = (value(metrics, f"latentserve_spec_decode_num_{k}_total")
                                        for k in ("drafts", "draft_tokens", "accepted_tokens"))
            assert tiles["v-spec-method"] == "ngram" and drafted > 0
            assert close_to(tiles["v-spec-rate"], 100 * accepted / drafted, 0.051)
            assert close_to(tiles["v-spec-len"], 1 + accepted / steps, 0.0051)
            assert [r["layer"] for r in shown["rows"]] == [l["layer"] for l in layers]
            for row, l in zip(shown["rows"], layers):
                h = hottest(l["tokens"])
                assert close_to(row["expert"], l["max_over_mean"], 0.0006), (row, l["layer"])
                assert close_to(row["total"], l["total_max_over_mean"], 0.0006), (row, l["layer"])
                assert close_to(row["device"], l["device_max_over_mean"], 0.0006), (row, l["layer"])
                assert row["hottest"] == str(h) and row["tokens"] == str(l["tokens"][h])
                assert row["replicas"] == str(replicas_of(l, h))
            first = layers[0]
            replicated = sum(1 for e in range(64) if replicas_of(first, e) > 1)
            assert shown["replicaNote"].startswith(f"2 devices × 40 slots · {replicated} experts replicated")
            assert shown["replanRows"] == min(20, len(load_json["replan_events"]))
            assert shown["firstReplanStep"] == str(load_json["replan_events"][-1]["step"])

            # On screen: each layer's hottest expert is red and its idlest blue (where they are at least
            # twice and at most a third of the mean).
            b.screenshot(artifact("dashboard_quiet.png"))
            g = shown["heat"]["geometry"]
            img = read_png(b.screenshot(clip={"x": shown["heat"]["x"], "y": shown["heat"]["y"],
                                              "width": shown["heat"]["width"], "height": shown["heat"]["height"]}))
            for r, l in enumerate(layers):
                m = mean(l["tokens"])
                for e, colour in ((hottest(l["tokens"]), "red"), (min(range(64), key=lambda e: l["tokens"][e]), "blue")):
                    ratio = l["tokens"][e] / m
                    if (colour == "red" and ratio < 2) or (colour == "blue" and ratio > 0.35):
                        continue
                    px = img.pixel(int(g["left"] + (e + 0.5) * g["pw"] / 64), int(g["top"] + (r + 0.5) * g["rowH"]))
                    if colour == "red":
                        assert px[0] > px[2] + 40, (l["layer"], e, ratio, px)
                    else:
                        assert px[2] > px[0] + 40, (l["layer"], e, ratio, px)
            assert b.errors() == [], b.errors()
    finally:
        s.stop()


def test_migration_chunks_are_ticked_on_the_charts():
    # A budget of a few slots per chunk: a switch of the 320 slots takes tens of chunks.
    s = Server("--devices", "2", "--expert_slots", "40", "--replan_interval", "48", "--load_window", "64",
               "--replan_itl_budget_ms", "0.3")
    try:
        with Browser(width=1400, height=1000) as b:
            b.navigate(s.url + "/dashboard?poll_ms=500")
            b.wait_for("Number(document.body.dataset.polls || 0) >= 2", timeout=30)
            load = Load(s.url)
            try:
                b.wait_for("Number(document.getElementById('c-tokens').dataset.chunkMarks || 0) >= 2", timeout=60)
            finally:
                load.stop()
            assert load.errors == [], load.errors[:3]
            # Quiet now, once a migration under way has finished (it goes on while the server is
            # idle): after the next poll every chunk the server still lists is ticked (the page
            # keeps the ones it saw before the server's list of 256 moved past them too).
            s.settle_migration()
            chunks = requests.get(s.url + "/v1/expert_load").json()["migration_chunks"]
            assert len(chunks) >= 2
            b.wait_for(f"Number(document.getElementById('c-tokens').dataset.chunkMarks || 0) >= {len(chunks)}",
                       timeout=10)
            if len(chunks) < 256:  # the server's whole history: exactly one tick per chunk
                assert b.evaluate("Number(document.getElementById('c-tokens').dataset.chunkMarks)") == len(chunks)
            assert b.errors() == [], b.errors()
    finally:
        s.stop()


def test_with_api_keys_the_key_form_signs_the_browser_in():
    with tempfile.NamedTemporaryFile("w", delete=False, suffix=".keys") as f:
        f.write("browser-key\n")
    s = Server("--api_key_file", f.name)
    try:
        with Browser(width=1200, height=900) as b:
            b.navigate(s.url + "/dashboard?poll_ms=500")
            b.wait_for("document.readyState === 'complete' && !!document.getElementById('key')")
            assert b.evaluate("!!document.getElementById('heatmap')") is False
            b.evaluate("document.getElementById('key').value = 'wrong'; document.forms[0].submit(); true")
            b.wait_for("document.readyState === 'complete' && document.body.textContent.includes('not valid')")
            b.evaluate("document.getElementById('key').value = 'browser-key'; document.forms[0].submit(); true")
            b.wait_for("!!document.getElementById('heatmap') && Number(document.body.dataset.polls || 0) >= 2")
            shown = b.evaluate(READ_PAGE)
            assert "latentserve_dashboard" not in shown["cookie"], "the session cookie is HttpOnly"
            assert shown["status"].startswith("updated")
            b.screenshot(artifact("dashboard_signed_in.png"))
            # The only errors are the two 401 answers of the form itself (no key, then a wrong one).
            errors = [e for e in b.errors() if not ("401" in e and "/dashboard" in e)]
            assert errors == [], errors
    finally:
        s.stop()
        os.unlink(f.name)


def k3_expert_load(rng):
    """A K3-sized /v1/expert_load answer: 92 MoE layers x 896 experts, 32 devices x 32 slots."""
    layers = []
    for layer in range(1, 93):
        tokens = [int(37000 * rng.lognormvariate(0, 0.6)) for _ in range(896)]
        order = sorted(range(896), key=lambda e: -tokens[e])
        slots = order + order[:128]  # the 128 hottest get a second replica
        rng.shuffle(slots)
        devices = [slots[d * 32:(d + 1) * 32] for d in range(32)]
        mean = sum(tokens) / 896
        layers.append({"layer": layer, "tokens": tokens, "max_over_mean": max(tokens) / mean,
                       "total_max_over_mean": max(tokens) / mean, "device_rows": [rng.randint(900000, 1100000)] * 32,
                       "device_max_over_mean": 1.05, "slot_expert": devices})
    now = time.time()
    return {"object": "expert_load", "model": "k3-sized", "time": now, "steps": 10 ** 6, "num_layers": 93,
            "num_experts": 896, "num_devices": 32, "slots_per_device": 32,
            "window": {"steps": 256, "capacity": 256, "first_step_time": now - 20, "last_step_time": now},
            "replans": 3, "replan_seconds_total": 1.2, "last_replan_seconds": 0.4,
            "longest_switch_step_seconds": 0.05,
            "replan_events": [{"time": now - 30 + 10 * i, "step": 1000 * i, "plan_seconds": 0.4,
                               "device_max_over_mean_before": 1.3, "device_max_over_mean_after": 1.05} for i in range(3)],
            "layers": layers}


def test_k3_sized_expert_load_is_drawn_quickly():
    s = Server()
    try:
        rng = random.Random(27)
        body = json.dumps(k3_expert_load(rng)).encode()
        assert len(body) < 2 << 20
        with Browser(width=1600, height=1200) as b:
            served = []

            def answer(params):
                import base64
                served.append(params["request"]["url"])
                fresh = json.loads(body)
                fresh["time"] = time.time()
                b.send("Fetch.fulfillRequest", requestId=params["requestId"], responseCode=200,
                       responseHeaders=[{"name": "Content-Type", "value": "application/json"}],
                       body=base64.b64encode(json.dumps(fresh).encode()).decode())

            b.handlers["Fetch.requestPaused"] = answer
            b.send("Fetch.enable", patterns=[{"urlPattern": "*/v1/expert_load*", "requestStage": "Request"}])
            b.navigate(s.url + "/dashboard?poll_ms=1000")
            b.wait_for("Number(document.body.dataset.polls || 0) >= 3", timeout=60)
            shown = b.evaluate(READ_PAGE)
            b.screenshot(artifact("dashboard_k3_sized.png"))
            assert served, "the page's /v1/expert_load requests were answered by the test"
            g = shown["heat"]["geometry"]
            assert g["Lc"] == 92 and g["N"] == 896
            assert len(shown["rows"]) == 92
            assert shown["renderMs"] < 1000, f"a K3-sized poll took {shown['renderMs']} ms to draw"
            print(f"\nK3-sized render: {shown['renderMs']} ms for {len(body)} bytes of JSON")
            assert b.errors() == [], b.errors()
    finally:
        s.stop()
