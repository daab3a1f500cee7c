"""Structured output (constrained decoding) end to end: JSON schemas (data/structured_schemas.json)
through response_format, structured_outputs.json and guided_json on both endpoints, checked with
jsonschema; json_object; regular expressions, choices and GBNF grammars, checked with Python's re
and a small recognizer; the 400s for what the compilers refuse (naming the keyword or construct,
with the field sent as param) and for malformed fields; gRPC's SamplingParams.structured_output;
the openai SDK's response_format and parse(); streaming.

The tiny model writes random text, so an output is whatever random sampling reaches inside the
constraint. With fixed seeds the replies are deterministic, and every reply that ends with "stop"
must be one whole match of its constraint. The model's context is 256 tokens and it likes
whitespace (one token per space) and long strings: the schemas bound their strings, arrays and
integers, and a few carry a logit bias (token text -> bias, in the data file) against bare
spaces or towards a closing quote, so that most replies end before the context does."""
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
import requests

from conftest import Server
from structured_checks import arithmetic, check_json, nested_digits

C, CHAT = "/v1/completions", "/v1/chat/completions"
PROMPT = "{"  # one token: the rest of the context is left to the output
ASK = [{"role": "user", "content": "Reply with JSON."}]
SEEDS = (0, 1, 2)

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "structured_schemas.json")) as f:
    SCHEMAS = json.load(f)
BY_NAME = {s["name"]: s for s in SCHEMAS}

# ---------------------------------------------------------------------------------------------
# Requests


@pytest.fixture(scope="module")
def budget(server):
    """max_tokens for PROMPT: all the context it leaves."""
    models = requests.get(server.url + "/v1/models", timeout=10).json()
    return models["data"][0]["max_model_len"] - 1


@pytest.fixture(scope="module")
def token(server):
    """The id of the one token `text` is."""
    ids = {}

    def lookup(text):
        if text not in ids:
            r = requests.post(server.url + "/tokenize", json={"prompt": text, "add_special_tokens": False}, timeout=10)
            assert r.status_code == 200, r.text
            assert len(r.json()["tokens"]) == 1, (text, r.json())
            ids[text] = r.json()["tokens"][0]
        return ids[text]

    return lookup


def bias_of(token, bias):
    """A logit_bias field from {token text: bias}."""
    return {"logit_bias": {str(token(t)): b for t, b in bias.items()}} if bias else {}


def completion(budget, constraint, seed, **extra):
    return {"prompt": PROMPT, "max_tokens": budget, "temperature": 1.0, "top_p": 1, "seed": seed, **constraint, **extra}


def chat(constraint, seed, **extra):
    return {"messages": ASK, "temperature": 1.0, "top_p": 1, "seed": seed, **constraint, **extra}


def json_schema_format(schema):
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": "answer", "schema": schema, "strict": True}}}


def post(server, path, body):
    return requests.post(server.url + path, json=body, timeout=120)


def post_all(server, jobs):
    """Responses to (path, body) pairs, sent at once (the server batches them)."""
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda job: post(server, *job), jobs))


def reply(r):
    """(text, finish_reason) of a 200 answer from either endpoint."""
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    text = choice["message"]["content"] if "message" in choice else choice["text"]
    return text, choice["finish_reason"]


def assert_error(r, param, *fragments):
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param, error
    for fragment in fragments:
        assert fragment in error["message"], error


def assert_still_serving(server):
    r = post(server, C, {"prompt": PROMPT, "max_tokens": 5, "seed": 1, "guided_choice": ["fine", "well"]})
    assert reply(r) in (("fine", "stop"), ("well", "stop"))


# ---------------------------------------------------------------------------------------------
# JSON schemas


def test_the_schema_set_is_large_and_distinct():
    assert len({json.dumps(s["schema"], sort_keys=True) for s in SCHEMAS}) == len(SCHEMAS) >= 50
    assert len(BY_NAME) == len(SCHEMAS)


@pytest.fixture(scope="module")
def schema_replies(server, budget, token):
    """name -> [(seed, response)] for every schema and seed, through response_format."""
    keys = [(s, seed) for s in SCHEMAS for seed in SEEDS]
    responses = post_all(server, [(C, completion(budget, json_schema_format(s["schema"]), seed,
                                                 **bias_of(token, s.get("bias")))) for s, seed in keys])
    out = {}
    for (s, seed), r in zip(keys, responses):
        out.setdefault(s["name"], []).append((seed, r))
    return out


@pytest.mark.parametrize("name", list(BY_NAME))
def test_schema_conformance(name, schema_replies):
    stopped = 0
    for seed, r in schema_replies[name]:
        text, finish = reply(r)
        assert finish in ("stop", "length")
        if finish == "stop":
            check_json(text, BY_NAME[name]["schema"], f"{name} seed {seed}")
            stopped += 1
    assert stopped >= 2, f"{name}: {stopped} of {len(SEEDS)} replies ended before max_tokens"


