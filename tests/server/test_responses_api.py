"""The Responses API (POST /v1/responses), driven by the OpenAI SDK and the OpenAI Agents SDK: a
response is the chat completion its input stands for (same greedy text), streamed as the Responses
events in order, with function calls as output items that round-trip as input, text.format held to
its JSON schema, stored responses retrieved, deleted and continued with previous_response_id, background responses
polled and cancelled, and what the server does not serve refused by name."""
import http.client
import json
import os
import re
import socket
import threading
import time
from typing import Annotated

import pytest
import requests

from conftest import ROOT, Server

openai = pytest.importorskip("openai", reason="the openai package is not installed")
jsonschema = pytest.importorskip("jsonschema", reason="python3-jsonschema is not installed")

TEMPLATE = os.path.join(ROOT, "tests", "server", "data", "tool_names.jinja")
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                                            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"], "additionalProperties": False}
TOOLS = [{"type": "function", "name": "weather", "parameters": WEATHER, "strict": True}]
CHAT_TOOL = {"type": "function", "function": {"name": "weather", "parameters": WEATHER, "strict": True}}


@pytest.fixture(scope="module")
def served():
    """A server whose template reasons first and declares tools (tests/server/data/tool_names.jinja)."""
    s = Server("--chat_template", TEMPLATE, "--tool_call_parser", "hermes")
    yield s, openai.OpenAI(base_url=s.url + "/v1", api_key="unused")
    s.stop()


@pytest.fixture(scope="module")
def plain(server):
    """The shared server: the tiny model's own template, no reasoning."""
    return server, openai.OpenAI(base_url=server.url + "/v1", api_key="unused")


def call_message(content, call):
    """The assistant's chat message that made function call `call` (a function_call item)."""
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}]}


def tool_turn_chat(client, assistant, call, output):
    """The chat completion of a tool turn without thinking: the question, the assistant's call and
    the tool's output."""
    messages = [{"role": "user", "content": "Weather?"}, assistant,
                {"role": "tool", "tool_call_id": call.call_id, "content": output}]
    return client.chat.completions.create(model="tiny", messages=messages, tools=[CHAT_TOOL], tool_choice="none",
                                          temperature=0, max_tokens=8,
                                          extra_body={"chat_template_kwargs": {"enable_thinking": False}})


def chat_text(client, messages, max_tokens):
    r = client.chat.completions.create(model="tiny", messages=messages, temperature=0, max_tokens=max_tokens)
    return r.choices[0].message.content, r.usage


def test_a_response_is_the_chat_completion_its_input_stands_for(plain):
    _, client = plain
    r = client.responses.create(model="tiny", input="The old man", instructions="Tell a story.", temperature=0,
                                max_output_tokens=20)
    text, usage = chat_text(client, [{"role": "system", "content": "Tell a story."},
                                     {"role": "user", "content": "The old man"}], 20)
    assert r.id.startswith("resp_") and r.object == "response"
    assert r.output_text == text and text
    assert r.instructions == "Tell a story." and r.max_output_tokens == 20
    assert r.usage.input_tokens == usage.prompt_tokens and r.usage.output_tokens == usage.completion_tokens
    assert r.usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert [item.type for item in r.output] == ["message"]
    if usage.completion_tokens == 20:
        assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
        assert r.output[-1].status == "incomplete"
    else:
        assert r.status == "completed"


def test_reasoning_comes_back_as_its_own_item(served):
    _, client = served
    r = client.responses.create(model="tiny", input="The old man", temperature=0, max_output_tokens=40)
    chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "The old man"}],
                                          temperature=0, max_tokens=40).choices[0].message
    reasoning = chat.model_extra.get("reasoning_content") or chat.model_extra.get("reasoning")
    assert reasoning
    assert r.output[0].type == "reasoning"
    assert "".join(part.text for part in r.output[0].content) == reasoning
    assert r.output_text == (chat.content or "")


def test_message_items_and_roles_become_the_conversation(plain):
    _, client = plain
    items = [{"role": "developer", "content": "Be brief."},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
             {"role": "user", "content": "Once upon"}]
    r = client.responses.create(model="tiny", input=items, temperature=0, max_output_tokens=12)
    text, _ = chat_text(client, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                                 {"role": "assistant", "content": "Hello."},
                                 {"role": "user", "content": "Once upon"}], 12)
    assert r.output_text == text


