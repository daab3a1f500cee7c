"""generation_config.json's sampling defaults (models/tiny: temperature 0.8, top_p 0.95) apply to
requests that leave those fields unset, as in vLLM; --generation_config none turns them off."""
import json

import pytest
import requests

from conftest import Server

PROMPT = {"prompt": "In the beginning", "max_tokens": 24, "ignore_eos": True}


def text(server, seeds=range(4), **fields):
    return [requests.post(server.url + "/v1/completions", json={**PROMPT, "seed": s, **fields}).json()
            ["choices"][0]["text"] for s in seeds]


@pytest.fixture(scope="module")
def no_defaults_server():
    s = Server("--generation_config", "none")
    yield s
    s.stop()


def start_line(server):
    [line] = [json.loads(l) for l in server.logs().splitlines() if '"event":"generation_config"' in l]
    return line


def test_unset_fields_take_the_models_defaults(server):
    assert start_line(server)["defaults"] == {"temperature": 0.8, "top_p": 0.95, "eos_token_ids": [0]}
    unset = text(server)
    assert unset == text(server, temperature=0.8, top_p=0.95)
    assert unset != text(server, temperature=1.0, top_p=1.0)
    # A field the request sets is its own; the others still come from the file.
    assert text(server, temperature=0.8) == unset


def test_generation_config_none_turns_them_off(server, no_defaults_server):
    assert start_line(no_defaults_server) == {**start_line(no_defaults_server), "source": "none", "defaults": {}}
    assert text(no_defaults_server) == text(server, temperature=1.0, top_p=1.0)
    assert text(no_defaults_server) != text(server)


def test_a_bad_generation_config_stops_the_start(tmp_path):
    bad = tmp_path / "generation_config.json"
    bad.write_text('{"temperature": "warm"}')
    with pytest.raises(RuntimeError) as e:
        Server("--generation_config", str(bad))
    assert "--generation_config" in str(e.value) and "'temperature'" in str(e.value)


def test_unset_max_tokens_is_the_same_over_http_and_grpc(tmp_path, grpc_stubs):
    """The model's default length (max_new_tokens) applies to a chat request without max_tokens
    whether it comes over HTTP or gRPC, and a plain prompt gets 16 on both."""
    import grpc
    config = tmp_path / "generation_config.json"
    config.write_text(json.dumps({"eos_token_id": 0, "max_new_tokens": 7}))
    s = Server("--generation_config", str(config))
    try:
        pb2, pb2_grpc = grpc_stubs
        stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
        http_chat = requests.post(s.url + "/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "In the beginning"}], "temperature": 0, "ignore_eos": True}).json()
        grpc_chat = list(stub.Generate(pb2.GenerateRequest(
            chat=pb2.Chat(messages=[pb2.ChatMessage(role="user", content="In the beginning")]),
            sampling=pb2.SamplingParams(temperature=0, ignore_eos=True))))
        assert http_chat["usage"]["completion_tokens"] == 7
        assert grpc_chat[-1].usage.completion_tokens == 7
        http_text = requests.post(s.url + "/v1/completions", json={
            "prompt": "In the beginning", "temperature": 0, "ignore_eos": True}).json()
        grpc_text = list(stub.Generate(pb2.GenerateRequest(
            text="In the beginning", sampling=pb2.SamplingParams(temperature=0, ignore_eos=True))))
        assert http_text["usage"]["completion_tokens"] == grpc_text[-1].usage.completion_tokens == 16
    finally:
        s.stop()