VARIANT_SCHEMAS = ["person", "nested_object", "oneof_tagged", "ref_defs", "nullable_types", "tuple_closed",
                   "string_pattern", "recursive_list"]
VARIANTS = {
    "chat-response_format": (CHAT, json_schema_format),
    "chat-structured_outputs": (CHAT, lambda s: {"structured_outputs": {"json": s}}),
    "chat-guided_json_text": (CHAT, lambda s: {"guided_json": json.dumps(s)}),
    "completions-structured_outputs": (C, lambda s: {"structured_outputs": {"json": s}}),
    "completions-guided_json": (C, lambda s: {"guided_json": s}),
    "completions-schema_text": (C, lambda s: {"response_format": {
        "type": "json_schema", "json_schema": {"name": "a", "schema": json.dumps(s)}}}),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_schema_conformance_through_other_fields(server, budget, token, variant):
    path, field = VARIANTS[variant]
    keys = [(BY_NAME[n], seed) for n in VARIANT_SCHEMAS for seed in (0, 1)]
    jobs = []
    for s, seed in keys:
        extra = bias_of(token, s.get("bias"))
        jobs.append((path, chat(field(s["schema"]), seed, **extra) if path == CHAT
                     else completion(budget, field(s["schema"]), seed, **extra)))
    stopped = 0
    for (s, seed), r in zip(keys, post_all(server, jobs)):
        text, finish = reply(r)
        if finish == "stop":
            check_json(text, s["schema"], f"{variant} {s['name']} seed {seed}")
            stopped += 1
    assert stopped >= len(keys) * 3 // 4, f"{stopped} of {len(keys)} replies ended before max_tokens"


def test_same_seed_same_output(server, budget):
    body = completion(budget, json_schema_format(BY_NAME["person"]["schema"]), 11)
    a, b = post_all(server, [(C, body), (C, body)])
    assert reply(a) == reply(b)


def test_stops_where_the_grammar_ends_even_with_ignore_eos(server, budget):
    s = BY_NAME["int_exclusive"]["schema"]
    for seed in SEEDS:
        text, finish = reply(post(server, C, completion(budget, json_schema_format(s), seed, ignore_eos=True)))
        assert finish == "stop"
        assert 3 < check_json(text, s) < 8


def test_every_choice_of_n_conforms(server):
    r = post(server, C, completion(40, {"guided_regex": r"[a-z]{2}\d{1,2}"}, 5, n=4))
    assert r.status_code == 200, r.text
    choices = r.json()["choices"]
    assert len(choices) == 4
    for c in choices:
        assert c["finish_reason"] == "stop" and re.fullmatch(r"[a-z]{2}\d{1,2}", c["text"]), c


# ---------------------------------------------------------------------------------------------
# json_object

# Any object: the model would write one endless key, so a bias (against bare spaces, towards the
# quote that closes a string and the brace that closes the object) keeps the objects short.
JSON_OBJECT_BIAS = {" ": -100, '"': 30, "}": 20}
JSON_OBJECT = {
    "completions-response_format": (C, {"response_format": {"type": "json_object"}}),
    "chat-response_format": (CHAT, {"response_format": {"type": "json_object"}}),
    "completions-structured_outputs": (C, {"structured_outputs": {"json_object": True}}),
    "completions-schema_left_out": (C, {"response_format": {"type": "json_schema", "json_schema": {"name": "any"}}}),
}


@pytest.mark.parametrize("variant", list(JSON_OBJECT))
def test_json_object(server, budget, token, variant):
    path, constraint = JSON_OBJECT[variant]
    bias = bias_of(token, JSON_OBJECT_BIAS)
    jobs = [(path, chat(constraint, seed, **bias) if path == CHAT else completion(budget, constraint, seed, **bias))
            for seed in range(4)]
    values = []
    for r in post_all(server, jobs):
        text, finish = reply(r)
        if finish == "stop":
            values.append(check_json(text, {"type": "object"}))
    assert len(values) >= 3
    assert any(values), values  # some have members


# ---------------------------------------------------------------------------------------------
# Regular expressions

REGEXES = [
    r"\d{3}-\d{4}", r"[a-z]{2,6}", r"(yes|no|maybe)", r"[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8}){0,2}", r"0x[0-9a-fA-F]{2,8}",
    r"\w{1,5}@\w{1,5}\.(com|org)", r"-?\d{1,3}(\.\d{1,2})?", r"^[a-c]+x?$", r"(ab|cd){2,3}", r"\s{1,3}\S{1,3}",
    r"[^a-z\s]{2,5}", r"(é|ñ|日本|\u00fc){1,4}", r"\(\d\)\.\*\+", r"a{3}b{0,2}c?", r"(?:x|y)z{1,2}", r"\t\n?",
    r"[\d\-_]{3,6}", r"((a|b)c){1,2}d", r"[.]{1,3}", r"[\]\\]{1,3}", r"\x41\u0042{1,2}", r".{1,6}!", r"\{\d\}",
    r"[-+]?(0|[1-9]\d{0,3})", r"(true|false|null)", r"(\d{1,2}:){2}\d{1,2}", r"[a-z]{1,4}?,[0-9]{0,3}?;", r"\D\W\S{2}",
]


@pytest.mark.parametrize("pattern", REGEXES)
def test_regex(server, pattern):
    # The server's classes are ASCII ones (\d, \w, \s; \D, \W, \S and negated classes take in
    # every non-ASCII character), as Python's are with re.ASCII.
    field = {"guided_regex": pattern} if REGEXES.index(pattern) % 2 else {"structured_outputs": {"regex": pattern}}
    stopped = 0
    for r in post_all(server, [(C, completion(120, field, seed)) for seed in SEEDS]):
        text, finish = reply(r)
        if finish == "stop":
            assert re.fullmatch(pattern, text, re.ASCII), (pattern, text)
            stopped += 1
    assert stopped >= 2


def test_regex_stream_equals_non_stream(server):
    body = completion(60, {"guided_regex": r"[A-Z]{2}\d{2,4}( [a-z]{1,5}){1,3}\."}, 4)
    full = reply(post(server, C, body))
    with requests.post(server.url + C, json={**body, "stream": True}, stream=True, timeout=60) as r:
        chunks = [json.loads(e) for e in sse_events(r)[:-1]]
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    assert (text, chunks[-1]["choices"][0]["finish_reason"]) == full
    assert full[1] == "stop" and re.fullmatch(r"[A-Z]{2}\d{2,4}( [a-z]{1,5}){1,3}\.", text)


def test_ignore_eos_regex(server):
    """A regex that must end stops there even with ignore_eos; one that may go on runs to
    max_tokens in its alphabet."""
    for seed in SEEDS:
        assert reply(post(server, C, completion(40, {"guided_regex": r"\d{3}"}, seed, ignore_eos=True)))[1] == "stop"
        r = post(server, C, completion(20, {"guided_regex": r"[a-z]+"}, seed, ignore_eos=True))
        text, finish = reply(r)
        assert finish == "length" and r.json()["usage"]["completion_tokens"] == 20
        assert re.fullmatch(r"[a-z]+", text), text


REFUSED_REGEXES = [
    (r"(a)\1", "backreferences are not supported"), (r"a(?=b)", "lookaround"), (r"a(?!b)", "lookaround"),
    (r"(?<=a)b", "lookaround"), (r"(?P<n>a)", "named groups"), (r"(?i)abc", "inline flags"),
    (r"\bfoo", "word boundaries are not supported"), (r"\p{L}", r"the escape \p is not supported"),
    (r"(ab", "a group is not closed"), (r"[ab", "a character class is not closed"),
    (r"a{3,1}", "upper bound is below its lower bound"), (r"*a", "a quantifier has nothing to repeat"),
    (r"a|^b", "'^' is supported only at the start"), (r"a$b", "'$' is supported only at the end"),
    (r"[à-ü]", "ranges of non-ASCII characters"), (r"[z-a]", "a class range runs backwards"),
    ("a\\", "a trailing backslash"), (r"\xZZ", r"\x needs 2 hex digits"),
    (r"a{99999999}", "more than 4096 repetitions"),  # a count, not the literal text
]


@pytest.mark.parametrize("pattern,fragment", REFUSED_REGEXES)
def test_refused_regex_names_the_construct(server, pattern, fragment):
    assert_error(post(server, C, completion(10, {"guided_regex": pattern}, 0)), "guided_regex", fragment,
                 f"regex '{pattern}'")
    assert_error(post(server, CHAT, chat({"structured_outputs": {"regex": pattern}}, 0)), "structured_outputs",
                 fragment)
    assert_still_serving(server)


# ---------------------------------------------------------------------------------------------
# Choices

CHOICES = [["yes", "no", "maybe"], ["a", "ab", "abc"], ["日本語", "émigré", "naïve"],
           ['{"quoted": "json"}', "line\nbreak", "tab\tbed"], ["In the beginning", "And God said", "Amen"]]


@pytest.mark.parametrize("choices", CHOICES, ids=range(len(CHOICES)))
def test_choice(server, choices):
    jobs = [(C, completion(30, {"guided_choice": choices}, seed)) for seed in range(4)]
    jobs += [(CHAT, chat({"structured_outputs": {"choice": choices}}, seed)) for seed in range(4)]
    for r in post_all(server, jobs):
        text, finish = reply(r)
        assert finish == "stop" and text in choices, (text, finish)


def test_choice_cut_by_max_tokens_is_a_prefix(server):
    choices = ["Jerusalem is a city", "Bethlehem of Judah"]
    for seed in SEEDS:
        text, finish = reply(post(server, C, completion(2, {"guided_choice": choices}, seed)))
        assert finish == "length"
        assert any(c.startswith(text) and c != text for c in choices), text


# ---------------------------------------------------------------------------------------------
# Grammars (GBNF)

ARITH_RULES = r'''
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")" | "-" factor
number ::= [0-9]{1,3}
'''

GRAMMARS = {
    "arithmetic": ("# arithmetic with precedence\nroot ::= expr\n" + ARITH_RULES, arithmetic),
    "arithmetic_compound": ('root ::= "(" expr ")" ("*" | "/") term (("+" | "-") term)*\n' + ARITH_RULES,
                            lambda t: t.startswith("(") and arithmetic(t)),
    "arithmetic_nested": ('root ::= "((" expr ")" ("+" | "-") term ")" ("*" | "/") factor\n' + ARITH_RULES,
                          lambda t: t.startswith("((") and arithmetic(t)),
    "list": (r'''root ::= "[" ws ( item ( "," ws item ){0,4} )? ws "]"
item ::= word | num
word ::= "'" [a-z]{1,6} "'"
num  ::= "-"? [1-9] [0-9]{0,2} | "0"
ws   ::= " "?''', r"\[ ?((?:'[a-z]{1,6}'|-?[1-9][0-9]{0,2}|0)(?:, ?(?:'[a-z]{1,6}'|-?[1-9][0-9]{0,2}|0)){0,4})? ?\]"),
    "nested_lists": ('root ::= list\nlist ::= "[" (item ("," item){0,2})? "]"\nitem ::= [0-9] | list',
                     lambda t: nested_digits(json.loads(t))),
    "classes": (r'root ::= [A-Z] [a-z0-9_]{2,8} [.!?] [^a-zA-Z0-9\n]{0,2}',
                r"[A-Z][a-z0-9_]{2,8}[.!?][^a-zA-Z0-9\n]{0,2}"),
    "repetition": ('root ::= "a"+ "b"* "c"? "d"{2} "e"{1,} "f"{0,3} "g"', r"a+b*c?d{2}e+f{0,3}g"),
    "multiline_and_comments": ('''root ::=
    greeting
    " "
    name   # a trailing comment
    punct
# a comment line
greeting ::= "hello"
           | "hi"
           | "good day"
name ::= [A-Z] [a-z]{1,7}
punct ::= "!" | "." | ""
''', r"(hello|hi|good day) [A-Z][a-z]{1,7}[!.]?"),
    "escapes": (r'root ::= "\x41" "\u00e9" ("\t" | "\\" | "\"" | "\n") ("日本" | "ü")',
                "A\u00e9[\t\\\\\"\n](日本|ü)"),
    "config_lines": (r'''root ::= line{1,3}
line ::= key-name "=" value "\n"
key-name ::= [a-z] [a-z_]{0,7}
value ::= [0-9]{1,4} | "true" | "false" | "\"" [a-zA-Z ]{0,8} "\""''',
                     r'([a-z][a-z_]{0,7}=([0-9]{1,4}|true|false|"[a-zA-Z ]{0,8}")\n){1,3}'),
    "any_character": ('root ::= "<" .{1,5} ">" ( "|" | "" )', r"<[\s\S]{1,5}>\|?"),
    "rules_used_before_defined": ('''root ::= pair ("," pair)?
pair ::= left-side ":" right-side
right-side ::= digit digit?
left-side ::= [xyz]
digit ::= [0-9]''', r"[xyz]:[0-9][0-9]?(,[xyz]:[0-9][0-9]?)?"),
}


# Biases that make the model nest (it closes a list at once otherwise).
GRAMMAR_BIAS = {"nested_lists": {"[": 6, "]": 3}}


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_grammar(server, token, name):
    grammar, check = GRAMMARS[name]
    accepts = check if callable(check) else (lambda t: re.fullmatch(check, t) is not None)
    bias = bias_of(token, GRAMMAR_BIAS.get(name))
    jobs = [(C, completion(200, {"guided_grammar" if seed % 2 else "structured_outputs":
                                 grammar if seed % 2 else {"grammar": grammar}}, seed, **bias)) for seed in range(4)]
    stopped = 0
    for r in post_all(server, jobs):
        text, finish = reply(r)
        if finish == "stop":
            assert accepts(text), (name, text)
            stopped += 1
    assert stopped >= 3


BAD_GRAMMARS = [
    ("root ::= foo", "rule 'foo' is used but never defined"),
    ('start ::= "a"', "no 'root' rule"),
    ('root ::= "a', "line 1: a string is not closed"),
    ('root ::= x\nx ::= "a\n', "line 2: a string is not closed"),
    ('root ::= ("a" | "b"', "a group is not closed"),
    ('root = "a"', "expected '::=' after 'root'"),
    ('root ::= [a-z', "a character class is not closed"),
    (r'root ::= "\q"', r"unknown escape \q"),
    ('root ::= "a"{3,1}', "upper bound is below its lower bound"),
    ('root ::= root "a" | "b"', "'root' is left recursive"),
    # Nothing finishes: left in, the first step would find no token to allow (it was a 500).
    ('root ::= root', "the grammar matches no text: its root rule 'root' never finishes"),
    ('root ::= "a" x\nx ::= "b" x', "never finishes (every alternative needs itself or a rule that never "
                                     "finishes, such as 'x')"),
    ('root ::= "a" )', "grammar line 1"),
]


@pytest.mark.parametrize("grammar,fragment", BAD_GRAMMARS)
def test_bad_grammar_names_the_problem(server, grammar, fragment):
    assert_error(post(server, C, completion(10, {"guided_grammar": grammar}, 0)), "guided_grammar", fragment)
    assert_error(post(server, C, completion(10, {"structured_outputs": {"grammar": grammar}}, 0)), "structured_outputs",
                 fragment)
    assert_still_serving(server)


# ---------------------------------------------------------------------------------------------
# Refused schemas and malformed fields

REFUSED_SCHEMAS = [
    ({"type": "object", "properties": {"a": {"type": "string", "contentMediaType": "text/html"}}},
     "JSON schema at /properties/a: the keyword 'contentMediaType' is not supported"),
    ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "'patternProperties' is not supported"),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "'uniqueItems' is not supported"),
    ({"type": "object", "minProperties": 1}, "'minProperties' is not supported"),
    ({"not": {"type": "string"}}, "'not' is not supported"),
    ({"if": {"type": "string"}, "then": {"maxLength": 3}}, "'if' is not supported"),
    ({"type": "integer", "multipleOf": 3}, "'multipleOf' is not supported"),
    ({"type": "array", "contains": {"type": "integer"}}, "'contains' is not supported"),
    ({"type": "string", "format": "hostname"}, "the string format 'hostname' is not supported"),
    ({"type": "number", "exclusiveMinimum": 0}, "'exclusiveMinimum' on a number is not supported"),
    ({"type": "number", "minimum": 0.5}, "'minimum' on a number must be an integer value"),
    ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, "'allOf' is supported only with a single schema"),
    ({"type": "string", "pattern": "a+", "maxLength": 3}, "'pattern' together with"),
    ({"type": "string", "pattern": "(a)\\1"}, "backreferences are not supported"),
    ({"$ref": "http://example.com/s.json"}, "the reference 'http://example.com/s.json' does not resolve"),
    ({"$defs": {"b": {"type": "string"}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
     "at /properties/a: the reference '#/$defs/missing' does not resolve"),
    ({"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a", "maxLength": 2}, "'maxLength' beside '$ref'"),
    ({"type": "strin"}, "unknown type 'strin'"),
    ({"type": "object", "properties": {}, "required": ["zz"]}, "required property 'zz' is not in 'properties'"),
    ({"type": "array", "items": [{"type": "string"}]}, "'items' must be a schema"),
    ({"enum": []}, "'enum' must be a non-empty array"),
    ({"type": "string", "minLength": 5, "maxLength": 2}, "'maxLength' is below 'minLength'"),
    ({"type": "integer", "exclusiveMinimum": True}, "as a boolean (draft 4) is not supported"),
    (False, "the schema 'false' accepts no value"),
    ({"$ref": "#"}, "the grammar matches no text"),  # only itself, all the way down
    ({"type": "array", "minItems": 100000}, "more than 4096 repetitions"),
]
SCHEMA_FIELDS = {
    "response_format": json_schema_format,
    "structured_outputs": lambda s: {"structured_outputs": {"json": s}},
    "guided_json": lambda s: {"guided_json": s},
}


@pytest.mark.parametrize("schema,fragment", REFUSED_SCHEMAS, ids=[f for _, f in REFUSED_SCHEMAS])
def test_refused_schema_names_the_keyword(server, schema, fragment):
    for i, (param, field) in enumerate(SCHEMA_FIELDS.items()):
        path = CHAT if i == 1 else C
        body = chat(field(schema), 0) if path == CHAT else completion(10, field(schema), 0)
        assert_error(post(server, path, body), param, "JSON schema", fragment)
    assert_still_serving(server)


MALFORMED = [
    ({"response_format": "json"}, "response_format", "must be an object with a 'type'"),
    ({"response_format": {"type": "xml"}}, "response_format", "'xml' is not supported"),
    ({"response_format": {"type": "json_schema"}}, "response_format", "must be an object with a 'schema'"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": "{not json"}}},
     "response_format.json_schema.schema", "must be a JSON schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": 5}}},
     "response_format.json_schema.schema", "must be a JSON schema"),
    ({"structured_outputs": "a+"}, "structured_outputs", "must be an object"),
    ({"structured_outputs": {}}, "structured_outputs", "exactly one of"),
    ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "structured_outputs", "exactly one of"),
    ({"structured_outputs": {"regex": 5}}, "structured_outputs.regex", "must be a non-empty string"),
    ({"structured_outputs": {"foo": 1, "regex": "a"}}, "structured_outputs.foo", "is not supported"),
    ({"structured_outputs": {"json_object": "yes"}}, "structured_outputs.json_object", "must be true or false"),
    ({"guided_choice": []}, "guided_choice", "non-empty list"),
    ({"guided_choice": [""]}, "guided_choice", "non-empty strings"),
    ({"guided_choice": ["a", 1]}, "guided_choice", "non-empty strings"),
    ({"guided_choice": "yes"}, "guided_choice", "non-empty list"),
    ({"guided_json": "{bad"}, "guided_json", "must be a JSON schema"),
    ({"guided_json": 3}, "guided_json", "must be a JSON schema"),
    ({"guided_regex": ""}, "guided_regex", "must be a non-empty string"),
    ({"guided_regex": ["a"]}, "guided_regex", "must be a non-empty string"),
    ({"guided_grammar": ""}, "guided_grammar", "must be a non-empty string"),
]


