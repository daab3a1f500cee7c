"""Tool calling and reasoning end to end, driven by the OpenAI Python SDK against the tiny model
served with a chat template that declares tools and thinks in <think> blocks
(tests/server/data/tools_and_thinking.jinja, Hermes-style calls).

The tiny model writes Bible-like text, never a call of its own. A call the server must read is
therefore written by the conversation: the final assistant message is continued
(continue_final_message) and ends one character short of a call's end marker; a logit bias makes
the model's one token that character, so the reply completes the call. Everything the model
writes freely must come back as content or reasoning, never as an error."""
import json
import os

import grpc
import pytest
import requests

from conftest import ROOT, Server

openai = pytest.importorskip("openai", reason="the openai package is not installed")

TEMPLATE = os.path.join(ROOT, "tests", "server", "data", "tools_and_thinking.jinja")
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
ASK = {"role": "user", "content": "Weather?"}
# The final assistant message, continued: a whole call but for the last '>' of </tool_call>.
OPEN_CALL = {"role": "assistant",
             "content": '<tool_call>\n{"name": "weather", "arguments": {"city": "Lima"}}\n</tool_call'}


@pytest.fixture(scope="module")
def tools_server():
    s = Server("--chat_template", TEMPLATE)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(tools_server):
    return openai.OpenAI(base_url=tools_server.url + "/v1", api_key="unused")


def token_id(server, text):
    r = requests.post(server.url + "/tokenize", json={"prompt": text, "add_special_tokens": False})
    assert r.status_code == 200, r.text
    assert len(r.json()["tokens"]) == 1, r.json()
    return r.json()["tokens"][0]


def completing_call(server, **extra):
    """Arguments of a chat request whose one generated token completes OPEN_CALL."""
    return dict(model="tiny", messages=[ASK, OPEN_CALL], tools=TOOLS, max_tokens=1, temperature=0,
                logit_bias={str(token_id(server, ">")): 100},
                extra_body={"continue_final_message": True, "add_generation_prompt": False}, **extra)


def test_tool_call_written_by_the_reply_comes_back_as_tool_calls(tools_server, client):
    r = client.chat.completions.create(**completing_call(tools_server))
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id
    assert call.function.name == "weather"
    assert json.loads(call.function.arguments) == {"city": "Lima"}


def test_streamed_tool_call_arrives_as_openai_deltas(tools_server, client):
    stream = client.chat.completions.create(**completing_call(tools_server), stream=True)
    chunks = list(stream)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    calls = [tc for d in deltas for tc in (d.tool_calls or [])]
    assert calls, deltas
    # The first piece names the call (id, type, name); the later ones only add arguments.
    assert calls[0].id and calls[0].type == "function" and calls[0].function.name == "weather"
    assert all(tc.index == 0 for tc in calls)
    assert all(tc.id is None and tc.function.name is None for tc in calls[1:])
    assert json.loads("".join(tc.function.arguments or "" for tc in calls)) == {"city": "Lima"}
    assert not "".join(d.content or "" for d in deltas)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


def test_tool_choice_none_reads_no_calls(tools_server, client):
    r = client.chat.completions.create(**completing_call(tools_server), tool_choice="none")
    assert r.choices[0].finish_reason != "tool_calls"
    assert not r.choices[0].message.tool_calls
    assert r.choices[0].message.content == ">"


