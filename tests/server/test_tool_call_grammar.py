"""Tool calls that always parse: with tool_choice "required" or a named function, the reply is held
to the family's call syntax and each tool's JSON schema while it is sampled, so at temperature 1
every reply carries tool_calls whose arguments validate; with "auto", content is free and a call,
once begun, is held to the syntax, so no call falls back to content. Driven by the OpenAI SDK for
every text format (--tool_call_parser) on the tiny model, served with a template that declares
tools by name (tests/server/data/tool_names.jinja: the tiny model's context is short)."""
import json
import os

import pytest

from conftest import ROOT, Server

openai = pytest.importorskip("openai", reason="the openai package is not installed")
jsonschema = pytest.importorskip("jsonschema", reason="python3-jsonschema is not installed")

TEMPLATE = os.path.join(ROOT, "tests", "server", "data", "tool_names.jinja")
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7},
                                            "unit": {"enum": ["c", "f"]}},
           "required": ["city", "days"], "additionalProperties": False}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}}, "required": ["zone"]}
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": WEATHER, "strict": True}},
         {"type": "function", "function": {"name": "time", "parameters": TIME}}]
SCHEMAS = {"weather": WEATHER, "time": TIME}
ASK = [{"role": "user", "content": "Weather?"}]
FORMATS = ["hermes", "deepseek_v3", "kimi_k2", "glm45"]


@pytest.fixture(scope="module", params=FORMATS)
def family(request):
    s = Server("--chat_template", TEMPLATE, "--tool_call_parser", request.param)
    yield request.param, s, openai.OpenAI(base_url=s.url + "/v1", api_key="unused")
    s.stop()


def ask(client, seed, tool_choice, thinking=False, **extra):
    return client.chat.completions.create(
        model="tiny", messages=ASK, tools=TOOLS, tool_choice=tool_choice, temperature=1.0, seed=seed,
        extra_body={"chat_template_kwargs": {"enable_thinking": thinking}}, **extra)


def check_calls(calls, names):
    assert calls
    for call in calls:
        assert call.function.name in names, call
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def test_required_replies_always_carry_calls_that_validate(family):
    name, server, client = family
    for seed in range(12):
        r = ask(client, seed, "required", thinking=seed % 3 == 0, parallel_tool_calls=False)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls", (name, seed, choice.message.content)
        check_calls(choice.message.tool_calls, SCHEMAS)
        assert len(choice.message.tool_calls) == 1
    assert '"event":"chat_output_fallback"' not in server.logs()


def test_parallel_calls_each_validate(family):
    # The tiny model rarely ends after a call, so a reply of parallel calls may run to max_tokens:
    # every call it finished is returned and validates.
    name, _, client = family
    calls = 0
    for seed in range(4):
        r = ask(client, 50 + seed, "required", parallel_tool_calls=True)
        choice = r.choices[0]
        check_calls(choice.message.tool_calls, SCHEMAS)
        calls += len(choice.message.tool_calls)
    assert calls >= 4, name


def test_a_named_function_is_the_one_called(family):
    name, _, client = family
    for seed in range(4):
        r = ask(client, seed, {"type": "function", "function": {"name": "time"}})
        assert r.choices[0].finish_reason == "tool_calls", (name, r.choices[0].message.content)
        check_calls(r.choices[0].message.tool_calls, {"time"})
        assert len(r.choices[0].message.tool_calls) == 1


def test_streamed_required_call_arrives_whole(family):
    name, _, client = family
    chunks = [c for c in ask(client, 5, "required", stream=True) if c.choices]
    calls = {}
    for c in chunks:
        for tc in c.choices[0].delta.tool_calls or []:
            calls.setdefault(tc.index, {"name": tc.function.name, "arguments": ""})
            calls[tc.index]["arguments"] += tc.function.arguments or ""
    assert chunks[-1].choices[0].finish_reason == "tool_calls", name
    for call in calls.values():
        jsonschema.validate(json.loads(call["arguments"]), SCHEMAS[call["name"]])


def test_auto_calls_never_fall_back_to_content(family):
    name, server, client = family
    before = server.logs().count('"event":"chat_output_fallback"')
    for seed in range(6):
        r = ask(client, 100 + seed, "auto")
        if r.choices[0].message.tool_calls:
            check_calls(r.choices[0].message.tool_calls, SCHEMAS)
    assert server.logs().count('"event":"chat_output_fallback"') == before, name


def test_a_strict_tool_the_compiler_cannot_follow_is_refused_naming_it(family):
    _, _, client = family
    odd = [{"type": "function", "function": {"name": "odd", "strict": True,
                                             "parameters": {"type": "object", "propertyNames": {"maxLength": 3}}}}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=ASK, tools=odd, tool_choice="required", max_tokens=5)
    assert "tool 'odd' (strict)" in str(e.value) and "propertyNames" in str(e.value)
    # Not strict: the arguments are any object, and the request is served.
    odd[0]["function"]["strict"] = False
    r = client.chat.completions.create(model="tiny", messages=ASK, tools=odd, tool_choice="required",
                                       temperature=1.0, seed=1)
    assert r.choices[0].finish_reason in ("tool_calls", "length")
