#!/usr/bin/env python3
"""Writes tool_call_goldens.json: model outputs in the Hermes, DeepSeek-V3, Kimi-K2 and GLM-4.5
tool-call formats, each with the reply an OpenAI client must get back from it.

Well-formed outputs are written by the formats' own chat templates (the test templates in
../chat_templates/templates/, which write assistant tool calls as Qwen/Hermes, DeepSeek-V3 and
Kimi-K2 do), rendered with jinja2 configured as transformers configures it: the text after the
generation prompt, up to the end-of-turn token, is what the model would have generated for an
assistant turn with those calls, and the calls themselves (names, arguments, Kimi-K2's
"functions.NAME:INDEX" ids) are what a parser must recover. Malformed outputs are written here by
hand, after the formats: each must come back as content exactly as written (a call that cannot
be read is returned as text, never dropped).

Usage: python3 tests/data/chat/make_tool_call_goldens.py   (needs jinja2; Debian: python3-jinja2)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "..", "chat_templates")
sys.path.insert(0, TEMPLATES)
from make_expected import render_chat  # noqa: E402  (jinja2 set up as transformers does)

SPECIAL = {"bos_token": "<s>", "eos_token": "</s>"}

# format -> (template, end-of-turn marker that ends the assistant's output)
FORMATS = {
    "hermes": ("hermes_style.jinja", "<|im_end|>"),
    "deepseek_v3": ("deepseek_v3_style.jinja", "<｜end▁of▁sentence｜>"),
    "kimi_k2": ("kimi_k2_style.jinja", "<|im_end|>"),
    # GLM-4.5 ends a turn by starting the next one; a tool result follows the calls here.
    "glm45": ("glm45_style.jinja", "<|observation|>"),
}
# GLM-4.5's template opens every assistant turn with a think block; the reasoning parser takes it
# before the tool-call parser reads the rest.
THINK_PREFIX = {"glm45": "\n<think></think>\n"}

TOOLS = [{"type": "function", "function": {"name": n, "description": d, "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "description": "a city"}}}}}
    for n, d in [("get_weather", "Weather now."), ("search", "Web search."), ("no_args", "Takes nothing.")]]


def call(name, args, i):
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


# Assistant turns with calls: (name, content, [calls]).
TURNS = [
    ("one_call", None, [call("get_weather", {"city": "Paris"}, 0)]),
    ("two_calls", None, [call("get_weather", {"city": "Paris", "unit": "celsius"}, 0),
                         call("search", {"query": "Tokyo weather", "top_k": 3}, 1)]),
    ("unicode_and_nesting", None, [call("search", {"query": "北京 \"天气\" 🌤", "filters": {"lang": ["zh", "en"],
                                                   "safe": True, "max": None, "score": 0.25}}, 0)]),
    ("empty_arguments", None, [call("no_args", {}, 0)]),
    ("content_then_call", "Let me check that.", [call("get_weather", {"city": "Oslo"}, 0)]),
]

# Hand-written malformed outputs: each comes back as content, as written.
MALFORMED = {
    "hermes": [
        ("unclosed_json", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>'),
        ("not_json", "<tool_call>\nget_weather(city='Paris')\n</tool_call>"),
        ("arguments_not_object", '<tool_call>\n{"name": "get_weather", "arguments": [1, 2]}\n</tool_call>'),
        ("no_name", '<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>'),
        ("left_open", 'I will call it.\n<tool_call>\n{"name": "get_weather", "arguments": {"ci'),
    ],
    "deepseek_v3": [
        ("no_fence", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
                     '{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
        ("bad_json", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                     "{city: Paris}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
        ("no_sep", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function get_weather\n```json\n{}\n```"
                   "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
        ("left_open", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                      '{"city": "Pa'),
    ],
    "kimi_k2": [
        ("id_without_index", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather"
                             '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>'),
        ("bad_json", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                     "<|tool_call_argument_begin|>{'city': 'Paris'}<|tool_call_end|><|tool_calls_section_end|>"),
        ("left_open", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                      '<|tool_call_argument_begin|>{"city": '),
    ],
    "glm45": [
        ("no_name", "<tool_call>\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"),
        ("key_without_value", "<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>"),
        ("unclosed_value", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\n</tool_call>"),
        ("left_open", "Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par"),
    ],
}

# A good call followed by a malformed one: the first is a call, the second comes back as text.
MIXED = {
    "hermes": ('<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call>\n'
               "<tool_call>\nnot a call\n</tool_call>",
               [("search", {"query": "x"}, None)], "<tool_call>\nnot a call\n</tool_call>"),
    "deepseek_v3": ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```json\n"
                    '{"query": "x"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n'
                    "{oops}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                    [("search", {"query": "x"}, None)],
                    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n{oops}<｜tool▁call▁end｜>"),
    "kimi_k2": ("<|tool_calls_section_begin|><|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>"
                '{"query": "x"}<|tool_call_end|><|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>'
                "[1]<|tool_call_end|><|tool_calls_section_end|>",
                [("search", {"query": "x"}, "functions.search:0")],
                "<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>[1]<|tool_call_end|>"),
    "glm45": ("<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>x</arg_value>\n</tool_call>\n"
              "<tool_call>search\nnot pairs\n</tool_call>",
              [("search", {"query": "x"}, None)], "<tool_call>search\nnot pairs\n</tool_call>"),
}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def assistant_output(source, end, content, calls):
    user = {"role": "user", "content": "What is the weather?"}

    def render(messages, agp):
        return render_chat(source, {"messages": messages, "tools": TOOLS, "add_generation_prompt": agp},
                           SPECIAL)["output"]

    before = render([user], False)
    generation_prompt = render([user], True)[len(before):]
    result = {"role": "tool", "tool_call_id": "call_0", "content": "ok"}
    full = render([user, {"role": "assistant", "content": content, "tool_calls": calls}, result], False)
    assert full.startswith(before)
    # Some templates indent between turns; the assistant's turn starts with the generation prompt.
    turn = full[len(before):].lstrip(" \n")
    assert turn.startswith(generation_prompt), "the generation prompt must begin the assistant's turn"
    out = turn[len(generation_prompt):]
    assert end in out, f"no {end} after the assistant's turn"
    return out[:out.index(end)]


def main():
    cases = []
    for fmt, (template, end) in FORMATS.items():
        source = read(os.path.join(TEMPLATES, "templates", template))
        for name, content, calls in TURNS:
            output = assistant_output(source, end, content, calls)
            if fmt in THINK_PREFIX:
                assert output.startswith(THINK_PREFIX[fmt]), output
                output = output[len(THINK_PREFIX[fmt]):]
            # hermes_style writes no content beside calls; the others write it before them.
            expected_content = content if content and content in output else ""
            expected = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in calls]
            if fmt == "kimi_k2":  # the template numbers the calls of a turn: functions.NAME:INDEX
                for i, c in enumerate(expected):
                    c["id"] = f"functions.{c['name']}:{i}"
            cases.append({"format": fmt, "name": name, "output": output, "content": expected_content,
                          "tool_calls": expected, "malformed": False})
        for name, output in MALFORMED[fmt]:
            cases.append({"format": fmt, "name": "malformed_" + name, "output": output, "content": output,
                          "tool_calls": [], "malformed": True})
        output, good, rest = MIXED[fmt]
        calls = [{"name": n, "arguments": a, **({"id": i} if i else {})} for n, a, i in good]
        cases.append({"format": fmt, "name": "good_then_malformed", "output": output, "content": rest,
                      "tool_calls": calls, "malformed": True})
    with open(os.path.join(HERE, "tool_call_goldens.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases")


if __name__ == "__main__":
    main()