@pytest.mark.parametrize("fields,param,fragment", MALFORMED, ids=[json.dumps(m[0]) for m in MALFORMED])
def test_malformed_field(server, fields, param, fragment):
    assert_error(post(server, C, completion(10, fields, 0)), param, fragment)
    assert_error(post(server, CHAT, chat(fields, 0)), param, fragment)
    assert_still_serving(server)


@pytest.mark.parametrize("fields", [
    {"guided_regex": "a", "guided_choice": ["b"]},
    {"response_format": {"type": "json_object"}, "guided_regex": "a"},
    {"structured_outputs": {"choice": ["a"]}, "guided_json": {"type": "string"}},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "string"}}},
     "structured_outputs": {"regex": "a"}},
], ids=range(4))
def test_two_constraints_are_refused(server, fields):
    for path, body in ((C, completion(10, fields, 0)), (CHAT, chat(fields, 0))):
        r = post(server, path, body)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert "both given" in error["message"] and error["param"] in fields, error
    assert_still_serving(server)


def test_text_response_format_leaves_other_fields(server):
    assert reply(post(server, C, completion(10, {"response_format": {"type": "text"}, "guided_choice": ["zz"]}, 0))) \
        == ("zz", "stop")


# ---------------------------------------------------------------------------------------------
# Streaming


