"""Speculative decoding through the server, by n-gram prompt lookup, by a draft model and by the
checkpoint's own multi-token-prediction layer: greedy
completions over HTTP and gRPC are the ones of a server without it (with structured output too), and
so are seeded sampled ones (run together and preempted too),
/metrics counts the drafts proposed and accepted (labelled by method), the ready line says what
runs, and a bad --speculative_config or a draft model with another vocabulary stops the start
with a message naming what is wrong; a model with recurrent layers speculates with the same
output."""
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import grpc
import requests

from conftest import BIN, MODEL, ROOT, Server

SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'
PROMPT = ("In the beginning God created the heaven and the earth. And the earth was without form, and void. "
          "In the beginning God created the heaven and the earth. And the earth was")


def _complete(s, prompt):
    r = requests.post(s.url + "/v1/completions", timeout=60, json={
        "prompt": prompt, "max_tokens": 40, "temperature": 0, "logprobs": 1})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def test_greedy_output_is_the_output_without_speculation(grpc_stubs):
    plain = Server()
    try:
        want = _complete(plain, PROMPT)
        want_short = _complete(plain, "And God said, Let there be light: and there was light. And God said, Let")
    finally:
        plain.stop()
    s = Server("--speculative_config", SPEC)
    try:
        assert s.ready["speculative"] == {"method": "ngram", "num_speculative_tokens": 4}
        got = _complete(s, PROMPT)
        assert got["text"] == want["text"]
        assert got["finish_reason"] == want["finish_reason"]
        for a, b in zip(got["logprobs"]["token_logprobs"], want["logprobs"]["token_logprobs"]):
            assert abs(a - b) < 2e-3
        assert _complete(s, "And God said, Let there be light: and there was light. And God said, Let")["text"] == \
            want_short["text"]
        pb2, pb2_grpc = grpc_stubs
        stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
        msgs = list(stub.Generate(pb2.GenerateRequest(
            text=PROMPT, sampling=pb2.SamplingParams(max_tokens=40, temperature=0))))
        assert "".join(m.text for m in msgs) == want["text"]
        assert s.metric("latentserve_spec_decode_num_drafts_total") > 0
        proposed = s.metric("latentserve_spec_decode_num_draft_tokens_total")
        accepted = s.metric("latentserve_spec_decode_num_accepted_tokens_total")
        assert 0 < accepted <= proposed
    finally:
        s.stop()


SEEDED = [{"prompt": PROMPT * (1 + i % 3), "max_tokens": 48, "seed": 7 + i, "temperature": 0.05 if i % 2 else 0.9,
           "top_p": 0.95} for i in range(12)]


def _seeded_texts(s, concurrently):
    def one(body):
        r = requests.post(s.url + "/v1/completions", timeout=120, json=body)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["text"]
    if not concurrently:
        return [one(b) for b in SEEDED]
    with ThreadPoolExecutor(len(SEEDED)) as pool:
        return list(pool.map(one, SEEDED))


def test_seeded_sampling_is_the_output_without_speculation():
    # Sampled requests with a seed give the text they give without speculation, also when they run
    # together in a KV cache too small for all of them (preempted, some steps without a draft).
    plain = Server()
    try:
        want = _seeded_texts(plain, concurrently=False)
    finally:
        plain.stop()
    s = Server("--speculative_config", SPEC, "--kv_cache_mb", "1", "--max_num_seqs", "12")
    try:
        assert _seeded_texts(s, concurrently=True) == want
        assert s.metric("latentserve_preemptions_total") > 0
        assert s.metric("latentserve_spec_decode_num_accepted_tokens_total") > 0
        assert _seeded_texts(s, concurrently=False) == want
    finally:
        s.stop()


