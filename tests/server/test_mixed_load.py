"""Many kinds of request at once on a server under pressure give the answers each gets alone from a
plain server: seeded sampled and greedy completions and chats, n > 1, logprobs, stop strings,
penalties, bad words, allowed token ids, JSON schemas, regexes, choices and tool calls, streamed
or not, some of their clients hanging up mid-stream — on a server that speculates (n-gram
lookup), splits its experts over two device workers, prefills in small chunks and has too little
KV cache for them all (it preempts). Afterwards nothing is left running."""
import http.client
import json
import random
import socket
from concurrent.futures import ThreadPoolExecutor

import requests

from conftest import Server

PROMPTS = ["In the beginning God", "And the LORD said unto Moses,", "Psalms 23\n1 The LORD is my shepherd;",
           "1:1 And it came to pass", "Blessed are"]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}]
KINDS = ["text", "chat", "schema", "regex", "n", "tool", "choice", "bad_words", "allowed", "penalties"]
COUNT = 60


def request(i):
    """Request i: (path, body), the same on every call."""
    r = random.Random(i)
    kind = KINDS[i % len(KINDS)]
    body = {"max_tokens": r.choice([8, 32, 64]), "seed": i, "temperature": r.choice([0, 0.05, 0.8, 1.2])}
    if kind in ("chat", "schema", "tool"):
        body["messages"] = [{"role": "user", "content": r.choice(PROMPTS) * r.choice([1, 6])}]
        if r.random() < 0.3:
            body.update(logprobs=True, top_logprobs=2)
        if kind == "schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
        if kind == "tool":
            body.update(tools=TOOLS, tool_choice=r.choice(["required", "auto"]))
        return "/v1/chat/completions", body
    body["prompt"] = r.choice(PROMPTS) * r.choice([1, 4, 10])
    if r.random() < 0.3:
        body["logprobs"] = r.choice([1, 3])
    if r.random() < 0.3:
        body["stop"] = [" the", "\n"]
    body.update({
        "regex": {"structured_outputs": {"regex": "[A-Z][a-z]{2,8}( [a-z]{1,6}){2,5}\\."}},
        "choice": {"structured_outputs": {"choice": ["light", "darkness", "water"]}},
        "n": {"n": 3},
        "bad_words": {"bad_words": [" the", " and"]},
        "allowed": {"allowed_token_ids": list(range(200, 400))},
        "penalties": {"repetition_penalty": 1.3, "presence_penalty": 0.5, "frequency_penalty": 0.3},
    }.get(kind, {}))
    return "/v1/completions", body


def answer(reply):
    """What a reply says, per choice: text, or content and tool calls, and the finish reason."""
    out = []
    for c in reply["choices"]:
        if "text" in c:
            out.append((c["text"], c["finish_reason"]))
        else:
            m = c["message"]
            calls = [(t["function"]["name"], t["function"]["arguments"]) for t in m.get("tool_calls") or []]
            out.append((m.get("content"), calls, c["finish_reason"]))
    return out


def streamed_texts(server, path, body):
    """The text of each choice of a streamed reply."""
    r = requests.post(server.url + path, json=dict(body, stream=True), stream=True, timeout=120)
    assert r.status_code == 200, r.text
    texts = {}
    for line in r.iter_lines(decode_unicode=True):
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for c in json.loads(line[6:]).get("choices", []):
            piece = c["text"] if "text" in c else (c.get("delta") or {}).get("content") or ""
            texts[c["index"]] = texts.get(c["index"], "") + piece
    return [texts[k] for k in sorted(texts)]


def hang_up(server, path, body, after):
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    c.request("POST", path, json.dumps(dict(body, stream=True)), {"content-type": "application/json"})
    c.getresponse().read(after)
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()


def test_mixed_requests_under_pressure_answer_as_alone():
    plain = Server()
    try:
        want = []
        for i in range(COUNT):
            path, body = request(i)
            r = requests.post(plain.url + path, json=body, timeout=60)
            assert r.status_code == 200, (i, r.text)
            want.append(answer(r.json()))
    finally:
        plain.stop()

    s = Server("--speculative_config", '{"method": "ngram", "num_speculative_tokens": 3}', "--devices", "2",
               "--max_num_batched_tokens", "48", "--max_num_seqs", "16", "--kv_cache_mb", "1")

    def run(i):
        path, body = request(i)
        if i % 9 == 4:
            hang_up(s, path, body, after=random.Random(i).randint(1, 300))
            return None
        if i % 5 == 2 and "tools" not in body:
            return [t for t, *_ in want[i]], streamed_texts(s, path, body)
        r = requests.post(s.url + path, json=body, timeout=120)
        assert r.status_code == 200, (i, r.text)
        return want[i], answer(r.json())

    try:
        with ThreadPoolExecutor(COUNT) as pool:
            results = list(pool.map(run, range(COUNT)))
        for i, pair in enumerate(results):
            if pair is not None:
                assert pair[1] == pair[0], (i, request(i))
        assert s.metric("latentserve_preemptions_total") > 0
        assert s.metric("latentserve_spec_decode_num_accepted_tokens_total") > 0
        assert s.metric("latentserve_num_requests_running") == 0
        assert s.metric("latentserve_num_requests_waiting") == 0
        # And it serves on: a request alone afterwards still answers as the plain server did.
        path, body = request(0)
        assert answer(requests.post(s.url + path, json=body, timeout=60).json()) == want[0]
    finally:
        s.stop()