def sse_events(resp):
    return [line[len("data: "):] for line in resp.iter_lines(decode_unicode=True) if line.startswith("data: ")]


def test_chat_stream_with_schema(server, token):
    s = BY_NAME["order_form"]
    for seed in SEEDS:
        body = chat(json_schema_format(s["schema"]), seed, stream=True, **bias_of(token, s["bias"]))
        with requests.post(server.url + CHAT, json=body, stream=True, timeout=120) as r:
            assert r.status_code == 200, r.text
            events = sse_events(r)
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1] if json.loads(e)["choices"]]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
        check_json(text, s["schema"], f"seed {seed}")


# ---------------------------------------------------------------------------------------------
# gRPC


@pytest.fixture(scope="module")
def stub(server, grpc_stubs):
    pb2, pb2_grpc = grpc_stubs
    return pb2, pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))


def grpc_generate(stub, budget, seed, logit_bias=None, **structured_output):
    pb2, s = stub
    sampling = pb2.SamplingParams(max_tokens=budget, temperature=1.0, top_p=1.0, seed=seed, logit_bias=logit_bias,
                                  structured_output=pb2.StructuredOutput(**structured_output))
    msgs = list(s.Generate(pb2.GenerateRequest(text=PROMPT, sampling=sampling)))
    return "".join(m.text for m in msgs), msgs[-1].finish_reason


