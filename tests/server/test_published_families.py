"""Checkpoints of the published families, as transformers saved them (tests/data/hf), served
unchanged: the server starts on each directory and reports its family, its greedy continuation of
the golden prompt is transformers' own (golden.json decode_ids), and HTTP completes the same
prompt."""
import json
import os

import grpc
import pytest
import requests

from conftest import ROOT, Server

HF = os.path.join(ROOT, "tests", "data", "hf")
FIXTURES = ["qwen3_moe_f32", "qwen2_moe_bf16", "mixtral_f32", "glm4_moe_f32"]


@pytest.mark.parametrize("name", FIXTURES)
def test_served_greedy_tokens_are_transformers(name, grpc_stubs):
    golden = json.load(open(os.path.join(HF, name, "golden.json")))
    prompt, want = golden["prompt_ids"], golden["decode_ids"]
    s = Server("--model", os.path.join(HF, name), "--kv_cache_dtype", "float32")
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
        assert s.ready["family"] in ("Qwen3-MoE", "Qwen2-MoE", "Mixtral", "GLM-4-MoE")
        info = stub.GetModelInfo(pb2.GetModelInfoRequest())
        assert info.architecture == json.load(open(os.path.join(HF, name, "config.json")))["architectures"][0]
    finally:
        s.stop()

