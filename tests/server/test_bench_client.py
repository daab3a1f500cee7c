"""latentserve-bench end to end against the real server, over HTTP and gRPC (a few seconds); bad
flags fail before any request, naming the flag."""
import json
import os
import subprocess

BENCH = os.path.join(os.path.dirname(os.environ.get("LATENTSERVE_BIN", "build/bin/latentserve")), "latentserve-bench")


def run(server, tmp_path, *args):
    out = str(tmp_path / "bench.json")
    rc = subprocess.run([BENCH, *args, "--num-requests", "8", "--input-len", "16", "--output-len", "8",
                         "--progress=false", "--json", out], capture_output=True, text=True, timeout=120)
    assert rc.returncode == 0, rc.stdout + rc.stderr
    run = json.load(open(out))["runs"][0]
    assert run["failed"] == 0, (run["errors"], server.logs()[-3000:])
    return run


def test_bench_http_closed_loop(server, tmp_path):
    r = run(server, tmp_path, "--target", f"127.0.0.1:{server.http_port}", "--concurrency", "4")
    assert r["completed"] == 8 and r["total_output_tokens"] == 64
    assert r["ttft"]["p50_ms"] > 0 and r["output_throughput"] > 0


def test_bench_grpc_open_loop(server, tmp_path):
    r = run(server, tmp_path, "--backend", "grpc", "--target", f"127.0.0.1:{server.grpc_port}", "--request-rate", "20")
    assert r["completed"] == 8 and r["total_output_tokens"] == 64


def test_bad_flags_fail_before_sending_naming_the_flag():
    # The target is a closed port: a flag checked only after the warm-up would fail on connecting.
    for args, message in [(["--concurrency", "0"], "--concurrency must be at least 1"),
                          (["--input-len", "0"], "--input-len must be at least 1"),
                          (["--output-len", "-2"], "--output-len must be at least 1"),
                          (["--range-ratio", "1.5"], "--range-ratio must be in [0, 1]"),
                          (["--vocab", "5"], "--vocab must be above 10"),
                          (["--warmup", "-1"], "--warmup must not be negative"),
                          (["--duration", "-3"], "--duration must not be negative"),
                          (["--slo-ttft-ms", "0"], "--slo-ttft-ms and --slo-tpot-ms must be positive"),
                          (["--request-rate", "fast"], "--request-rate: 'fast' is not a positive number")]:
        r = subprocess.run([BENCH, "--target", "127.0.0.1:1", "--progress=false", *args], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)