def test_streamed_events_arrive_in_order_and_add_up_to_the_response(plain):
    _, client = plain
    whole = client.responses.create(model="tiny", input="A dog", temperature=0, max_output_tokens=16)
    events = list(client.responses.create(model="tiny", input="A dog", temperature=0, max_output_tokens=16,
                                          stream=True))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert types.index("response.output_item.added") < types.index("response.content_part.added") < \
        types.index("response.output_text.delta")
    assert types[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert deltas == whole.output_text == final.output_text
    assert final.id == events[0].response.id and final.status == whole.status
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_logprobs_come_with_the_message_when_included(plain):
    """include: message.output_text.logprobs gives the message's tokens with their logprobs and
    top_logprobs alternatives, those of the chat completion; streamed, the text deltas carry them
    and output_text.done has them all."""
    _, client = plain
    kw = dict(model="tiny", input="The old man", temperature=0, max_output_tokens=10)
    r = client.responses.create(include=["message.output_text.logprobs"], top_logprobs=3, **kw)
    chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "The old man"}],
                                          temperature=0, max_tokens=10, logprobs=True, top_logprobs=3)
    part = r.output[0].content[0]
    want = chat.choices[0].logprobs.content
    assert part.text == chat.choices[0].message.content and want
    assert [(lp.token, lp.bytes) for lp in part.logprobs] == [(lp.token, lp.bytes) for lp in want]
    for got, exp in zip(part.logprobs, want):
        assert got.logprob == pytest.approx(exp.logprob, abs=1e-6) and got.logprob <= 0
        assert [t.token for t in got.top_logprobs] == [t.token for t in exp.top_logprobs]
        assert len(got.top_logprobs) == 3
    assert bytes(b for lp in part.logprobs for b in lp.bytes).decode("utf-8").startswith(part.text)
    assert r.top_logprobs == 3

    assert client.responses.create(top_logprobs=3, **kw).output[0].content[0].logprobs == []  # not included
    no_alternatives = client.responses.create(include=["message.output_text.logprobs"], **kw).output[0].content[0]
    assert [lp.token for lp in no_alternatives.logprobs] == [lp.token for lp in part.logprobs]
    assert all(lp.top_logprobs == [] for lp in no_alternatives.logprobs)

    events = list(client.responses.create(include=["message.output_text.logprobs"], top_logprobs=3, stream=True,
                                          **kw))
    streamed = [lp.token for e in events if e.type == "response.output_text.delta" for lp in e.logprobs]
    done = next(e for e in events if e.type == "response.output_text.done")
    final = events[-1].response.output[0].content[0]
    whole = [lp.token for lp in part.logprobs]
    assert [lp.token for lp in done.logprobs] == [lp.token for lp in final.logprobs] == whole
    assert streamed == whole[:len(streamed)] and len(streamed) >= len(whole) - 1  # the end of sequence: at done


