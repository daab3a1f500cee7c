"""--activation_dtype through the real server: float32 by default on the CPU; bfloat16 (the BF16
weights' GEMM inputs rounded to BF16) serves and says so in the ready line, with greedy text that
stays the default's on the tiny model; a bad value stops the server at start naming the flag."""
import re
import subprocess

import requests

from conftest import BIN, MODEL, Server


def ready_line(s):
    return next(line for line in s.logs().splitlines() if '"ready"' in line)


def complete(s, prompt):
    r = requests.post(s.url + "/v1/completions",
                      json={"prompt": prompt, "max_tokens": 12, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def test_float32_by_default_and_bfloat16_when_asked(server):
    assert '"activation_dtype":"float32"' in ready_line(server)
    bf16 = Server("--activation_dtype", "bfloat16")
    try:
        assert '"activation_dtype":"bfloat16"' in ready_line(bf16)
        for prompt in ("In the beginning", "The king said"):
            assert complete(bf16, prompt) == complete(server, prompt), prompt
    finally:
        bf16.stop()


def test_bad_activation_dtype_fails_clearly():
    r = subprocess.run([BIN, "--model", MODEL, "--activation_dtype", "fp16", "--http_port", "0", "--grpc_port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert re.search(r"unknown --activation_dtype 'fp16' \(expected auto, float32 or bfloat16\)", r.stderr), r.stderr