def test_grpc_json_schema(stub, budget):
    pb2 = stub[0]
    for name in ("person", "oneof_tagged", "nullable_types", "format_uuid"):
        stopped = 0
        for seed in SEEDS:
            text, finish = grpc_generate(stub, budget, seed, json_schema=json.dumps(BY_NAME[name]["schema"]))
            if finish == pb2.FINISH_REASON_STOP:
                check_json(text, BY_NAME[name]["schema"], f"{name} seed {seed}")
                stopped += 1
        assert stopped >= 2, name


def test_grpc_json_object_regex_choice_grammar(stub, budget, token):
    pb2 = stub[0]
    bias = {token(t): b for t, b in JSON_OBJECT_BIAS.items()}
    for seed in SEEDS:
        text, finish = grpc_generate(stub, budget, seed, logit_bias=bias, json_object=True)
        assert finish == pb2.FINISH_REASON_STOP and isinstance(check_json(text, {"type": "object"}), dict)
        text, finish = grpc_generate(stub, budget, seed, regex=r"\d{2}-[a-z]{3}(-[A-Z])?")
        assert finish == pb2.FINISH_REASON_STOP and re.fullmatch(r"\d{2}-[a-z]{3}(-[A-Z])?", text), text
        text, finish = grpc_generate(stub, budget, seed, choice=pb2.Choices(choices=["alpha", "beta", "gamma"]))
        assert finish == pb2.FINISH_REASON_STOP and text in ("alpha", "beta", "gamma")
        text, finish = grpc_generate(stub, budget, seed, grammar=GRAMMARS["arithmetic_compound"][0])
        assert finish == pb2.FINISH_REASON_STOP and arithmetic(text) and text.startswith("("), text


