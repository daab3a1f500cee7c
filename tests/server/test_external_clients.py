"""Unmodified external clients: the `openai` Python package against the HTTP API, and `grpcio`
with stubs generated from proto/ against the gRPC API."""
import grpc
import pytest

openai = pytest.importorskip("openai", reason="the openai package is not installed")


def test_openai_completions_and_chat(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
    model = client.models.list().data[0].id
    c = client.completions.create(model=model, prompt="In the beginning", max_tokens=5, temperature=0)
    assert c.choices[0].finish_reason in ("stop", "length")
    assert c.usage.completion_tokens >= 1
    chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello"}], max_tokens=5)
    assert chat.choices[0].message.role == "assistant"
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hello"}],
                                            max_tokens=5, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].usage.completion_tokens >= 1
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=model, prompt="x", temperature=-3)


def test_grpcio_client(server, grpc_stubs):
    pb2, pb2_grpc = grpc_stubs
    stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
    out = list(stub.Generate(pb2.GenerateRequest(
        chat=pb2.Chat(messages=[pb2.ChatMessage(role="user", content="Hello")]),
        sampling=pb2.SamplingParams(max_tokens=4))))
    assert out[-1].finish_reason in (pb2.FINISH_REASON_STOP, pb2.FINISH_REASON_LENGTH)