def test_draft_model_output_is_the_output_without_speculation(grpc_stubs):
    other = "And God called the light Day, and the darkness he called Night. And the evening and the morning"
    plain = Server()
    try:
        want = [_complete(plain, p) for p in (PROMPT, other)]
    finally:
        plain.stop()
    # The served model as its own draft: the same vocabulary, and drafts the target agrees with.
    s = Server("--speculative_config", json.dumps({"method": "draft_model", "model": MODEL,
                                                   "num_speculative_tokens": 3}))
    try:
        spec = s.ready["speculative"]
        assert spec["method"] == "draft_model" and spec["num_speculative_tokens"] == 3, spec
        assert spec["draft_family"] == plain.ready["family"] and spec["draft_weight_mb"] > 0, spec
        for prompt, w in zip((PROMPT, other), want):
            got = _complete(s, prompt)
            assert got["text"] == w["text"] and got["finish_reason"] == w["finish_reason"]
            for a, b in zip(got["logprobs"]["token_logprobs"], w["logprobs"]["token_logprobs"]):
                assert abs(a - b) < 2e-3
        pb2, pb2_grpc = grpc_stubs
        stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
        msgs = list(stub.Generate(pb2.GenerateRequest(
            text=other, sampling=pb2.SamplingParams(max_tokens=40, temperature=0))))
        assert "".join(m.text for m in msgs) == want[1]["text"]
        metrics = requests.get(s.url + "/metrics", timeout=5).text
        assert 'latentserve_spec_decode_num_drafts_total{method="draft_model"}' in metrics
        proposed = s.metric("latentserve_spec_decode_num_draft_tokens_total")
        accepted = s.metric("latentserve_spec_decode_num_accepted_tokens_total")
        assert 0.9 * proposed < accepted <= proposed
        assert abs(s.metric("latentserve_spec_decode_acceptance_rate") - accepted / proposed) < 1e-9
        assert s.metric("latentserve_spec_decode_mean_accepted_length") > 2.5
        assert s.metric("latentserve_spec_decode_propose_errors_total") == 0
    finally:
        s.stop()


