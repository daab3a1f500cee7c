"""Structural tags (vLLM's and xgrammar's) end to end on the tiny model: free text in which each
trigger opens a structure held to its JSON schema, through every field that carries one
(response_format, structured_outputs.structural_tag, structural_tag, gRPC), both forms (structures
and triggers; xgrammar's format), on completions and chat, markers that are special tokens, and
the 400s that name what is wrong. The trigger is " LORD", the tiny model's favourite word, so that
greedy output reaches it."""
import json
import re

import grpc
import pytest
import requests

C, CHAT = "/v1/completions", "/v1/chat/completions"
SEEDS = (0, 1, 2)

GENESIS = "Genesis 1\n1 In the beginning"
NUMBER = {"type": "integer", "minimum": 0, "maximum": 99}
TAG = {"structures": [{"begin": " LORD", "schema": NUMBER, "end": "!"}], "triggers": [" LORD"]}


def tagged_values(text, finish):
    """The numbers of the structures in `text`, each checked whole: a trigger is always followed
    by a number of at most two digits and "!" (the last one may be cut short by max_tokens)."""
    parts = text.split(" LORD")
    values = []
    for i, part in enumerate(parts[1:]):
        m = re.match(r"(0|[1-9][0-9]?)!", part)
        if m:
            values.append(int(m.group(1)))
            continue
        assert finish == "length" and i == len(parts) - 2 and re.fullmatch(r"(0|[1-9][0-9]?)?", part), (part, text)
    return values


def tag_completion(server, fields, **extra):
    body = {"prompt": GENESIS, "max_tokens": 40, "temperature": 0, **fields, **extra}
    r = requests.post(server.url + C, json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def test_structural_tag_holds_each_structure_and_leaves_the_text_free(server):
    free = tag_completion(server, {})
    assert " LORD" in free["text"], free  # the tiny model's favourite word: the trigger is reached
    tagged = tag_completion(server, {"response_format": {"type": "structural_tag", **TAG}})
    values = tagged_values(tagged["text"], tagged["finish_reason"])
    assert values and all(0 <= v <= 99 for v in values), tagged
    # The text before the first trigger is the model's own, as without the tag.
    assert tagged["text"].split(" LORD")[0] == free["text"].split(" LORD")[0]
    # Every field that carries a structural tag gives the same output; so does gRPC's.
    for fields in ({"structured_outputs": {"structural_tag": TAG}},
                   {"structured_outputs": {"structural_tag": json.dumps(TAG)}}, {"structural_tag": json.dumps(TAG)}):
        assert tag_completion(server, fields)["text"] == tagged["text"], fields
    for seed in SEEDS:
        sampled = tag_completion(server, {"structural_tag": TAG}, temperature=1.0, seed=seed)
        tagged_values(sampled["text"], sampled["finish_reason"])


def test_structural_tag_format_form(server):
    """xgrammar's format form: triggered tags are the structures-and-triggers form, and formats
    compose (a constant opening, then the tags; tags with a separator and nothing else)."""
    number_tag = {"begin": " LORD", "content": {"type": "json_schema", "json_schema": NUMBER}, "end": "!"}
    triggered = {"type": "triggered_tags", "triggers": [" LORD"], "tags": [number_tag]}
    legacy = tag_completion(server, {"structural_tag": TAG})
    assert tag_completion(server, {"response_format": {"type": "structural_tag", "format": triggered}}) == legacy
    opened = tag_completion(server, {"structural_tag": {"format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": " And God said"}, triggered]}}})
    assert opened["text"].startswith(" And God said")
    tagged_values(opened["text"][len(" And God said"):], opened["finish_reason"])
    listed = tag_completion(server, {"structural_tag": {"format": {
        "type": "tags_with_separator", "separator": ",", "at_least_one": True, "tags": [number_tag]}}},
        max_tokens=20)
    assert re.fullmatch(r"( LORD(0|[1-9][0-9]?)!)(, LORD(0|[1-9][0-9]?)!)*,?( L?O?R?D?[0-9]{0,2})?", listed["text"]) or \
        listed["finish_reason"] == "stop", listed