def test_function_calls_validate_and_round_trip_as_input(served):
    _, client = served
    for seed in range(3):
        r = client.responses.create(model="tiny", input="Weather?", tools=TOOLS, tool_choice="required",
                                    parallel_tool_calls=False, temperature=1.0, extra_body={"seed": seed})
        calls = [item for item in r.output if item.type == "function_call"]
        assert len(calls) == 1, r.output
        call = calls[0]
        assert call.name == "weather" and call.call_id and call.status == "completed"
        jsonschema.validate(json.loads(call.arguments), WEATHER)
        assert r.status == "completed"
    # The call and its output, sent back as input items, are the tool turn of the next request.
    follow = [{"role": "user", "content": "Weather?"},
              {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
              {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C"}]
    r2 = client.responses.create(model="tiny", input=follow, tools=TOOLS, tool_choice="none", temperature=0,
                                 max_output_tokens=8, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    chat = tool_turn_chat(client, call_message("", call), call, "Sunny, 21 C")
    assert r2.usage.input_tokens == chat.usage.prompt_tokens
    assert r2.output_text == chat.choices[0].message.content
    assert all(item.type == "message" for item in r2.output)


def test_streamed_function_call_arguments_add_up(served):
    _, client = served
    events = list(client.responses.create(model="tiny", input="Weather?", tools=TOOLS, tool_choice="required",
                                          parallel_tool_calls=False, temperature=1.0, stream=True,
                                          extra_body={"seed": 3}))
    added = [e for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
    assert len(added) == 1 and added[0].item.name == "weather"
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1 and done[0].arguments == args
    jsonschema.validate(json.loads(args), WEATHER)
    assert events[-1].type == "response.completed"
    assert [i.arguments for i in events[-1].response.output if i.type == "function_call"] == [args]


def test_text_format_json_schema_is_followed(plain):
    _, client = plain
    schema = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0, "maximum": 120},
                                               "adult": {"type": "boolean"}},
              "required": ["age", "adult"], "additionalProperties": False}
    for seed in range(3):
        r = client.responses.create(model="tiny", input="A person:", temperature=1.0, max_output_tokens=200,
                                    text={"format": {"type": "json_schema", "name": "person", "schema": schema,
                                                     "strict": True}},
                                    extra_body={"seed": seed})
        assert r.status == "completed", r.output_text
        jsonschema.validate(json.loads(r.output_text), schema)
        assert r.text.format.type == "json_schema"


@pytest.mark.parametrize("extra,named", [
    ({"previous_response_id": 7}, "'previous_response_id' must be a string"),
    ({"store": "yes"}, "'store' must be true or false"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"background": "yes"}, "'background' must be true or false"),
    ({"background": True, "stream": True}, "'background' with 'stream'"),
    ({"background": True, "store": False}, "'background' needs the response stored"),
    ({"tools": [{"type": "web_search"}]}, "web_search"),
    ({"input": [{"type": "image_generation_call", "id": "x"}]}, "image_generation_call"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input_image"),
    ({"text": {"format": {"type": "xml"}}}, "text.format.type"),
    ({"frobnicate": 1}, "frobnicate"),
    ({"top_logprobs": 21}, "'top_logprobs' must be between 0 and 20"),
    ({"include": "message.output_text.logprobs"}, "'include' must be a list of strings"),
    ({"max_output_tokens": 0}, "'max_output_tokens' must be between 1"),  # named as sent, not as translated
    ({"max_output_tokens": "ten"}, "'max_output_tokens' must be between 1"),
    ({"truncation": "middle"}, "'truncation' must be \"auto\" or \"disabled\""),
    ({"max_tool_calls": -1}, "'max_tool_calls' must be a non-negative integer"),
    ({"reasoning": {"effort": 3}}, "'reasoning.effort' must be a string"),
    ({"reasoning": "high"}, "'reasoning' must be an object"),
    # Fields of the wrong JSON type (an object where a string belongs) are refused, not thrown on.
    ({"tools": [{"type": {"type": "object"}, "name": "f"}]}, "is a '{\"type\":\"object\"}' tool"),
    ({"input": [{"type": {}, "role": "user", "content": "Hi"}]}, "input[0]"),
    ({"input": [{"role": 5, "content": "Hi"}]}, "'input[0].role' must be user"),
    ({"input": [{"role": "user", "content": [{"type": [], "text": "Hi"}]}]}, "input[0]"),
    ({"tool_choice": {"type": 5, "name": "f"}}, "'tool_choice' must be"),
    ({"text": {"format": {"type": []}}}, "text.format"),
    ({"text": {"format": {"type": "json_schema", "name": 5, "schema": {}}}}, "'text.format.name' must be a string"),
    ({"tools": [{"type": "function", "name": "weather", "parameters": WEATHER, "strict": "yes"}]},
     "'tools[0].function.strict' must be true or false"),
])
def test_what_is_not_served_is_refused_by_name(served, extra, named):
    server, client = served
    body = {"model": "tiny", "input": "Hi", **extra}
    with pytest.raises(openai.BadRequestError) as e:
        client.post("/responses", body=body, cast_to=object)
    assert named in str(e.value)
    assert client.responses.create(model="tiny", input="Hi", max_output_tokens=2).status  # still serving


def test_max_tool_calls_limits_hosted_tools_only_and_is_echoed(served):
    """max_tool_calls counts calls to hosted tools, which this server has none of: function calls
    go on as without it, and the Response repeats the limit."""
    _, client = served
    args = dict(model="tiny", input="Weather?", tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                temperature=1.0, store=False, extra_body={"seed": 0})
    plain = client.responses.create(**args)
    limited = client.responses.create(**args, max_tool_calls=0)
    assert limited.max_tool_calls == 0
    assert [(o.type, getattr(o, "arguments", None)) for o in limited.output] == \
        [(o.type, getattr(o, "arguments", None)) for o in plain.output]
    assert any(o.type == "function_call" for o in limited.output)


def test_reasoning_effort_is_the_templates_variable(served):
    """reasoning_effort (chat) and reasoning.effort (Responses) reach the chat template as its
    reasoning_effort variable, as vLLM passes it; chat_template_kwargs set it instead and win."""
    server, client = served
    messages = [{"role": "user", "content": "Weather?"}]

    def rendered(effort=None):
        body = {"messages": messages}
        if effort is not None:
            body["chat_template_kwargs"] = {"reasoning_effort": effort}
        r = requests.post(server.url + "/tokenize", json=body)
        assert r.status_code == 200, r.text
        return r.json()["count"]

    def prompt_tokens(**kw):
        return client.chat.completions.create(model="tiny", messages=messages, max_tokens=1, temperature=0,
                                              **kw).usage.prompt_tokens

    plain, high, slow = rendered(), rendered("high"), rendered("as much as it takes, and then some more")
    assert plain < high < slow
    assert prompt_tokens() == plain
    assert prompt_tokens(reasoning_effort="high") == high
    kwargs_win = {"chat_template_kwargs": {"reasoning_effort": "as much as it takes, and then some more"}}
    assert prompt_tokens(reasoning_effort="high", extra_body=kwargs_win) == slow
    r = client.responses.create(model="tiny", input="Weather?", reasoning={"effort": "high"}, max_output_tokens=1,
                                temperature=0, store=False)
    assert r.usage.input_tokens == high and r.reasoning.effort == "high"
    r = client.responses.create(model="tiny", input="Weather?", reasoning={"summary": "auto"}, max_output_tokens=1,
                                temperature=0, store=False)
    assert r.usage.input_tokens == plain and r.reasoning.effort is None
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=messages, max_tokens=1, extra_body={"reasoning_effort": 3})
    assert "'reasoning_effort' must be a string" in str(e.value)


def test_truncation_auto_drops_the_oldest_turns_until_the_prompt_fits(plain):
    """truncation "auto" keeps the instructions and drops whole turns from the start (from one user
    message to the next) until the prompt and max_output_tokens fit the 256-token context: the
    fewest turns that do, as /tokenize counts them. "disabled" (the default) refuses instead."""
    server, client = plain
    turns = []
    for i in range(8):
        turns.append({"role": "user", "content": f"Verse {i}: and the LORD spake unto Moses, saying"})
        turns.append({"role": "assistant", "content": "Speak unto the children of Israel, and say unto them"})
    turns.append({"role": "user", "content": "And then?"})
    system = {"role": "system", "content": "Answer in the words of the book."}
    budget = 16

    def count(messages):
        r = requests.post(server.url + "/tokenize", json={"messages": messages})
        assert r.status_code == 200, r.text
        return r.json()["count"]

    assert count([system] + turns) + budget > 256  # the whole conversation does not fit
    users = [i for i, m in enumerate(turns) if m["role"] == "user"]
    expected = next(count([system] + turns[i:]) for i in users if count([system] + turns[i:]) + budget <= 256)
    args = dict(model="tiny", instructions=system["content"], input=turns, max_output_tokens=budget, temperature=0,
                store=False)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(**args)
    assert "context length" in str(e.value)
    r = client.responses.create(**args, truncation="auto")
    assert r.truncation == "auto" and r.usage.input_tokens == expected, (r.usage, expected)
    streamed = [ev for ev in client.responses.create(**args, truncation="auto", stream=True)]
    assert streamed[-1].response.usage.input_tokens == expected
    assert streamed[-1].response.output_text == r.output_text
    # A chain continued with previous_response_id keeps going past the context.
    prev = None
    for i in range(10):
        r = client.responses.create(model="tiny", input="Let there be light, and there was light " * 2,
                                    max_output_tokens=budget, temperature=0, truncation="auto",
                                    previous_response_id=prev)
        assert r.status == "completed" or r.status == "incomplete"
        prev = r.id
    assert r.usage.input_tokens + budget <= 256
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(**args, truncation="sometimes")
    assert "'truncation' must be" in str(e.value)


def test_the_agents_sdk_runs_a_tool_through_the_server(served):
    agents = pytest.importorskip("agents", reason="the openai-agents package is not installed")
    pydantic = pytest.importorskip("pydantic")
    _, client = served
    agents.set_tracing_disabled(True)
    seen = []

    @agents.function_tool
    def forecast(days: Annotated[int, pydantic.Field(ge=1, le=7)]) -> str:
        """The weather for some days."""
        seen.append(days)
        return f"sunny for {days} days"

    async_client = openai.AsyncOpenAI(base_url=client.base_url, api_key="unused")
    agent = agents.Agent(name="forecaster", instructions="Use the tool.", tools=[forecast],
                         model=agents.OpenAIResponsesModel(model="tiny", openai_client=async_client),
                         model_settings=agents.ModelSettings(
                             tool_choice="required", temperature=0, parallel_tool_calls=False, max_tokens=120,
                             extra_body={"chat_template_kwargs": {"enable_thinking": False}}),
                         tool_use_behavior="stop_on_first_tool")
    result = agents.Runner.run_sync(agent, "Weather in Paris?", max_turns=2)
    assert len(seen) == 1 and 1 <= seen[0] <= 7
    assert result.final_output == f"sunny for {seen[0]} days"


def test_a_stored_response_is_retrieved_and_continued(plain):
    """store is the default: the response comes back from GET, and previous_response_id continues its
    conversation (its input and its reply, not its instructions) as the same chat would."""
    _, client = plain
    first = client.responses.create(model="tiny", input="The old man", instructions="Tell a story.", temperature=0,
                                    max_output_tokens=12)
    assert first.store is True
    again = client.responses.retrieve(first.id)
    assert again.model_dump() == first.model_dump()
    second = client.responses.create(model="tiny", input="And then", previous_response_id=first.id, temperature=0,
                                     max_output_tokens=12)
    assert second.previous_response_id == first.id and second.instructions is None
    messages = [{"role": "user", "content": "The old man"}, {"role": "assistant", "content": first.output_text},
                {"role": "user", "content": "And then"}]
    text, usage = chat_text(client, messages, 12)
    assert second.output_text == text and second.usage.input_tokens == usage.prompt_tokens
    # A third turn, streamed, continues the second; the streamed response is stored as it ended.
    events = list(client.responses.create(model="tiny", input="The end", previous_response_id=second.id,
                                          instructions="Be brief.", temperature=0, max_output_tokens=12,
                                          stream=True))
    third = events[-1].response
    messages += [{"role": "assistant", "content": second.output_text}, {"role": "user", "content": "The end"}]
    text, usage = chat_text(client, [{"role": "system", "content": "Be brief."}, *messages], 12)
    assert third.output_text == text and third.usage.input_tokens == usage.prompt_tokens
    assert client.responses.retrieve(third.id).output_text == text


def test_a_stored_function_call_is_answered_by_its_output_alone(served):
    """The Agents-SDK way of a tool turn: the next request sends only the call's output and the id of
    the response that made the call; the stored conversation supplies the rest, reasoning included."""
    _, client = served
    first = client.responses.create(model="tiny", input="Weather?", tools=TOOLS, tool_choice="required",
                                    parallel_tool_calls=False, temperature=1.0, extra_body={"seed": 1})
    call = next(item for item in first.output if item.type == "function_call")
    reasoning = "".join(part.text for item in first.output if item.type == "reasoning" for part in item.content)
    second = client.responses.create(
        model="tiny", previous_response_id=first.id, tools=TOOLS, tool_choice="none", temperature=0,
        max_output_tokens=8, input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny"}],
        extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assistant = call_message(first.output_text, call)
    if reasoning:
        assistant["reasoning_content"] = reasoning
    chat = tool_turn_chat(client, assistant, call, "Sunny")
    assert second.usage.input_tokens == chat.usage.prompt_tokens
    assert second.output_text == chat.choices[0].message.content


def test_a_response_whose_client_hung_up_is_not_stored(plain):
    """A streamed response cut short by its client is cancelled, and not kept as if it had completed."""
    server, client = plain
    body = {"model": "tiny", "input": "The old man", "stream": True, "max_output_tokens": 200, "temperature": 0}
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    c.request("POST", "/v1/responses", json.dumps(body), {"content-type": "application/json"})
    first = c.getresponse().read(300).decode()  # into response.created (200 tokens take far longer)
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    response_id = re.search(r'"id":"(resp_[^"]+)"', first).group(1)
    deadline = time.time() + 30
    while server.metric("latentserve_num_requests_running") > 0 and time.time() < deadline:
        time.sleep(0.02)
    assert requests.get(f"{server.url}/v1/responses/{response_id}", timeout=10).status_code == 404


def test_a_stored_responses_input_items_are_listed_by_page(plain):
    server, client = plain
    items = [{"role": "developer", "content": "Be brief."},
             {"type": "message", "role": "user", "id": "msg_mine", "content": [{"type": "input_text", "text": "Hi"}]},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
             {"role": "user", "content": "Once upon"}]
    r = client.responses.create(model="tiny", input=items, temperature=0, max_output_tokens=2)
    page = client.responses.input_items.list(r.id)  # newest first, by default
    texts = [item.content[0].text for item in page.data]
    assert texts == ["Once upon", "Hello.", "Hi", "Be brief."] and not page.has_more
    assert [item.role for item in page.data] == ["user", "assistant", "user", "developer"]
    ids = [item.id for item in page.data]
    assert ids[2] == "msg_mine" and len(set(ids)) == 4 and all(ids)
    assert page.first_id == ids[0] and page.last_id == ids[-1]
    first = client.responses.input_items.list(r.id, order="asc", limit=3)
    assert [item.id for item in first.data] == ids[::-1][:3] and first.has_more
    rest = client.responses.input_items.list(r.id, order="asc", limit=3, after=first.last_id)
    assert [item.id for item in rest.data] == [ids[0]] and not rest.has_more
    simple = client.responses.create(model="tiny", input="The old man", max_output_tokens=2)
    [only] = client.responses.input_items.list(simple.id).data
    assert only.type == "message" and only.role == "user" and only.content[0].text == "The old man"
    for query, named in (("order=up", "order"), ("limit=0", "limit"), ("limit=x", "limit"), ("after=nope", "after")):
        bad = requests.get(f"{server.url}/v1/responses/{r.id}/input_items?{query}", timeout=10)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == named, bad.text


def test_deleted_and_unstored_responses_are_not_found(plain):
    server, client = plain
    kept = client.responses.create(model="tiny", input="Hi", max_output_tokens=2)
    stored, store_bytes = server.metric("latentserve_responses_stored"), server.metric("latentserve_responses_store_bytes")
    assert stored >= 1 and store_bytes > 0 and server.metric("latentserve_responses_dropped_total") == 0
    deleted = requests.delete(f"{server.url}/v1/responses/{kept.id}", timeout=10)
    assert deleted.status_code == 200
    assert deleted.json() == {"id": kept.id, "object": "response.deleted", "deleted": True}
    by_sdk = client.responses.create(model="tiny", input="Hi", max_output_tokens=2)
    client.responses.delete(by_sdk.id)
    for gone in (kept.id, by_sdk.id, "resp_unknown"):
        with pytest.raises(openai.NotFoundError) as e:
            client.responses.retrieve(gone)
        assert gone in str(e.value)
        with pytest.raises(openai.NotFoundError) as e:
            client.responses.create(model="tiny", input="Hi", previous_response_id=gone, max_output_tokens=2)
        assert gone in str(e.value) and "previous response" in str(e.value)
    assert requests.delete(f"{server.url}/v1/responses/{kept.id}", timeout=10).status_code == 404
    assert server.metric("latentserve_responses_store_bytes") < store_bytes  # (no other test runs beside)
    unstored = client.responses.create(model="tiny", input="Hi", max_output_tokens=2, store=False)
    assert unstored.store is False
    assert requests.get(f"{server.url}/v1/responses/{unstored.id}", timeout=10).status_code == 404
    assert requests.post(f"{server.url}/v1/responses/{unstored.id}", json={}, timeout=10).status_code == 405
    assert requests.get(f"{server.url}/v1/responses/{unstored.id}/input_items", timeout=10).status_code == 404
    assert requests.delete(f"{server.url}/v1/responses/{unstored.id}/input_items", timeout=10).status_code == 405
    assert requests.get(f"{server.url}/v1/responses/{unstored.id}/other", timeout=10).status_code == 404


def test_a_server_without_a_store_keeps_nothing_and_says_so():
    server = Server("--responses_store_mb", "0")
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
        r = client.responses.create(model="tiny", input="Hi", max_output_tokens=2)
        assert r.store is False
        with pytest.raises(KeyError):
            server.metric("latentserve_responses_stored")
        assert requests.get(f"{server.url}/v1/responses/{r.id}", timeout=10).status_code == 404
        for extra, named in (({"store": True}, "store"), ({"previous_response_id": r.id}, "previous_response_id"),
                             ({"background": True}, "background")):
            with pytest.raises(openai.BadRequestError) as e:
                client.post("/responses", body={"model": "tiny", "input": "Hi", **extra}, cast_to=object)
            assert "--responses_store_mb 0" in str(e.value) and named in str(e.value)
        assert client.responses.create(model="tiny", input="Hi", max_output_tokens=2).status  # still serving
    finally:
        server.stop()


def settled(client, response_id, deadline_s=60):
    """The stored response once it is no longer queued or in progress."""
    deadline = time.time() + deadline_s
    while True:
        r = client.responses.retrieve(response_id)
        if r.status not in ("queued", "in_progress") or time.time() > deadline:
            return r
        time.sleep(0.02)


def test_a_background_response_is_answered_at_once_and_polled_to_its_end(plain):
    server, client = plain
    queued = client.responses.create(model="tiny", input="The old man", background=True, temperature=0,
                                     max_output_tokens=16)
    assert queued.background is True and queued.status == "queued" and queued.output == []
    final = settled(client, queued.id)
    whole = client.responses.create(model="tiny", input="The old man", temperature=0, max_output_tokens=16)
    assert final.status == whole.status and final.output_text == whole.output_text
    assert final.usage.output_tokens == whole.usage.output_tokens
    follow = client.responses.create(model="tiny", input="And then", previous_response_id=queued.id, temperature=0,
                                     max_output_tokens=4)
    assert follow.status in ("completed", "incomplete")
    finished = requests.post(f"{server.url}/v1/responses/{queued.id}/cancel", timeout=10)
    assert finished.status_code == 400 and "already finished" in finished.text
    foreground = requests.post(f"{server.url}/v1/responses/{whole.id}/cancel", timeout=10)
    assert foreground.status_code == 400 and "only background responses" in foreground.text
    assert requests.get(f"{server.url}/v1/responses/{whole.id}/cancel", timeout=10).status_code == 405


def test_a_queued_background_response_is_cancelled():
    """One sequence at a time: a long request holds the engine, the background one waits behind it and
    is cancelled before it starts; the long one is not disturbed and the server serves on."""
    server = Server("--max_num_seqs", "1")
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
        blocker = {}

        def hold():
            blocker["r"] = requests.post(f"{server.url}/v1/completions", timeout=120, json={
                "model": "tiny", "prompt": "The", "n": 8, "max_tokens": 200, "ignore_eos": True})

        t = threading.Thread(target=hold)
        t.start()
        time.sleep(0.2)
        queued = client.responses.create(model="tiny", input="The old man", background=True, max_output_tokens=64)
        with pytest.raises(openai.BadRequestError) as e:  # nothing to continue yet
            client.responses.create(model="tiny", input="Go on", previous_response_id=queued.id)
        assert "has not finished" in str(e.value)
        cancelled = client.responses.cancel(queued.id)
        assert cancelled.id == queued.id and cancelled.status == "cancelled"
        final = settled(client, queued.id)
        assert final.status == "cancelled"
        again = client.responses.cancel(queued.id)  # cancelling twice answers the same
        assert again.status == "cancelled"
        # Deleting one still queued stops it too, and it is not stored again when it ends.
        deleted = client.responses.create(model="tiny", input="The old man", background=True, max_output_tokens=64)
        assert requests.delete(f"{server.url}/v1/responses/{deleted.id}", timeout=10).status_code == 200
        t.join()
        deadline = time.time() + 30
        while server.metric("latentserve_num_requests_running") > 0 and time.time() < deadline:
            time.sleep(0.02)
        assert requests.get(f"{server.url}/v1/responses/{deleted.id}", timeout=10).status_code == 404
        assert server.metric('latentserve_engine_requests_finished_total{reason="cancelled"}') == 2
        assert blocker["r"].status_code == 200, blocker["r"].text
        assert all(c["finish_reason"] == "length" for c in blocker["r"].json()["choices"])
        assert client.responses.create(model="tiny", input="Hi", max_output_tokens=2).status  # still serving
    finally:
        server.stop()