@pytest.mark.parametrize("structured_output,fragment", [
    ({"json_schema": json.dumps({"type": "object", "properties": {"a": {"type": "string", "contentMediaType": "x"}}})},
     "JSON schema at /properties/a: the keyword 'contentMediaType' is not supported"),
    ({"json_schema": "{bad"}, "not valid JSON"),
    ({"regex": r"(a)\1"}, "backreferences are not supported"),
    ({"grammar": "root ::= foo"}, "rule 'foo' is used but never defined"),
    ({"regex": ""}, "structured_output.regex must not be empty"),
    ({}, "set one of json_schema, json_object, regex, choice, grammar and structural_tag"),
    ({"structural_tag": json.dumps({"structures": [{"begin": "<a>", "schema": {}, "end": "</a>"}],
                                    "triggers": ["<b"]})},
     "'structures[0].begin' '<a>' starts with none of the triggers"),
], ids=["keyword", "json", "regex", "grammar", "empty_regex", "unset", "structural_tag"])
def test_grpc_invalid_argument_names_the_problem(stub, budget, structured_output, fragment):
    with pytest.raises(grpc.RpcError) as e:
        grpc_generate(stub, budget, 0, **structured_output)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "structured_output" in e.value.details() and fragment in e.value.details(), e.value.details()
    assert grpc_generate(stub, 5, 0, choice=stub[0].Choices(choices=["ok"]))[0] == "ok"


