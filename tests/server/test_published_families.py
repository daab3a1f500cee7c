"""Checkpoints of the published families, as transformers saved them (tests/data/hf) and as Kimi K3
is released (tests/data/k3), served unchanged: the server starts on each directory and reports its
family, its greedy continuation of the golden prompt is the reference's own (golden.json
decode_ids: transformers', or for K3 our PyTorch reference's), and HTTP completes the same
prompt."""
import json
import os

import grpc
import pytest
import requests

from conftest import ROOT, Server

DATA = os.path.join(ROOT, "tests", "data")
FIXTURES = ["hf/qwen3_moe_f32", "hf/qwen2_moe_bf16", "hf/mixtral_f32", "hf/glm4_moe_f32", "hf/deepseek_v3_f32",
            "hf/kimi_linear_f32", "k3/k3_tiny_bf16"]
FAMILIES = ("Qwen3-MoE", "Qwen2-MoE", "Mixtral", "GLM-4-MoE", "DeepSeek-V3", "Kimi-Linear", "Kimi-K3")


@pytest.mark.parametrize("name", FIXTURES)
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
        assert s.ready["family"] in FAMILIES
        info = stub.GetModelInfo(pb2.GetModelInfoRequest())
        assert info.architecture == json.load(open(os.path.join(model, "config.json")))["architectures"][0]
    finally:
        s.stop()

