"""gRPC over the network: streaming Generate, unary Tokenize/Detokenize/GetModelInfo/
GetExpertLoad, the standard health service and server reflection."""
import grpc
import pytest


@pytest.fixture(scope="module")
def stub(server, grpc_stubs):
    pb2, pb2_grpc = grpc_stubs
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    return pb2, pb2_grpc.GenerationServiceStub(channel), channel


def test_generate_streams_until_finish(stub):
    pb2, s, _ = stub
    req = pb2.GenerateRequest(text="In the beginning", sampling=pb2.SamplingParams(max_tokens=6, temperature=0,
                                                                                   ignore_eos=True))
    msgs = list(s.Generate(req))
    assert msgs[-1].finish_reason == pb2.FINISH_REASON_LENGTH
    assert msgs[-1].usage.completion_tokens == 6
    assert sum(len(m.token_ids) for m in msgs) == 6


def test_generate_matches_http_greedy(stub, server):
    import requests
    pb2, s, _ = stub
    text = "".join(m.text for m in s.Generate(pb2.GenerateRequest(
        text="And God said", sampling=pb2.SamplingParams(max_tokens=8, temperature=0, ignore_eos=True))))
    http = requests.post(server.url + "/v1/completions",
                         json={"prompt": "And God said", "max_tokens": 8, "temperature": 0, "ignore_eos": True}).json()
    assert text == http["choices"][0]["text"]


def test_stop_string_included_or_not_as_over_http(stub, server):
    import requests
    pb2, s, _ = stub
    for include in (False, True):
        text = "".join(m.text for m in s.Generate(pb2.GenerateRequest(
            text="And God said", sampling=pb2.SamplingParams(max_tokens=12, temperature=0, ignore_eos=True, stop=["said"],
                                                             include_stop_str_in_output=include))))
        http = requests.post(server.url + "/v1/completions",
                             json={"prompt": "And God said", "max_tokens": 12, "temperature": 0, "ignore_eos": True,
                                   "stop": ["said"], "include_stop_str_in_output": include}).json()
        assert text == http["choices"][0]["text"] and text.endswith("said") == include, (include, text)


def test_tokenize_detokenize_round_trip(stub):
    pb2, s, _ = stub
    ids = s.Tokenize(pb2.TokenizeRequest(text="Let there be light.")).token_ids
    assert len(ids) > 0
    assert s.Detokenize(pb2.DetokenizeRequest(token_ids=ids)).text == "Let there be light."


def test_model_info_and_expert_load(stub):
    pb2, s, _ = stub
    info = s.GetModelInfo(pb2.GetModelInfoRequest())
    assert info.num_routed_experts > 0 and info.vocab_size > 0
    list(s.Generate(pb2.GenerateRequest(text="a", sampling=pb2.SamplingParams(max_tokens=2))))
    load = s.GetExpertLoad(pb2.GetExpertLoadRequest())
    assert len(load.layers) > 0
    assert len(load.layers[0].tokens_per_expert) == info.num_routed_experts
    assert load.layers[0].max_over_mean >= 1.0


def test_invalid_argument_names_the_field(stub):
    pb2, s, _ = stub
    with pytest.raises(grpc.RpcError) as e:
        list(s.Generate(pb2.GenerateRequest(text="x", sampling=pb2.SamplingParams(top_p=2.0))))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "top_p" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:
        list(s.Generate(pb2.GenerateRequest()))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_health_service(server):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    ch = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""))
    assert resp.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_the_services(server):
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
    ch = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    stub = reflection_pb2_grpc.ServerReflectionStub(ch)
    resp = next(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
    names = {s.name for s in resp.list_services_response.service}
    assert "latentserve.v1.GenerationService" in names
    assert "grpc.health.v1.Health" in names
