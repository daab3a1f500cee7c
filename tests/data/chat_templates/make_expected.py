#!/usr/bin/env python3
"""Writes the expected renders for the C++ chat-template tests, with jinja2 as the oracle.

jinja2 is configured as transformers configures it for chat templates (utils/chat_template_utils.py,
_compile_jinja_template): an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension and a {% generation %} tag that renders its body, tojson replaced by
json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False), and the globals
raise_exception, strftime_now, dict and namespace (which refuses underscore-prefixed names).
Chat renders follow apply_chat_template: keys whose value is None are dropped from messages,
reasoning fields are aliased, special tokens and chat_template_kwargs become variables, and
continue_final_message cuts the prompt after the final message.

Outputs (next to this script):
  unit_cases.json  one small template per construct: {name, template, vars, output | error, phase}
  expected.json    every templates/*.jinja x conversations/*.json: {output} or {error, raised}

Usage: python3 tests/data/chat_templates/make_expected.py [--check-transformers]
Needs jinja2 (Debian: python3-jinja2). With --check-transformers (and transformers importable),
each chat render is also produced by transformers' own render_jinja_template and must match.
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: renders its body (transformers tracks offsets with it)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


class _Dict:
    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"underscore-prefixed namespace attribute {name!r}")


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _Dict()
    env.globals["namespace"] = _Namespace
    return env


ENV = make_env()


def render_case(template, variables):
    try:
        t = ENV.from_string(template)
    except Exception as e:  # noqa: BLE001 - TemplateSyntaxError, or SyntaxError from compiling e.g. a stray break
        return {"error": f"{type(e).__name__}: {e}", "phase": "load", "line": getattr(e, "lineno", None)}
    try:
        return {"output": t.render(**variables)}
    except Exception as e:  # noqa: BLE001 - any failure is an expected error
        return {"error": f"{type(e).__name__}: {e}", "phase": "render"}


# ---------------------------------------------------------------- chat renders (apply_chat_template)

REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


def render_chat(source, conv, special_tokens):
    messages = [{k: v for k, v in m.items() if v is not None} for m in conv["messages"]]
    aliased = []
    for m in messages:
        r = next((m[k] for k in REASONING_FIELDS if m.get(k) is not None), None)
        aliased.append({"thinking": r, **m, "reasoning_content": r} if r is not None else m)
    messages = aliased
    agp = conv.get("add_generation_prompt", True)
    cont = conv.get("continue_final_message", False)
    final = None
    if cont:
        if agp:
            return {"error": "continue_final_message with add_generation_prompt", "raised": False}
        last = messages[-1]
        if last.get("role") != "assistant" or "content" not in last or "content" not in source:
            return {"error": "continue_final_message without a final assistant message", "raised": False}
        if isinstance(last["content"], list):
            for block in reversed(last["content"]):
                if "text" in block:
                    final = block["text"]
                    block["text"] = block["text"] + CONTINUE_TAG
                    break
        else:
            final = last["content"]
            last["content"] = last["content"] + CONTINUE_TAG
    variables = dict(special_tokens)
    variables.update(conv.get("chat_template_kwargs", {}))
    try:
        out = ENV.from_string(source).render(messages=messages, tools=conv.get("tools"), documents=None,
                                             add_generation_prompt=agp, **variables)
    except jinja2.exceptions.TemplateError as e:
        raised = type(e) is jinja2.exceptions.TemplateError
        return {"error": str(e), "raised": raised}
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}", "raised": False}
    if cont:
        if final.strip() not in out or CONTINUE_TAG.strip() not in out:
            return {"error": "final message not rendered as given", "raised": False}
        at = out.rindex(CONTINUE_TAG.strip())
        out = out[:at] if out[at:at + len(CONTINUE_TAG)] == CONTINUE_TAG else out[:at].rstrip()
    return {"output": out}


def render_chat_transformers(source, conv, special_tokens):
    from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template
    kwargs = {**special_tokens, **conv.get("chat_template_kwargs", {})}
    try:
        rendered, _ = render_jinja_template(
            conversations=[_normalize_chat_messages(json.loads(json.dumps(conv["messages"])))],
            tools=conv.get("tools"), chat_template=source,
            continue_final_message=conv.get("continue_final_message", False),
            add_generation_prompt=conv.get("add_generation_prompt", True), **kwargs)
        return {"output": rendered[0]}
    except Exception as e:  # noqa: BLE001
        return {"error": str(e)}


def main():
    check = "--check-transformers" in sys.argv
    from unit_cases import CASES  # the per-construct table, beside this script
    units = []
    for name, template, variables in CASES:
        units.append({"name": name, "template": template, "vars": variables, **render_case(template, variables)})
    with open(os.path.join(HERE, "unit_cases.json"), "w", encoding="utf-8") as f:
        json.dump(units, f, ensure_ascii=False, indent=1)
        f.write("\n")

    with open(os.path.join(HERE, "special_tokens.json"), encoding="utf-8") as f:
        special = json.load(f)
    templates = sorted(n for n in os.listdir(os.path.join(HERE, "templates")) if n.endswith(".jinja"))
    convs = sorted(n for n in os.listdir(os.path.join(HERE, "conversations")) if n.endswith(".json"))
    expected = {}
    mismatches = 0
    for tname in templates:
        with open(os.path.join(HERE, "templates", tname), encoding="utf-8") as f:
            source = f.read()
        expected[tname] = {}
        for cname in convs:
            with open(os.path.join(HERE, "conversations", cname), encoding="utf-8") as f:
                conv = json.load(f)
            r = render_chat(source, json.loads(json.dumps(conv)), special)
            expected[tname][cname] = r
            if check:
                t = render_chat_transformers(source, json.loads(json.dumps(conv)), special)
                if ("output" in r) != ("output" in t) or r.get("output") != t.get("output"):
                    mismatches += 1
                    print(f"transformers differs: {tname} x {cname}: {r} vs {t}", file=sys.stderr)
    with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_out = sum("output" in r for t in expected.values() for r in t.values())
    print(f"{len(units)} unit cases, {len(templates)} templates x {len(convs)} conversations "
          f"({n_out} renders, {len(templates) * len(convs) - n_out} errors)"
          + (f", transformers mismatches: {mismatches}" if check else ""))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
