"""Checkpoints of the published families, as transformers saved them (tests/data/hf) and as Kimi K3
is released (tests/data/k3), served unchanged: the server starts on each directory and reports its
family, its greedy continuation of the golden prompt is the reference's own (golden.json
decode_ids: transformers', or for K3 our PyTorch reference's), and HTTP completes the same
prompt."""
import json
import os
import subprocess

import grpc
import pytest
import requests

from conftest import BIN, ROOT, Server

DATA = os.path.join(ROOT, "tests", "data")
FIXTURES = {"hf/qwen3_moe_f32": "Qwen3-MoE", "hf/qwen3_f32": "Qwen3", "hf/qwen2_moe_bf16": "Qwen2-MoE",
            "hf/mixtral_f32": "Mixtral", "hf/glm4_moe_f32": "GLM-4-MoE", "hf/deepseek_v3_f32": "DeepSeek-V3",
            "hf/kimi_linear_f32": "Kimi-Linear", "k3/k3_tiny_bf16": "Kimi-K3"}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_served_greedy_tokens_are_transformers(name, grpc_stubs):
    model = os.path.join(DATA, name)
    golden = json.load(open(os.path.join(model, "golden.json")))
    prompt, want = golden["prompt_ids"], golden["decode_ids"]
    s = Server("--model", model, "--kv_cache_dtype", "float32")
    try:
        r = requests.post(s.url + "/v1/completions", timeout=60, json={
            "prompt": prompt, "max_tokens": len(want), "temperature": 0, "ignore_eos": True})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["finish_reason"] == "length"
        assert r.json()["usage"]["completion_tokens"] == len(want)
        pb2, pb2_grpc = grpc_stubs
        stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
        msgs = list(stub.Generate(pb2.GenerateRequest(
            token_ids=pb2.TokenIds(ids=prompt),
            sampling=pb2.SamplingParams(max_tokens=len(want), temperature=0, ignore_eos=True))))
        assert [t for m in msgs for t in m.token_ids] == want
        assert s.ready["family"] == FIXTURES[name]
        info = stub.GetModelInfo(pb2.GetModelInfoRequest())
        assert info.architecture == json.load(open(os.path.join(model, "config.json")))["architectures"][0]
    finally:
        s.stop()



def test_recurrent_models_serve_prefix_cache_hits_from_state_snapshots(grpc_stubs):
    """Kimi-Linear (KDA layers): a conversation's next turn resumes from the snapshot taken at the
    previous prompt's end (70 tokens, inside a KV block), with the tokens of a server without the
    cache; the usage and /metrics say what was served from the cache, the ready line what it holds."""
    model = os.path.join(DATA, "hf/kimi_linear_f32")
    turn1 = [(7 * i + 3) % 200 + 5 for i in range(70)]
    turn2 = turn1 + [11, 12, 13, 14, 15, 16, 17, 18, 19]
    body = {"max_tokens": 6, "temperature": 0, "ignore_eos": True}
    cold = Server("--model", model, "--kv_cache_dtype", "float32", "--enable_prefix_caching=false")
    try:
        want = requests.post(cold.url + "/v1/completions", timeout=60, json={"prompt": turn2, **body}).json()
    finally:
        cold.stop()
    s = Server("--model", model, "--kv_cache_dtype", "float32", "--state_cache_mb", "8")
    try:
        assert s.ready["prefix_caching"] is True
        assert s.ready["state_snapshot_slots"] > 0 and 0 < s.ready["state_cache_mb"] <= 8
        assert "prefix_caching_disabled" not in s.logs()
        r1 = requests.post(s.url + "/v1/completions", timeout=60, json={"prompt": turn1, **body})
        assert r1.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        r2 = requests.post(s.url + "/v1/completions", timeout=60, json={"prompt": turn2, **body}).json()
        assert r2["usage"]["prompt_tokens_details"]["cached_tokens"] == 70
        assert r2["choices"][0]["text"] == want["choices"][0]["text"]
        # Another cache salt finds neither the blocks nor the state snapshots of the unsalted turns.
        r3 = requests.post(s.url + "/v1/completions", timeout=60,
                           json={"prompt": turn2, "cache_salt": "tenant-b", **body}).json()
        assert r3["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert r3["choices"][0]["text"] == want["choices"][0]["text"]
        pb2, pb2_grpc = grpc_stubs
        stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
        msgs = list(stub.Generate(pb2.GenerateRequest(
            token_ids=pb2.TokenIds(ids=turn2 + [20]),
            sampling=pb2.SamplingParams(max_tokens=3, temperature=0, ignore_eos=True))))
        assert msgs[-1].usage.cached_prompt_tokens == 79, "turn 2's prompt end is a snapshot too"
        assert s.metric("latentserve_prefix_cache_hits_total") == 2
        assert s.metric("latentserve_state_snapshots") >= 2
        assert s.metric("latentserve_state_snapshot_bytes") > 0
        assert s.metric("latentserve_state_snapshots_taken_total") >= 2
        assert s.metric("latentserve_state_snapshot_evictions_total") == 0
    finally:
        s.stop()
    bad = subprocess.run([BIN, "--model", model, "--state_snapshot_interval", "24"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode != 0 and "state_snapshot_interval must be a multiple of block_size" in bad.stderr + bad.stdout