# ---------------------------------------------------------------------------------------------
# The openai SDK


@pytest.fixture(scope="module")
def client(server):
    openai = pytest.importorskip("openai", reason="the openai package is not installed")
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused")


def test_openai_response_format_json_schema(client, token):
    s = BY_NAME["ref_defs"]
    for seed in SEEDS:
        r = client.chat.completions.create(
            model="tiny", messages=ASK, seed=seed, temperature=1.0,
            logit_bias={str(token(t)): b for t, b in s["bias"].items()},
            response_format={"type": "json_schema",
                             "json_schema": {"name": "segment", "schema": s["schema"], "strict": True}})
        assert r.choices[0].finish_reason == "stop"
        check_json(r.choices[0].message.content, s["schema"], f"seed {seed}")


def test_openai_extra_body_fields(client):
    c = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=20, seed=2,
                                  extra_body={"guided_regex": r"[a-f]{4}\d"})
    assert c.choices[0].finish_reason == "stop" and re.fullmatch(r"[a-f]{4}\d", c.choices[0].text)
    c = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=20, seed=2,
                                  extra_body={"structured_outputs": {"choice": ["left", "right"]}})
    assert c.choices[0].text in ("left", "right")


def test_openai_parse_with_pydantic(client, token):
    pydantic = pytest.importorskip("pydantic")
    import enum
    from typing import List, Literal, Optional

    class Color(str, enum.Enum):
        red = "red"
        blue = "blue"

    class Item(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=6)
        qty: int = pydantic.Field(ge=1, le=9)

    class Order(pydantic.BaseModel):
        kind: Literal["order"]
        color: Color
        items: List[Item] = pydantic.Field(max_length=2)
        note: Optional[str] = pydantic.Field(max_length=5)

    chat_api = client.chat.completions
    parse = getattr(chat_api, "parse", None) or getattr(client.beta.chat.completions, "parse", None)
    if parse is None:
        pytest.skip("this openai package has no chat.completions.parse")
    for seed in SEEDS:
        r = parse(model="tiny", messages=ASK, response_format=Order, seed=seed, temperature=1.0,
                  logit_bias={str(token(" ")): -100})
        order = r.choices[0].message.parsed
        assert isinstance(order, Order), r.choices[0].message.content
        assert order.kind == "order" and len(order.items) <= 2
        assert all(1 <= i.qty <= 9 and len(i.name) <= 6 for i in order.items)
        assert order.note is None or len(order.note) <= 5


# ---------------------------------------------------------------------------------------------
# Edges: calendar dates, e-mail dots, undeclared names, property order, missing $defs