def test_structural_tag_on_chat_and_grpc(server, grpc_stubs):
    body = {"messages": [{"role": "user", "content": "And the LORD said unto Moses"}], "max_tokens": 40,
            "temperature": 1.0, "response_format": {"type": "structural_tag", **TAG}}
    seen = 0
    for seed in range(6):
        r = requests.post(server.url + CHAT, json={**body, "seed": seed}, timeout=60)
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        seen += len(tagged_values(choice["message"]["content"] or "", choice["finish_reason"]))
    assert seen >= 2  # the chat content reaches the trigger too
    pb2, pb2_grpc = grpc_stubs
    s = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
    sampling = pb2.SamplingParams(max_tokens=40, temperature=0.0,
                                  structured_output=pb2.StructuredOutput(structural_tag=json.dumps(TAG)))
    msgs = list(s.Generate(pb2.GenerateRequest(text=GENESIS, sampling=sampling)))
    text = "".join(m.text for m in msgs)
    assert text == tag_completion(server, {"structural_tag": TAG})["text"]
    assert tagged_values(text, "length" if msgs[-1].finish_reason == pb2.FINISH_REASON_LENGTH else "stop")


def test_structural_tag_markers_that_are_special_tokens_match_those_tokens(server):
    """<|im_start|> and <|im_end|> are the tiny model's special tokens: as a tag's markers they are
    those tokens (a bias makes the model open one), not their text, and only there may they appear."""
    tag = {"structures": [{"begin": "<|im_start|>", "schema": NUMBER, "end": "<|im_end|>"}],
           "triggers": ["<|im_start|>"]}
    body = {"prompt": GENESIS, "max_tokens": 12, "temperature": 0, "skip_special_tokens": False,
            "structural_tag": tag, "logit_bias": {"1": 100}, "logprobs": 0}
    r = requests.post(server.url + C, json=body, timeout=60)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    tokens = choice["logprobs"]["tokens"]
    assert tokens[0] == "<|im_start|>", tokens  # the special token itself, not its text spelled out
    assert re.match(r"<\|im_start\|>(0|[1-9][0-9]?)<\|im_end\|><\|im_start\|>", choice["text"]), choice["text"]
    assert "<|im_end|>" in tokens, tokens


@pytest.mark.parametrize("fields,param,fragment", [
    ({"response_format": {"type": "structural_tag", "structures": [], "triggers": ["a"]}}, "response_format",
     "'structures' must be a non-empty list"),
    ({"structural_tag": json.dumps({"structures": [{"begin": " LORD", "schema": NUMBER, "end": "!"}],
                                    "triggers": [" LORD", " God"]})}, "structural_tag",
     "'triggers[1]' ' God' starts no structure's begin"),
    ({"structured_outputs": {"structural_tag": "{oops"}}, "structured_outputs.structural_tag", "is not valid JSON"),
    ({"structural_tag": {"format": {"type": "triggered_tags", "triggers": [" LORD"], "tags": []}}}, "structural_tag",
     "'format.tags' must be a non-empty list of tags"),
    ({"response_format": {"type": "structural_tag", "format": {"type": "qwen_xml_parameter"}}}, "response_format",
     "'format.type' 'qwen_xml_parameter' is not supported"),
    ({"structural_tag": {"structures": [{"begin": "<", "schema": {"type": "object", "patternProperties": {}},
                                         "end": ">"}], "triggers": ["<"]}}, "structural_tag",
     "'structures[0].schema'"),
], ids=["empty", "unused_trigger", "json", "format", "format_type", "schema"])
def test_bad_structural_tags_are_refused_by_name(server, fields, param, fragment):
    r = requests.post(server.url + C, json={"prompt": GENESIS, "max_tokens": 4, **fields}, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and fragment in err["message"], err
    assert tag_completion(server, {"structural_tag": TAG})["text"]  # still serving