def test_structured_output_is_the_same_with_speculation(server):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "count": {"type": "integer"}}, "required": ["name", "count"]}
    body = {"prompt": PROMPT, "max_tokens": 60, "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}}
    want = requests.post(server.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]
    s = Server("--speculative_config", SPEC)
    try:
        got = requests.post(s.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]
        assert got["text"] == want["text"] and got["finish_reason"] == want["finish_reason"]
        assert s.metric("latentserve_structured_output_tokens_total") > 0
        assert s.metric("latentserve_spec_decode_num_drafts_total") > 0, "constrained requests speculate too"
    finally:
        s.stop()


def _tokens(s, prompt):
    r = requests.post(s.url + "/v1/completions", timeout=60, json={
        "prompt": prompt, "max_tokens": 16, "temperature": 0, "ignore_eos": True, "logprobs": 1,
        "return_tokens_as_token_ids": True})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["logprobs"]


def test_models_with_recurrent_layers_speculate_with_the_same_output():
    # Kimi-Linear (KDA and MLA layers): a rejected draft's recurrent state is taken back.
    kimi = os.path.join(ROOT, "tests", "data", "hf", "kimi_linear_bf16")
    qwen3 = os.path.join(ROOT, "tests", "data", "hf", "qwen3_f32")
    prompts = [[5, 17, 200, 3, 5, 17, 200, 3, 5, 17], [33, 34, 35, 36, 37, 33, 34, 35]]
    plain = Server(model=kimi)
    try:
        want = [_tokens(plain, p) for p in prompts]
    finally:
        plain.stop()
    for spec in (SPEC, json.dumps({"method": "draft_model", "model": qwen3, "num_speculative_tokens": 3})):
        s = Server("--speculative_config", spec, model=kimi)
        try:
            assert s.ready["speculative"]["num_speculative_tokens"] > 0
            for p, w in zip(prompts, want):
                got = _tokens(s, p)
                assert got["tokens"] == w["tokens"]
                for a, b in zip(got["token_logprobs"], w["token_logprobs"]):
                    assert abs(a - b) < 2e-3
            assert s.metric("latentserve_spec_decode_num_draft_tokens_total") > 0
        finally:
            s.stop()


def test_mtp_output_is_the_output_without_speculation(grpc_stubs):
    # DeepSeek-V3's and GLM-4-MoE's MTP layer drafts from the target's hidden rows; the HTTP and
    # gRPC output is the plain server's.
    pb2, pb2_grpc = grpc_stubs
    prompts = [[5, 17, 200, 3, 5, 17, 200, 3, 5, 17], [33, 34, 35, 36, 37, 33, 34, 35]]
    for name in ("deepseek_v3_mtp_f32", "glm4_moe_mtp_f32"):
        model = os.path.join(ROOT, "tests", "data", "hf", name)
        plain = Server(model=model)
        try:
            want = [_tokens(plain, p) for p in prompts]
        finally:
            plain.stop()
        s = Server("--speculative_config", '{"method": "mtp", "num_speculative_tokens": 3}', model=model)
        try:
            spec = s.ready["speculative"]
            assert spec["method"] == "mtp" and spec["num_speculative_tokens"] == 3 and spec["mtp_layer"] == 2
            assert spec["draft_weight_mb"] > 0
            for p, w in zip(prompts, want):
                got = _tokens(s, p)
                assert got["tokens"] == w["tokens"], name
                for a, b in zip(got["token_logprobs"], w["token_logprobs"]):
                    assert abs(a - b) < 2e-3
            stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
            req = pb2.GenerateRequest(token_ids=pb2.TokenIds(ids=prompts[0]),
                                      sampling=pb2.SamplingParams(max_tokens=16, ignore_eos=True, temperature=0))
            ids = [t for r in stub.Generate(req, timeout=60) for t in r.token_ids]
            assert ids == [int(t.split(":")[1]) for t in want[0]["tokens"]], name
            metrics = requests.get(s.url + "/metrics", timeout=10).text
            assert 'latentserve_spec_decode_num_draft_tokens_total{method="mtp"}' in metrics
            assert s.metric("latentserve_spec_decode_num_draft_tokens_total") > 0
        finally:
            s.stop()


def test_mtp_needs_a_checkpoint_with_the_layer():
    r = subprocess.run([BIN, "--model", MODEL, "--speculative_config", '{"method": "mtp", "num_speculative_tokens": 2}'],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "--speculative_config method \"mtp\"" in r.stderr + r.stdout, r.stderr
    assert "has no multi-token-prediction layers" in r.stderr + r.stdout, r.stderr


def _draft_with_token_changed(tmp_path):
    """A copy of the served model whose tokenizer swaps the ids of two ordinary tokens."""
    d = tmp_path / "draft"
    d.mkdir()
    for name in os.listdir(MODEL):
        if name != "tokenizer.json":
            os.symlink(os.path.join(MODEL, name), d / name)
    with open(os.path.join(MODEL, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    words = [(i, p) for p, i in sorted(vocab.items(), key=lambda kv: kv[1]) if i > 300 and p.isalpha()]
    (tid, a), (_, b) = words[0], words[1]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    with open(d / "tokenizer.json", "w") as f:
        json.dump(tok, f)
    return str(d), tid


def test_draft_model_with_another_vocabulary_is_refused(tmp_path):
    draft, tid = _draft_with_token_changed(tmp_path)
    for config, message in [
            ({"method": "draft_model", "model": draft, "num_speculative_tokens": 2},
             f"does not share the served model's vocabulary: token {tid} is"),
            ({"method": "draft_model", "model": str(tmp_path / "nowhere"), "num_speculative_tokens": 2},
             "draft model " + str(tmp_path / "nowhere"))]:
        r = subprocess.run([BIN, "--model", MODEL, "--speculative_config", json.dumps(config)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode != 0 and message in r.stderr + r.stdout, (config, r.stderr)


def test_bad_speculative_config_is_named():
    for config, message in [('{"method": "eagle", "num_speculative_tokens": 2}', "method 'eagle' is not supported"),
                            ('{"method": "ngram"}', "num_speculative_tokens is required"),
                            ('{"method": "ngram", "num_speculative_tokens": 40}', "must be in [1, 16]"),
                            ('{"method": "ngram", "num_speculative_tokens": 2, "draft": 1}', "unknown key 'draft'"),
                            ('{"method": "draft_model", "num_speculative_tokens": 2}', "needs \"model\""),
                            ('{"method": "draft_model", "model": "m", "num_speculative_tokens": 2, '
                             '"prompt_lookup_max": 3}', "'prompt_lookup_max' applies to method \"ngram\""),
                            ('{"method": "ngram", "model": "m", "num_speculative_tokens": 2}',
                             "'model' applies to method \"draft_model\""),
                            ('{"method": "mtp", "model": "m", "num_speculative_tokens": 2}',
                             "method \"mtp\" reads the served checkpoint's own layer"),
                            ('{"method": "mtp", "num_speculative_tokens": 2, "prompt_lookup_min": 2}',
                             "'prompt_lookup_min' applies to method \"ngram\", not \"mtp\""),
                            ("[1]", "must be a JSON object")]:
        r = subprocess.run([BIN, "--model", MODEL, "--speculative_config", config], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode != 0 and message in r.stderr + r.stdout, (config, r.stderr)
