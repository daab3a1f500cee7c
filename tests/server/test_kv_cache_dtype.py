"""The KV cache element type through the real server: by default a BF16 checkpoint (the tiny
model) gets a BF16 cache, twice the blocks of a float32 one in the same memory; both serve; a bad
--kv_cache_dtype stops the server at start with a message naming the flag, as does
--gpu_memory_utilization on the CPU backend (it has no device memory to size the cache from)."""
import re
import subprocess

import requests

from conftest import BIN, MODEL, Server


def test_bf16_by_default_and_float32_when_asked(server):
    assert server.ready["kv_cache_dtype"] == "bfloat16"
    f32 = Server("--kv_cache_dtype", "float32")
    try:
        assert f32.ready["kv_cache_dtype"] == "float32"
        bf16_blocks = server.metric("latentserve_kv_cache_blocks_total")
        f32_blocks = f32.metric("latentserve_kv_cache_blocks_total")
        assert abs(bf16_blocks - 2 * f32_blocks) <= 1, (bf16_blocks, f32_blocks)
        r = requests.post(f32.url + "/v1/completions",
                          json={"prompt": "In the beginning", "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
    finally:
        f32.stop()


def test_bad_kv_cache_dtype_fails_clearly():
    r = subprocess.run([BIN, "--model", MODEL, "--kv_cache_dtype", "half", "--http_port", "0", "--grpc_port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert re.search(r"--kv_cache_dtype must be auto, float32 or bfloat16, got 'half'", r.stderr), r.stderr


def test_gpu_memory_utilization_on_the_cpu_fails_clearly():
    for value, message in [("0.9", r"gpu_memory_utilization needs a backend with device memory .*the cpu backend has "
                                   r"none: size the cache with kv_cache_mb"),
                           ("1.5", r"--gpu_memory_utilization must be in \[0, 1\] \(0: off\), got 1.5")]:
        r = subprocess.run([BIN, "--model", MODEL, "--gpu_memory_utilization", value, "--http_port", "0",
                            "--grpc_port", "0"], capture_output=True, text=True, timeout=120)
        assert r.returncode != 0
        assert re.search(message, r.stderr), r.stderr
