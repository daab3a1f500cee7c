#!/usr/bin/env python3
"""Soak test: bounded load against a LatentServe server for N minutes with random cancellations
and client disconnects, and Responses API traffic beside it: stored responses continued with
previous_response_id, and background responses polled, cancelled or deleted while they run.
Checks that the server's RSS stays flat after warm-up (<= 5% growth; the server it starts keeps
at most 1 MiB of stored responses, so the store is full and evicting by then), that no KV block
leaks (from /metrics, once idle), and that no error other than the expected ones occurs (429
under load; 404 for a previous response dropped for room; 400 for a chain of responses that
outgrew the model's context). Starts its own server with
--bin/--model, or uses --url and --pid. Prints a JSON summary; exit status 0 when every check
holds.

  tools/soak.py --bin build/bin/latentserve --model models/tiny --minutes 2
"""
import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import requests


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def metric(url, name):
    for line in requests.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


PROMPTS = ["In the beginning", "And the LORD said", "Blessed are the meek", "x", "Let there be light " * 8]


def responses_call(url, rng, args, last):
    """One Responses API exchange; `last` holds this worker's latest stored response id. Returns
    the outcome's kind."""
    body = {"input": rng.choice(PROMPTS[:4]), "max_output_tokens": rng.randint(1, 16), "temperature": 0.8}
    if rng.random() < 0.3:  # generated detached: polled until done, or cancelled or deleted on the way
        r = requests.post(url + "/v1/responses", json={**body, "background": True}, timeout=120)
        if r.status_code != 200:
            return f"http_{r.status_code}"
        rid, fate = r.json()["id"], rng.random()
        for _ in range(600):
            if fate < 0.3:
                r = requests.post(f"{url}/v1/responses/{rid}/cancel", timeout=30)
                # 400: it finished first; 404: it was dropped for room.
                return "ok" if r.status_code in (200, 400) else "gone" if r.status_code == 404 else f"http_{r.status_code}"
            if fate < 0.5:
                r = requests.delete(f"{url}/v1/responses/{rid}", timeout=30)
                return "ok" if r.status_code == 200 else "gone" if r.status_code == 404 else f"http_{r.status_code}"
            r = requests.get(f"{url}/v1/responses/{rid}", timeout=30)
            if r.status_code == 404:
                return "gone"
            if r.status_code != 200:
                return f"http_{r.status_code}"
            if r.json()["status"] not in ("queued", "in_progress"):
                return "ok"
            time.sleep(0.05)
        return "background_never_finished"
    if last and rng.random() < 0.5:
        body["previous_response_id"] = last[0]
        if rng.random() < 0.5:
            body["truncation"] = "auto"  # the chain goes on past the context, its oldest turns dropped
    r = requests.post(url + "/v1/responses", json=body, timeout=120)
    if r.status_code == 404 and "previous_response_id" in body:
        last.clear()
        return "gone"  # dropped for room meanwhile
    if r.status_code == 400 and "truncation" not in body and "previous_response_id" in body and "context length" in r.text:
        last.clear()
        return "chain_full"  # the conversation outgrew the model's context: a new one starts
    if r.status_code != 200:
        return f"http_{r.status_code}"
    last[:] = [r.json()["id"]]
    return "ok"


