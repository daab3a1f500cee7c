"""latentserve-bench end to end against the real server, over HTTP and gRPC (a few seconds)."""
import json
import os
import subprocess

BENCH = os.path.join(os.path.dirname(os.environ.get("LATENTSERVE_BIN", "build/bin/latentserve")), "latentserve-bench")


def run(server, *args):
    out = os.path.join(os.path.dirname(server.log.name), f"bench-{os.getpid()}.json")
    rc = subprocess.run([BENCH, *args, "--num-requests", "8", "--input-len", "16", "--output-len", "8",
                         "--progress=false", "--json", out], capture_output=True, text=True, timeout=120)
    assert rc.returncode == 0, rc.stdout + rc.stderr
    run = json.load(open(out))["runs"][0]
    assert run["failed"] == 0, (run["errors"], server.logs()[-3000:])
    return run


def test_bench_http_closed_loop(server):
    r = run(server, "--target", f"127.0.0.1:{server.http_port}", "--concurrency", "4")
    assert r["completed"] == 8 and r["total_output_tokens"] == 64
    assert r["ttft"]["p50_ms"] > 0 and r["output_throughput"] > 0


def test_bench_grpc_open_loop(server):
    r = run(server, "--backend", "grpc", "--target", f"127.0.0.1:{server.grpc_port}", "--request-rate", "20")
    assert r["completed"] == 8 and r["total_output_tokens"] == 64