def forced_reply(client, tool_choice, stream=False):
    args = dict(model="tiny", messages=[ASK], tools=TOOLS, tool_choice=tool_choice, max_tokens=6, temperature=0,
                extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    if not stream:
        r = client.chat.completions.create(**args)
        return r.choices[0].message.content, r.choices[0].message.tool_calls, r.choices[0].finish_reason
    chunks = [c for c in client.chat.completions.create(**args, stream=True) if c.choices]
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    return content, calls, chunks[-1].choices[0].finish_reason


@pytest.mark.parametrize("stream", [False, True])
def test_forced_tool_choice_starts_a_call_and_a_malformed_one_falls_back_to_content(tools_server, client, stream):
    # The prompt ends with a call's opening; the tiny model does not finish it as JSON, so the
    # call comes back as content (its opening included), with a warning in the log.
    before = tools_server.logs().count('"event":"chat_output_fallback"')
    named, calls, finish = forced_reply(client, {"type": "function", "function": {"name": "weather"}}, stream)
    assert named.startswith('<tool_call>\n{"name": "weather", "arguments": '), named
    assert not calls and finish == "length"
    required, calls, finish = forced_reply(client, "required", stream)
    assert required.startswith('<tool_call>\n{"name": "'), required
    assert not calls and finish == "length"
    assert tools_server.logs().count('"event":"chat_output_fallback"') == before + 2
    auto, calls, _ = forced_reply(client, "auto", stream)
    assert not auto.startswith("<tool_call>") and not calls


def test_any_sampled_output_parses_or_falls_back_the_same_streamed_or_not(tools_server, client):
    for seed in range(6):
        args = dict(model="tiny", messages=[ASK], tools=TOOLS, max_tokens=24, temperature=1.0, seed=seed,
                    extra_body={"chat_template_kwargs": {"enable_thinking": seed % 2 == 0}})
        whole = client.chat.completions.create(**args).choices[0]
        assert whole.finish_reason in ("stop", "length", "tool_calls")
        for call in whole.message.tool_calls or []:
            json.loads(call.function.arguments)
        chunks = [c for c in client.chat.completions.create(**args, stream=True) if c.choices]
        content = "".join(c.choices[0].delta.content or "" for c in chunks)
        reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks)
        assert content == (whole.message.content or ""), seed
        assert reasoning == ((whole.message.model_extra or {}).get("reasoning_content") or ""), seed
        assert chunks[-1].choices[0].finish_reason == whole.finish_reason