def test_format_date_is_a_calendar_date(server, budget, token):
    """format "date" (and the date in "date-time") must be a real calendar date (RFC 3339
    full-date: the day within its month). A bias towards the tokens "30" and "31" makes the day
    30 or 31 in whatever month the model picks; April 31 or February 30 must not come out. (The
    bias against "." leaves out fractions of seconds, which would run on.)"""
    bias = bias_of(token, {"30": 30, "31": 30, ".": -100})
    for fmt in ("date", "date-time"):
        schema = {"type": "string", "format": fmt}
        stopped = 0
        for seed, r in enumerate(post_all(server, [(C, completion(60, json_schema_format(schema), seed, **bias))
                                                   for seed in range(12)])):
            text, finish = reply(r)
            if finish == "stop":
                check_json(text, schema, f"{fmt} seed {seed}")
                stopped += 1
        assert stopped >= 9, fmt


def test_email_local_part_has_no_empty_atoms(server, token):
    """format "email" is RFC 5321's Mailbox: the local part is atoms joined by single dots, so
    "a..b@x.org" or ".a@x.org" is not an address. A bias towards "." and towards the closing
    quote makes dots likely wherever the grammar allows them."""
    schema = {"type": "string", "format": "email"}
    bias = bias_of(token, {".": 20, '"': 100, " ": -100, "@": 30})
    stopped = 0
    for seed, r in enumerate(post_all(server, [(C, completion(250, json_schema_format(schema), seed, **bias))
                                               for seed in range(4)])):
        text, finish = reply(r)
        if finish == "stop":
            check_json(text, schema, f"seed {seed}")
            stopped += 1
    assert stopped >= 2


def test_undeclared_property_cannot_take_a_declared_name(server, token):
    """With additionalProperties, an undeclared property's name must not be a declared one: the
    declared "Q" is a boolean and undeclared ones are integers, so {"Q": 5} breaks the schema
    (and {"Q": true, "Q": 5} would repeat a name). Biases towards the name "Q" and the quote
    that closes it, and penalties against repeating "Q", make keys "Q" likely."""
    schema = {"type": "object", "properties": {"Q": {"type": "boolean"}},
              "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9}}
    bias = bias_of(token, {"Q": 48, '"': 50, "}": 45, " ": -100, "\n": -100})
    jobs = [(C, completion(30, json_schema_format(schema), seed, presence_penalty=2, frequency_penalty=2, **bias))
            for seed in range(16)]
    stopped = 0
    for seed, r in enumerate(post_all(server, jobs)):
        text, finish = reply(r)
        if finish == "stop":
            pairs = json.loads(text, object_pairs_hook=lambda p: p)
            assert len({k for k, _ in pairs}) == len(pairs), f"seed {seed}: a name repeats in {text!r}"
            check_json(text, schema, f"seed {seed}")
            stopped += 1
    assert stopped >= 8


def test_properties_come_in_schema_order(server, budget, token):
    """Properties are written in the order the schema declares them, as OpenAI's structured
    outputs do (and the request keeps the schema's order: it is read as ordered JSON)."""
    schema = {"type": "object", "properties": {"zeta": {"type": "boolean"}, "alpha": {"type": "boolean"},
                                               "mid": {"type": "boolean"}},
              "required": ["zeta", "alpha", "mid"], "additionalProperties": False}
    for seed in SEEDS:
        text, finish = reply(post(server, C, completion(budget, json_schema_format(schema), seed,
                                                        **bias_of(token, {" ": -100}))))
        assert finish == "stop"
        assert list(check_json(text, schema)) == ["zeta", "alpha", "mid"], text


@pytest.fixture
def own_server():
    """A server of its own, for requests that have crashed one (the shared one serves the rest)."""
    s = Server()
    yield s
    s.stop()


def test_ref_into_missing_defs_is_refused_without_crashing(own_server):
    """A $ref into "$defs" (or "definitions") of a schema that has no such member is a 400 naming
    the reference, every time, and the server lives on. Schemas of varied shapes and sizes (the
    compiler once looked the missing member up in the root without checking it was there, and
    what it read then depended on the memory around the root)."""
    for i in range(40):
        schema = {"type": "object", "properties": {**{f"p{j}": {"type": "integer"} for j in range(i % 5)},
                                                   "a": {"$ref": f"#/$defs/m{i}"}}}
        for k in range(i % 4):
            schema[["title", "description", "$comment", "examples"][k]] = "x" * (i * 7 % 300)
        if i % 3 == 2:
            schema["$defs"] = {"other": {"type": "string"}}
            schema["properties"]["a"]["$ref"] = f"#/definitions/m{i}"
        try:
            r = post(own_server, C, completion(5, {"guided_json": schema}, 0))
        except requests.ConnectionError:
            pytest.fail(f"the server died ({own_server.proc.wait(10)}) on {json.dumps(schema)}")
        assert_error(r, "guided_json", f"the reference '{schema['properties']['a']['$ref']}' does not resolve")
    assert_still_serving(own_server)
