"""Speculative decoding (n-gram prompt lookup) through the server: greedy completions over HTTP and
gRPC are the ones of a server without it, /metrics counts the drafts proposed and accepted, the
ready line says what runs, and a bad --speculative_config stops the start with a message naming
what is wrong."""
import subprocess

import grpc
import requests

from conftest import BIN, MODEL, Server

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


def test_bad_speculative_config_is_named():
    for config, message in [('{"method": "eagle", "num_speculative_tokens": 2}', "method 'eagle' is not supported"),
                            ('{"method": "ngram"}', "num_speculative_tokens is required"),
                            ('{"method": "ngram", "num_speculative_tokens": 40}', "must be in [1, 16]"),
                            ('{"method": "ngram", "num_speculative_tokens": 2, "draft": 1}', "unknown key 'draft'"),
                            ("[1]", "must be a JSON object")]:
        r = subprocess.run([BIN, "--model", MODEL, "--speculative_config", config], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode != 0 and message in r.stderr + r.stdout, (config, r.stderr)