def test_reasoning_content_apart_from_content_and_include_reasoning(client):
    args = dict(model="tiny", messages=[ASK], max_tokens=8, temperature=0)
    # The generation prompt opens <think>: all the tiny model writes is reasoning (it never closes it).
    thinking = client.chat.completions.create(**args).choices[0].message
    assert thinking.model_extra.get("reasoning_content")
    assert not thinking.content
    streamed = [c.choices[0].delta for c in client.chat.completions.create(**args, stream=True) if c.choices]
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in streamed) == \
        thinking.model_extra["reasoning_content"]
    hidden = client.chat.completions.create(**args, extra_body={"include_reasoning": False}).choices[0].message
    assert not hidden.model_extra.get("reasoning_content") and not hidden.content
    # Thinking off: the template writes an empty think block, and the reply is content.
    plain = client.chat.completions.create(**args, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert plain.choices[0].message.content
    assert not plain.choices[0].message.model_extra.get("reasoning_content")


def test_parallel_tool_calls_false_and_tools_are_accepted(client):
    r = client.chat.completions.create(model="tiny", messages=[ASK], tools=TOOLS, parallel_tool_calls=False,
                                       max_tokens=2)
    assert r.choices[0].finish_reason in ("stop", "length")


def test_images_are_refused_naming_the_part_type(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", max_tokens=2, messages=[
            {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                         {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])
    assert "'image_url' part" in str(e.value) and "messages[0].content[1]" in str(e.value)


def test_tokenize_then_detokenize_round_trips_the_rendered_prompt(tools_server):
    jinja2 = pytest.importorskip("jinja2")
    messages = [{"role": "system", "content": "Be brief."}, ASK]
    r = requests.post(tools_server.url + "/tokenize",
                      json={"messages": messages, "tools": TOOLS, "add_generation_prompt": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["count"] == len(body["tokens"]) and body["max_model_len"] == 256
    back = requests.post(tools_server.url + "/detokenize", json={"tokens": body["tokens"]}).json()["prompt"]
    # jinja2, configured as transformers configures it, renders the same template to the same text.
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, indent=indent, ensure_ascii=False)
    with open(TEMPLATE) as f:
        expected = env.from_string(f.read()).render(messages=messages, tools=TOOLS, add_generation_prompt=True)
    assert back == expected
    # The chat completion's prompt is those tokens.
    usage = requests.post(tools_server.url + "/v1/chat/completions",
                          json={"messages": messages, "tools": TOOLS, "max_tokens": 1}).json()["usage"]
    assert usage["prompt_tokens"] == body["count"]
    # Without the generation prompt the prompt is shorter; a plain prompt round-trips as well.
    short = requests.post(tools_server.url + "/tokenize",
                          json={"messages": messages, "tools": TOOLS, "add_generation_prompt": False}).json()
    assert short["tokens"] == body["tokens"][:short["count"]] and short["count"] < body["count"]
    plain = requests.post(tools_server.url + "/tokenize", json={"prompt": "Let there be light."}).json()
    assert requests.post(tools_server.url + "/detokenize",
                         json={"tokens": plain["tokens"]}).json() == {"prompt": "Let there be light."}


def test_grpc_tokenize_and_tool_calls_match_http(tools_server, grpc_stubs):
    pb2, pb2_grpc = grpc_stubs
    stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{tools_server.grpc_port}"))
    chat = pb2.Chat(messages=[pb2.ChatMessage(role="user", content="Weather?")], tools_json=json.dumps(TOOLS))
    t = stub.Tokenize(pb2.TokenizeRequest(chat=chat))
    http = requests.post(tools_server.url + "/tokenize", json={"messages": [ASK], "tools": TOOLS}).json()
    assert list(t.token_ids) == http["tokens"] and t.count == http["count"] and t.max_model_len == 256
    assert stub.Detokenize(pb2.DetokenizeRequest(token_ids=t.token_ids)).text == requests.post(
        tools_server.url + "/detokenize", json={"tokens": http["tokens"]}).json()["prompt"]
    # A call completed by the reply, as on HTTP.
    chat = pb2.Chat(messages=[pb2.ChatMessage(role="user", content="Weather?"),
                              pb2.ChatMessage(role="assistant", content=OPEN_CALL["content"])],
                    tools_json=json.dumps(TOOLS), continue_final_message=True, add_generation_prompt=False)
    out = list(stub.Generate(pb2.GenerateRequest(chat=chat, sampling=pb2.SamplingParams(
        max_tokens=1, temperature=0, logit_bias={token_id(tools_server, ">"): 100}))))
    calls = [c for m in out for c in m.tool_calls]
    assert calls[0].name == "weather" and calls[0].id
    assert json.loads("".join(c.arguments for c in calls)) == {"city": "Lima"}
    assert out[-1].finish_reason == pb2.FINISH_REASON_TOOL_CALLS
    # Bad chat fields name themselves.
    with pytest.raises(grpc.RpcError) as e:
        stub.Tokenize(pb2.TokenizeRequest(chat=pb2.Chat(messages=[pb2.ChatMessage(role="user", content="x")],
                                                        tools_json="{")))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "tools_json" in e.value.details()


def test_kimi_k3_chat_is_rendered_and_read_as_xtml(grpc_stubs):
    """The tiny Kimi K3 (tests/data/k3) chats in XTML: the prompt is XtmlChat's ids, its reply goes
    through the XTML parser (random output comes back as reasoning, content or calls, never an
    error), and <|end_of_msg|> stops generation."""
    k3 = Server("--model", os.path.join(ROOT, "tests", "data", "k3", "k3_tiny_bf16"))
    try:
        [line] = [json.loads(l) for l in k3.logs().splitlines() if '"event":"chat_format"' in l]
        assert line["chat_format"] == "xtml" and line["tool_call_parser"] == "xtml"
        end_of_msg = line["end_of_msg_id"]
        tok = requests.post(k3.url + "/tokenize", json={"messages": [ASK], "tools": TOOLS}).json()
        prompt = requests.post(k3.url + "/detokenize", json={"tokens": tok["tokens"]}).json()["prompt"]
        assert 'type="tool-declare"' in prompt and '"name":"weather"' in prompt, prompt
        assert prompt.count("<|end_of_msg|>") == tok["tokens"].count(end_of_msg) >= 2, prompt
        assert prompt.endswith('<|open|>message role="assistant"<|sep|><|open|>think<|sep|>'), prompt
        client = openai.OpenAI(base_url=k3.url + "/v1", api_key="unused")
        for seed in range(3):
            args = dict(model=k3.ready["model"], messages=[ASK], tools=TOOLS, max_tokens=16, temperature=1.0,
                        seed=seed)
            whole = client.chat.completions.create(**args)
            assert whole.choices[0].finish_reason in ("stop", "length", "tool_calls")
            assert whole.usage.prompt_tokens == tok["count"]
            chunks = [c for c in client.chat.completions.create(**args, stream=True) if c.choices]
            assert "".join(c.choices[0].delta.content or "" for c in chunks) == (whole.choices[0].message.content or "")
        # The prompt leaves the model in the think channel: with the structural ids banned, all it
        # writes is reasoning_content, streamed as reasoning deltas, and content stays empty.
        with open(os.path.join(ROOT, "tests", "data", "k3", "k3_tiny_bf16", "tokenizer_config.json")) as f:
            names = {v["content"]: int(k) for k, v in json.load(f)["added_tokens_decoder"].items()}
        ban = {str(names[m]): -100 for m in ("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>")}
        args = dict(model=k3.ready["model"], messages=[ASK], max_tokens=6, temperature=0, logit_bias=ban)
        thought = client.chat.completions.create(**args).choices[0]
        reasoning = thought.message.model_extra.get("reasoning_content")
        assert thought.finish_reason == "length" and reasoning and not thought.message.content, thought
        streamed = [c.choices[0].delta for c in client.chat.completions.create(**args, stream=True) if c.choices]
        assert "".join(d.model_extra.get("reasoning_content") or "" for d in streamed) == reasoning
        assert not "".join(d.content or "" for d in streamed)
        # Generation ends at <|end_of_msg|>: a bias that makes it the first token ends the reply there.
        r = client.chat.completions.create(model=k3.ready["model"], messages=[ASK], max_tokens=8, temperature=0,
                                           logit_bias={str(end_of_msg): 100})
        assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens == 1
        # The request's own reasoning_effort is the format's: "none" leaves the think channel
        # closed, "high" adds the effort message, and a value K3 does not know is a 400 naming it.
        for effort in ("none", "high"):
            t = requests.post(k3.url + "/tokenize",
                              json={"messages": [ASK], "chat_template_kwargs": {"reasoning_effort": effort}}).json()
            assert t["tokens"] != tok["tokens"]
            r = client.chat.completions.create(model=k3.ready["model"], messages=[ASK], max_tokens=1, temperature=0,
                                               reasoning_effort=effort)
            assert r.usage.prompt_tokens == t["count"], effort
            pb2, pb2_grpc = grpc_stubs
            stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{k3.grpc_port}"))
            chat = pb2.Chat(messages=[pb2.ChatMessage(role="user", content="Weather?")], reasoning_effort=effort)
            assert list(stub.Tokenize(pb2.TokenizeRequest(chat=chat)).token_ids) == t["tokens"], effort
        text = requests.post(k3.url + "/detokenize", json={"tokens": t["tokens"]}).json()["prompt"]
        assert "thinking_effort=high" in text, text
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=k3.ready["model"], messages=[ASK], max_tokens=1,
                                           extra_body={"reasoning_effort": "extreme"})
        assert "reasoning_effort" in str(e.value) and "extreme" in str(e.value)
    finally:
        k3.stop()
