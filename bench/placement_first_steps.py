#!/usr/bin/env python3
"""Device balance of the first steps of traffic, per expert placement: a live server (CPU, several
expert-parallel device workers) serves windows of a text while clients keep it busy; once
latentserve_engine_steps_total has moved STEPS past its start, /v1/expert_load's device_rows give
each MoE layer's busiest device over the mean device (1.0 = balanced). The text is cut into windows
of 64 tokens (the server's own /tokenize): the even windows are the calibration set of
`--expert_placement auto --calibration_prompts`, the odd ones are the traffic, so a plan never sees
the text it is measured on. Placements, in alternating rounds: uniform (round-robin), auto from the
calibration set served as the traffic is (each window continued by as many greedy tokens as a
request asks, --calibration_max_tokens), auto from the set's windows alone (every token through
every layer, --calibration_max_tokens 0), auto from the model's own samples (no set), served or
alone likewise. Prints one line per run and a JSON summary (per placement and round: the mean over
layers, the worst layer, and the rows-weighted figure Σ busiest device / Σ mean device over the
layers — a layer waits for its busiest device, so this is the routed experts' time against a
perfect split; the last layer computes only the rows whose logits are read, the generated tokens,
and weighs accordingly).

  bench/placement_first_steps.py --text FILE [--bin build/bin/latentserve] [--model models/tiny]
      [--rounds 3] [--devices 4] [--slots 18] [--steps 1000] [--clients 16] [--max-tokens 32]
      [--temperature 0]   (the traffic's; above 0 each request samples with its own seed)

For the tiny model's held-out text (the chapters after its training text):
  bible -l100000 2Pet3:1-Rev22:21 > heldout.txt     (Debian's bible-kjv)
"""
import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def post(port, path, body, timeout=120):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=timeout).read())


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise RuntimeError(f"/metrics has no {name}")


class Server:
    def __init__(self, a, port, *flags):
        self.port = port
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([a.bin, "--model", a.model, "--http_port", str(port), "--grpc_port",
                                      str(port + 1), "--nowarmup", *flags], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(1200):
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"server exited: {self.log.read().decode(errors='replace')[-2000:]}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1)
                return
            except Exception:
                time.sleep(0.1)
        raise RuntimeError("server not ready after 120 s")

    def close(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def device_balance(a, port, serve):
    """Per MoE layer, device max/mean of the routed rows after the first a.steps steps; and over all
    of them, the sum of each layer's busiest device over the sum of each layer's mean device."""
    stop = threading.Event()

    def client(c):
        i = c
        while not stop.is_set():
            try:
                post(port, "/v1/completions", {"prompt": serve[i % len(serve)], "max_tokens": a.max_tokens,
                                                "temperature": a.temperature, "seed": i, "ignore_eos": True})
            except Exception:
                if stop.is_set():
                    return
                raise
            i += a.clients

    start = metric(port, "latentserve_engine_steps_total")
    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(a.clients)]
    for t in threads:
        t.start()
    while metric(port, "latentserve_engine_steps_total") - start < a.steps:
        time.sleep(0.01)
    load = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/expert_load", timeout=30).read())
    stop.set()
    for t in threads:
        t.join()
    out, busiest, mean = [], 0.0, 0.0
    for layer in load["layers"]:
        rows = layer["device_rows"]
        if sum(rows):
            out.append(max(rows) * len(rows) / sum(rows))
            busiest += max(rows)
            mean += sum(rows) / len(rows)
    return out, busiest / mean


def run_rounds(a, cal, serve):
    """{placement: {"mean_over_layers": [...], "worst_layer": [...], "rows_weighted": [...]}}, one entry
    per round."""
    placement = ["--devices", str(a.devices), "--expert_slots", str(a.slots)]
    configs = {"uniform": [],
               "auto, calibration set": ["--expert_placement", "auto", "--calibration_prompts", cal,
                                         "--calibration_max_tokens", str(a.max_tokens)],
               "auto, calibration set's prompts alone": ["--expert_placement", "auto", "--calibration_prompts", cal,
                                                         "--calibration_max_tokens", "0"],
               "auto, model's samples": ["--expert_placement", "auto", "--calibration_max_tokens", str(a.max_tokens)],
               "auto, model's samples alone": ["--expert_placement", "auto", "--calibration_max_tokens", "0"]}
    result = {name: {"mean_over_layers": [], "worst_layer": [], "rows_weighted": []} for name in configs}
    for r in range(a.rounds):
        for name, flags in configs.items():
            s = Server(a, a.port, *placement, *flags)
            try:
                per_layer, weighted = device_balance(a, a.port, serve)
            finally:
                s.close()
            mean = sum(per_layer) / len(per_layer)
            result[name]["mean_over_layers"].append(round(mean, 4))
            result[name]["worst_layer"].append(round(max(per_layer), 4))
            result[name]["rows_weighted"].append(round(weighted, 4))
            print(f"round {r} {name}: per layer {[round(v, 3) for v in per_layer]} mean {mean:.4f} "
                  f"rows-weighted {weighted:.4f}", flush=True)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text", required=True)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/bin/latentserve"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models/tiny"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--slots", type=int, default=18)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--port", type=int, default=18240)
    a = ap.parse_args()

    with open(a.text, encoding="utf-8") as f:
        text = f.read()
    s = Server(a, a.port)
    try:
        ids = post(a.port, "/tokenize", {"prompt": text, "add_special_tokens": False})["tokens"]
    finally:
        s.close()
    windows = [ids[i:i + 64] for i in range(0, len(ids) - 64, 64)]
    calibration, serve = windows[0::2], windows[1::2]
    if len(serve) < a.clients:
        raise SystemExit(f"{a.text}: {len(ids)} tokens make too few windows for {a.clients} clients")
    with tempfile.TemporaryDirectory() as work:
        cal = os.path.join(work, "calibration.json")
        with open(cal, "w") as f:
            json.dump({"sequences": calibration}, f)
        print(f"{len(ids)} tokens: {len(calibration)} calibration windows, {len(serve)} served", flush=True)
        result = run_rounds(a, cal, serve)
    print(json.dumps({"devices": a.devices, "slots_per_device": a.slots, "steps": a.steps, "clients": a.clients,
                      "rounds": a.rounds, "placements": result}))


if __name__ == "__main__":
    main()