def worker(url, deadline, rng, stats, lock, args):
    prompts = PROMPTS
    last = []  # this worker's latest stored response
    while time.time() < deadline:
        body = {"prompt": rng.choice(prompts), "max_tokens": rng.randint(1, args.max_tokens),
                "temperature": rng.choice([0, 0.8]), "ignore_eos": rng.random() < 0.5}
        stream = rng.random() < 0.5
        action = rng.random()
        kind = "ok"
        try:
            if action > 1 - args.responses_prob:
                kind = responses_call(url, rng, args, last)
            elif action < args.disconnect_prob:
                # Send the request and hang up without reading the answer.
                with socket.create_connection((url.split("//")[1].split(":")[0], int(url.rsplit(":", 1)[1])), 5) as s:
                    data = json.dumps({**body, "stream": stream}).encode()
                    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
                kind = "disconnected"
            elif stream:
                with requests.post(url + "/v1/completions", json={**body, "stream": True}, stream=True, timeout=120) as r:
                    if r.status_code != 200:
                        kind = f"http_{r.status_code}"
                    else:
                        cancel_after = rng.randint(1, 5) if rng.random() < args.cancel_prob else None
                        for i, line in enumerate(r.iter_lines()):
                            if cancel_after is not None and i >= cancel_after:
                                kind = "cancelled"
                                break
                            if line == b"data: [DONE]":
                                break
            else:
                r = requests.post(url + "/v1/completions", json=body, timeout=120)
                kind = "ok" if r.status_code == 200 else f"http_{r.status_code}"
        except requests.RequestException as e:
            kind = "exception:" + type(e).__name__
            if os.environ.get("SOAK_DEBUG"):
                print("DEBUG", stream, action < args.disconnect_prob, repr(e)[:300], file=sys.stderr)
        with lock:
            stats[kind] = stats.get(kind, 0) + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--model")
    ap.add_argument("--url")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--minutes", type=float, default=2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--cancel-prob", type=float, default=0.15)
    ap.add_argument("--disconnect-prob", type=float, default=0.1)
    ap.add_argument("--responses-prob", type=float, default=0.2)
    ap.add_argument("--warmup-fraction", type=float, default=0.25)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    proc = None
    if args.bin:
        port = free_port()
        proc = subprocess.Popen([args.bin, "--model", args.model, "--host", "127.0.0.1", "--http_port", str(port),
                                 "--grpc_port", str(free_port()), "--max_waiting", "32", "--kv_cache_mb", "64",
                                 "--responses_store_mb", "1", "--log_level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        args.url, args.pid = f"http://127.0.0.1:{port}", proc.pid
        for _ in range(600):
            try:
                if requests.get(args.url + "/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.1)
    start = time.time()
    deadline = start + args.minutes * 60
    stats, lock = {}, threading.Lock()
    threads = [threading.Thread(target=worker, args=(args.url, deadline, random.Random(args.seed + i), stats, lock, args))
               for i in range(args.concurrency)]
    for t in threads:
        t.start()
    samples = []
    while time.time() < deadline:
        samples.append((time.time() - start, rss_kib(args.pid)))
        time.sleep(2)
    for t in threads:
        t.join()
    # Idle: every sequence finished, every block back.
    for _ in range(100):
        if proc and proc.poll() is not None:
            break
        if metric(args.url, "latentserve_num_requests_running") == 0 and metric(args.url, "latentserve_num_requests_waiting") == 0:
            break
        time.sleep(0.1)
    if proc and proc.poll() is not None:
        print(json.dumps({"passed": False, "server_exit": proc.returncode, "stats": stats,
                          "server_stderr_tail": proc.stderr.read()[-3000:]}, indent=1))
        print("0 passed, 1 failed")
        return 1
    blocks_used = metric(args.url, "latentserve_kv_cache_blocks_used")
    warm = [r for t, r in samples if t >= args.warmup_fraction * args.minutes * 60]
    # A leak keeps growing; memory touched once (a code path or a buffer first used late, on a
    # loaded host) does not: the growth is the second half's peak over the first half's.
    half = len(warm) // 2
    base, peak = (max(warm[:half]), max(warm[half:])) if half else (0, 0)
    growth = (peak - base) / base if base else 0.0
    expected = ("ok", "cancelled", "disconnected", "http_429", "gone", "chain_full")
    unexpected = {k: v for k, v in stats.items() if k not in expected}
    stored = {"responses_stored": metric(args.url, "latentserve_responses_stored"),
              "responses_dropped": metric(args.url, "latentserve_responses_dropped_total")}
    summary = {"minutes": args.minutes, "requests": sum(stats.values()), "outcomes": stats, **stored,
               "rss_kib_after_warmup": base, "rss_kib_peak": peak, "rss_growth": round(growth, 4),
               "kv_blocks_used_when_idle": blocks_used, "unexpected": unexpected}
    ok = growth <= 0.05 and blocks_used == 0 and not unexpected and stats.get("ok", 0) > 0
    if proc:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        summary["server_exit"] = proc.returncode
        if proc.returncode != 0:
            summary["server_stderr_tail"] = err[-2000:]
        ok = ok and summary["server_exit"] == 0
    summary["passed"] = ok
    print(json.dumps(summary, indent=1))
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
