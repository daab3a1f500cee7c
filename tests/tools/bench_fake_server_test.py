"""latentserve-bench against a fake OpenAI-compatible server: request counts, token counts and
token timing (about 10 ms apart) come out as the fake server produced them."""
import json
import os
import subprocess
import sys
import tempfile

BENCH = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
fake = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_openai_server.py")], stdout=subprocess.PIPE, text=True)
try:
    port = int(fake.stdout.readline())
    out = os.path.join(tempfile.mkdtemp(), "r.json")
    rc = subprocess.run([BENCH, "--target", f"127.0.0.1:{port}", "--concurrency", "3", "--num-requests", "9",
                         "--input-len", "4", "--output-len", "5", "--warmup", "0", "--progress=false",
                         "--json", out], capture_output=True, text=True)
    assert rc.returncode == 0, rc.stderr
    run = json.load(open(out))["runs"][0]
    assert run["completed"] == 9 and run["failed"] == 0, run
    assert run["total_output_tokens"] == 45, run
    assert 5 <= run["itl"]["p50_ms"] <= 50, run["itl"]
    assert 5 <= run["tpot"]["mean_ms"] <= 50, run["tpot"]
    assert "Output token throughput" in rc.stdout
    ds = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    with open(ds, "w") as f:
        f.write(json.dumps({"prompt_ids": [13], "max_tokens": 2}) + "\n")
        f.write(json.dumps({"prompt_ids": [5, 6], "max_tokens": 2}) + "\n")
    rc = subprocess.run([BENCH, "--target", f"127.0.0.1:{port}", "--dataset", ds, "--num-requests", "4",
                         "--request-rate", "50", "--warmup", "0", "--progress=false", "--json", out],
                        capture_output=True, text=True)
    run = json.load(open(out))["runs"][0]
    assert run["completed"] == 2 and run["errors"] == {"http_429": 2}, run
    bad = subprocess.run([BENCH, "--target", "nohost"], capture_output=True, text=True)
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr
    print("1 passed, 0 failed")
finally:
    fake.kill()
