"""Every request field of OpenAI's and vLLM's schemas (data/request_schemas.json, written by
make_request_schemas.py from the `openai` package and vLLM's protocol.py) is honoured, ignored
or refused, as the README's "Request fields" lists say: a refused one gets a 400 that names it
and says it is not supported yet; an honoured or ignored one is answered. No field is taken and
dropped without the README saying so."""
import json
import os
import re

import pytest
import requests

from conftest import ROOT

C, CHAT = "/v1/completions", "/v1/chat/completions"
BASE = {C: {"prompt": "In the beginning", "max_tokens": 2},
        CHAT: {"messages": [{"role": "user", "content": "Who made the heaven?"}], "max_tokens": 2}}

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "request_schemas.json")) as f:
    SCHEMAS = json.load(f)


def schema_fields(endpoint):
    key = "completions" if endpoint == C else "chat"
    return sorted(set(SCHEMAS["openai"][key]) | set(SCHEMAS["vllm"][key]))


# A value for each field that asks for something (not its default), as a dict of fields to add.
PROBES = {
    "model": None,  # the served name, filled in below
    "prompt": {"prompt": [5, 6, 7]}, "messages": {"messages": [{"role": "user", "content": "Hello"}]},
    "max_tokens": {"max_tokens": 3}, "max_completion_tokens": {"max_completion_tokens": 3},
    "temperature": {"temperature": 0.5}, "top_p": {"top_p": 0.9}, "top_k": {"top_k": 5}, "min_p": {"min_p": 0.1},
    "repetition_penalty": {"repetition_penalty": 1.2}, "presence_penalty": {"presence_penalty": 0.5},
    "frequency_penalty": {"frequency_penalty": 0.5}, "logit_bias": {"logit_bias": {"5": 2}}, "seed": {"seed": 3},
    "n": {"n": 2}, "stop": {"stop": ["."]}, "stop_token_ids": {"stop_token_ids": [1]}, "ignore_eos": {"ignore_eos": True},
    "min_tokens": {"min_tokens": 1}, "skip_special_tokens": {"skip_special_tokens": False},
    "logprobs": None,  # per endpoint, below
    "top_logprobs": {"logprobs": True, "top_logprobs": 2}, "echo": {"echo": True}, "priority": {"priority": 1},
    "stream": {"stream": True}, "stream_options": {"stream": True, "stream_options": {"include_usage": True}},
    "add_generation_prompt": {"add_generation_prompt": False}, "truncate_prompt_tokens": {"truncate_prompt_tokens": 2},
    "return_tokens_as_token_ids": {"return_tokens_as_token_ids": True}, "add_special_tokens": {"add_special_tokens": False},
    "user": {"user": "u-1"}, "metadata": {"metadata": {"k": "v"}}, "store": {"store": True},
    "service_tier": {"service_tier": "flex"}, "safety_identifier": {"safety_identifier": "s"},
    "prompt_cache_key": {"prompt_cache_key": "k"}, "prompt_cache_retention": {"prompt_cache_retention": "24h"},
    "prompt_cache_options": {"prompt_cache_options": {"ttl": 60}}, "request_id": {"request_id": "mine"},
    "parallel_tool_calls": {"parallel_tool_calls": False},
    "prediction": {"prediction": {"type": "content", "content": "x"}},
    "spaces_between_special_tokens": {"spaces_between_special_tokens": False},
    "tools": {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
    "tool_choice": {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                    "tool_choice": "required"},
    "functions": {"functions": [{"name": "f"}]},
    "function_call": {"function_call": "auto"}, "response_format": {"response_format": {"type": "json_object"}},
    "guided_json": {"guided_json": {"type": "object"}}, "guided_regex": {"guided_regex": "a+"},
    "guided_choice": {"guided_choice": ["a", "b"]}, "guided_grammar": {"guided_grammar": "root ::= \"a\""},
    "guided_decoding_backend": {"guided_decoding_backend": "xgrammar"},
    "guided_whitespace_pattern": {"guided_whitespace_pattern": " "}, "structural_tag": {"structural_tag": json.dumps(
        {"structures": [{"begin": "<a>", "schema": {"type": "integer"}, "end": "</a>"}], "triggers": ["<a"]})},
    "structured_outputs": {"structured_outputs": {"regex": "a+"}}, "suffix": {"suffix": "The end."},
    "best_of": {"best_of": 2}, "use_beam_search": {"use_beam_search": True}, "length_penalty": {"length_penalty": 0.5},
    "include_stop_str_in_output": {"stop": ["the"], "include_stop_str_in_output": True},
    "allowed_token_ids": {"allowed_token_ids": [5, 6]},  # honoured: only they are chosen
    "bad_words": {"bad_words": ["LORD"]}, "prompt_logprobs": {"prompt_logprobs": 1},
    "prompt_embeds": {"prompt_embeds": "AAAA"}, "logits_processors": {"logits_processors": ["a.b"]},
    "cache_salt": {"cache_salt": "salt"}, "kv_transfer_params": {"kv_transfer_params": {"a": 1}},
    "vllm_xargs": {"vllm_xargs": {"a": 1}}, "mm_processor_kwargs": {"mm_processor_kwargs": {"a": 1}},
    "continue_final_message": {"messages": [{"role": "user", "content": "Who made the heaven?"},
                                            {"role": "assistant", "content": "In the beginning"}],
                               "continue_final_message": True, "add_generation_prompt": False},
    "documents": {"documents": [{"title": "t", "text": "x"}]}, "chat_template": {"chat_template": "{{ messages }}"},
    "chat_template_kwargs": {"chat_template_kwargs": {"a": 1}}, "reasoning_effort": {"reasoning_effort": "low"},
    "include_reasoning": {"include_reasoning": False}, "verbosity": {"verbosity": "low"},
    "audio": {"audio": {"voice": "alloy", "format": "wav"}}, "modalities": {"modalities": ["text", "audio"]},
    "web_search_options": {"web_search_options": {}}, "moderation": {"moderation": {"enabled": True}},
}


def readme_lists():
    """The README's "Request fields" section: field names by treatment."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text[text.index("### Request fields"):]
    section = section[:section.index("\n### ", 5)]
    out = {}
    for label in ("Honoured", "Ignored", "Refused"):
        para = section[section.index("**" + label):]
        para = para[:para.find("\n\n")]
        out[label] = set(re.findall(r"`([a-z_]+)`", para))
    return out


def probe(server, endpoint, field):
    extra = PROBES[field]
    if field == "model":
        extra = {"model": requests.get(server.url + "/v1/models").json()["data"][0]["id"]}
    elif field == "logprobs":
        extra = {"logprobs": 2} if endpoint == C else {"logprobs": True}
    body = {**BASE[endpoint], **extra}
    return requests.post(server.url + endpoint, json=body, timeout=60)


@pytest.mark.parametrize("endpoint", [C, CHAT])
def test_every_schema_field_is_honoured_or_refused_as_the_readme_says(server, endpoint):
    lists = readme_lists()
    listed = lists["Honoured"] | lists["Ignored"] | lists["Refused"]
    missing_probe = [f for f in schema_fields(endpoint) if f not in PROBES]
    assert not missing_probe, f"add a probe value for {missing_probe}"
    wrong = []
    for field in schema_fields(endpoint):
        assert field in listed, f"{field} is in a request schema but in none of the README's lists"
        r = probe(server, endpoint, field)
        if r.status_code == 400 and r.json()["error"]["param"] == field:
            err = r.json()["error"]
            if field not in lists["Refused"] or "not supported yet" not in err["message"]:
                wrong.append((field, "refused", err["message"]))
        elif r.status_code == 200:
            if field not in lists["Honoured"] | lists["Ignored"]:
                wrong.append((field, "accepted", "the README lists it as refused"))
        else:
            wrong.append((field, r.status_code, r.text[:200]))
    assert not wrong, wrong


def test_deprecated_function_calling_is_refused(server):
    msgs = BASE[CHAT]["messages"]
    for extra, field in [({"functions": [{"name": "f"}]}, "functions"), ({"function_call": "auto"}, "function_call")]:
        r = requests.post(server.url + CHAT, json={"messages": msgs, "max_tokens": 2, **extra})
        assert r.status_code == 400, (extra, r.text)
        err = r.json()["error"]
        assert err["param"] == field and f"'{field}' is not supported yet" in err["message"], err
    # Values that ask for nothing are accepted; so are tools, which replace functions.
    tools = PROBES["tools"]["tools"]
    for extra in [{"functions": []}, {"function_call": "none"}, {"response_format": {"type": "text"}},
                  {"tools": tools}, {"tools": tools, "tool_choice": "none"}, {"tool_choice": "none"}, {"tools": []}]:
        r = requests.post(server.url + CHAT, json={"messages": msgs, "max_tokens": 2, **extra})
        assert r.status_code == 200, (extra, r.text)


def test_unknown_field_is_refused_naming_it(server):
    r = requests.post(server.url + C, json={"prompt": "x", "max_tokens": 1, "temprature": 0})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "temprature"


def test_too_many_stop_strings_names_stop(server):
    r = requests.post(server.url + C, json={"prompt": "x", "max_tokens": 1, "stop": [f"s{i}" for i in range(17)]})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "stop", r.json()


def test_sampling_errors_name_their_field(server):
    for extra, field in [({"stop_token_ids": [10**8]}, "stop_token_ids"), ({"top_p": 0}, "top_p"),
                         ({"logit_bias": {"99999999": 1}}, "logit_bias"), ({"min_tokens": 5, "max_tokens": 2}, "min_tokens")]:
        r = requests.post(server.url + C, json={"prompt": "x", "max_tokens": 1, **extra})
        assert r.status_code == 400, extra
        assert r.json()["error"]["param"] == field, r.json()
