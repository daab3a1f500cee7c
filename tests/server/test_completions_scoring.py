"""What evaluation tools and clients use on /v1/completions: echo with logprobs (and max_tokens 0)
scores a prompt, with logprobs equal to those of latentserve-generate --dump-logits on the same
ids, and so does vLLM's prompt_logprobs (with each token's rank), on completions and chat; batched
prompts give one set of choices per prompt; logit_bias moves sampling, allowed_token_ids bounds it
and bad_words are never completed."""
import array
import ast
import json
import math
import os
import subprocess

import pytest
import requests

from conftest import BIN, MODEL, Server

C = "/v1/completions"
GENERATE = os.environ.get("LATENTSERVE_GENERATE_BIN", os.path.join(os.path.dirname(BIN), "latentserve-generate"))
# 40 ids in the tiny model's vocabulary (4096).
PROMPT = [3145, 2724, 201, 19, 1056, 261, 2285, 307, 600, 1167, 261, 1404, 296, 261, 1031, 14, 201, 20,
          1181, 261, 1031, 475, 1298, 401, 1012, 14, 296, 4020, 475, 1151, 261, 1826, 287, 261, 3033, 14,
          201, 21, 1181, 1167]


def read_npy_f32(path):
    with open(path, "rb") as f:
        data = f.read()
    header_len = int.from_bytes(data[8:10], "little")
    header = ast.literal_eval(data[10:10 + header_len].decode())
    assert header["descr"] == "<f4" and not header["fortran_order"], header
    values = array.array("f", data[10 + header_len:])
    rows, cols = header["shape"]
    return [values[r * cols:(r + 1) * cols] for r in range(rows)]


def log_softmax(row):
    m = max(row)
    lse = m + math.log(sum(math.exp(v - m) for v in row))
    return [v - lse for v in row]


@pytest.fixture(scope="module")
def chunked_server():
    # Prefills of at most 16 tokens: the 40-token prompt's logprobs arrive over three steps.
    s = Server("--max_num_batched_tokens", "16", "--max_num_seqs", "4")
    yield s
    s.stop()


def score(server, prompt, **extra):
    body = {"prompt": prompt, "max_tokens": 0, "echo": True, "logprobs": 2, "temperature": 0,
            "return_tokens_as_token_ids": True, **extra}
    r = requests.post(server.url + C, json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_echo_logprobs_equal_generate_dump_logits(chunked_server, tmp_path):
    dump = tmp_path / "logits.npy"
    subprocess.run([GENERATE, "--model", MODEL, "--prompt-ids", ",".join(map(str, PROMPT)), "--max-tokens", "1",
                    "--dump-logits", str(dump)], check=True, capture_output=True, timeout=120)
    rows = read_npy_f32(dump)
    assert len(rows) == len(PROMPT)
    want = [log_softmax(r) for r in rows]
    # Once with a cold prefix cache and once with the prompt's blocks cached by a plain request:
    # either way every prompt position is computed.
    requests.post(chunked_server.url + C, json={"prompt": PROMPT, "max_tokens": 1})
    for attempt in range(2):
        body = score(chunked_server, PROMPT)
        choice = body["choices"][0]
        lp = choice["logprobs"]
        assert body["usage"]["completion_tokens"] == 0 and body["usage"]["prompt_tokens"] == len(PROMPT)
        assert choice["finish_reason"] == "length"
        assert lp["tokens"] == [f"token_id:{t}" for t in PROMPT], "only the prompt: max_tokens 0 generates nothing"
        assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
        for i in range(1, len(PROMPT)):
            assert lp["token_logprobs"][i] == pytest.approx(want[i - 1][PROMPT[i]], abs=1e-4), (attempt, i)
            top = sorted(range(len(want[i - 1])), key=lambda v: -want[i - 1][v])[:2]
            got_top = lp["top_logprobs"][i]  # an object: its keys carry no order
            assert got_top == pytest.approx({f"token_id:{v}": want[i - 1][v] for v in top}, abs=1e-4), (attempt, i)
        assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_prompt_logprobs_equal_generate_dump_logits(chunked_server, tmp_path):
    """vLLM's prompt_logprobs: null, then per prompt token an object keyed by token id holding the
    token and the top alternatives, each with its logprob, its rank (1: the most likely) and its
    text; alternatives as many as asked, whatever echo's logprobs asks for beside it."""
    dump = tmp_path / "logits.npy"
    subprocess.run([GENERATE, "--model", MODEL, "--prompt-ids", ",".join(map(str, PROMPT)), "--max-tokens", "1",
                    "--dump-logits", str(dump)], check=True, capture_output=True, timeout=120)
    want = [log_softmax(r) for r in read_npy_f32(dump)]
    body = {"prompt": PROMPT, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 3, "echo": True, "logprobs": 1,
            "return_tokens_as_token_ids": True}
    choice = requests.post(chunked_server.url + C, json=body, timeout=60).json()["choices"][0]
    got = choice["prompt_logprobs"]
    assert len(got) == len(PROMPT) and got[0] is None
    assert all(len(t) == 1 for t in choice["logprobs"]["top_logprobs"][1:]), "echo keeps its own count"
    for i in range(1, len(PROMPT)):
        row = want[i - 1]
        order = sorted(range(len(row)), key=lambda v: (-row[v], v))
        expect = {v: k + 1 for k, v in enumerate(order[:3])}
        expect[PROMPT[i]] = order.index(PROMPT[i]) + 1
        assert set(got[i]) == {str(v) for v in expect}, i
        for v, rank in expect.items():
            e = got[i][str(v)]
            assert e["rank"] == rank and e["logprob"] == pytest.approx(row[v], abs=1e-4), (i, v, e)
            assert e["decoded_token"] == f"token_id:{v}"
    # Chat: one prompt for every choice, its logprobs beside the choices; not with stream.
    chat = requests.post(chunked_server.url + "/v1/chat/completions", timeout=60,
                         json={"messages": [{"role": "user", "content": "Who made the heaven?"}], "max_tokens": 2,
                               "n": 2, "prompt_logprobs": 0}).json()
    assert chat["prompt_logprobs"][0] is None and all(len(t) == 1 for t in chat["prompt_logprobs"][1:])
    assert chat["usage"]["prompt_tokens"] == len(chat["prompt_logprobs"])
    r = requests.post(chunked_server.url + C, json={"prompt": "hi", "prompt_logprobs": 1, "stream": True})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt_logprobs", r.text


def test_echo_text_and_offsets_then_completion(server):
    prompt = "In the beginning God"
    r = requests.post(server.url + C, json={"prompt": prompt, "max_tokens": 4, "echo": True, "logprobs": 1,
                                            "temperature": 0, "ignore_eos": True}).json()
    plain = requests.post(server.url + C, json={"prompt": prompt, "max_tokens": 4, "temperature": 0,
                                                "ignore_eos": True}).json()
    c = r["choices"][0]
    assert c["text"] == prompt + plain["choices"][0]["text"]
    lp = c["logprobs"]
    n_prompt = r["usage"]["prompt_tokens"]
    assert len(lp["tokens"]) == n_prompt + 4 and r["usage"]["completion_tokens"] == 4
    assert "".join(lp["tokens"]) == c["text"]
    assert lp["text_offset"] == [sum(len(t) for t in lp["tokens"][:i]) for i in range(len(lp["tokens"]))]
    assert lp["token_logprobs"][0] is None and all(v <= 0 for v in lp["token_logprobs"][1:])


def test_echo_streams_the_prompt_first(server):
    body = {"prompt": "And God said", "max_tokens": 3, "echo": True, "logprobs": 1, "temperature": 0,
            "ignore_eos": True}
    full = requests.post(server.url + C, json=body).json()["choices"][0]
    with requests.post(server.url + C, json={**body, "stream": True}, stream=True) as r:
        chunks = [json.loads(line[6:]) for line in r.iter_lines(decode_unicode=True)
                  if line.startswith("data: ") and line != "data: [DONE]"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == full["text"]
    tokens = [t for c in chunks if c["choices"][0]["logprobs"] for t in c["choices"][0]["logprobs"]["tokens"]]
    offsets = [o for c in chunks if c["choices"][0]["logprobs"] for o in c["choices"][0]["logprobs"]["text_offset"]]
    assert tokens == full["logprobs"]["tokens"] and offsets == full["logprobs"]["text_offset"]
    assert chunks[0]["choices"][0]["text"].startswith("And God said")


def test_lm_eval_harness_loglikelihood_request(server):
    # lm-evaluation-harness local-completions: batched token-id prompts, echo, logprobs 1,
    # max_tokens 1; it reads token_logprobs[ctxlen:-1] and compares each with its top alternative.
    ctx, cont = PROMPT[:20], PROMPT[20:26]
    other = PROMPT[5:30]
    body = {"model": requests.get(server.url + "/v1/models").json()["data"][0]["id"], "prompt": [ctx + cont, other],
            "temperature": 0, "max_tokens": 1, "logprobs": 1, "seed": 1234, "echo": True}
    r = requests.post(server.url + C, json=body)
    assert r.status_code == 200, r.text
    choices = sorted(r.json()["choices"], key=lambda c: c["index"])
    assert [c["index"] for c in choices] == [0, 1]
    for c, ids in zip(choices, [ctx + cont, other]):
        assert len(c["logprobs"]["token_logprobs"]) == len(ids) + 1
        assert all(len(t) == 1 for t in c["logprobs"]["top_logprobs"][1:])
    # The continuation's log-likelihood as lm-eval sums it, equal to scoring that prompt alone.
    ll = sum(choices[0]["logprobs"]["token_logprobs"][len(ctx):-1])
    alone = score(server, ctx + cont, logprobs=1)["choices"][0]["logprobs"]["token_logprobs"]
    assert ll == pytest.approx(sum(alone[len(ctx):]), abs=1e-4)
    assert r.json()["usage"]["prompt_tokens"] == len(ctx + cont) + len(other)


def test_batched_text_prompts_give_a_choice_set_per_prompt(server):
    prompts = ["In the beginning", "And God said", "The LORD is"]
    r = requests.post(server.url + C, json={"prompt": prompts, "n": 2, "max_tokens": 5, "temperature": 0,
                                            "ignore_eos": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [c["index"] for c in body["choices"]] == list(range(6))
    total_prompt = 0
    for p, prompt in enumerate(prompts):
        alone = requests.post(server.url + C, json={"prompt": prompt, "max_tokens": 5, "temperature": 0,
                                                    "ignore_eos": True}).json()
        total_prompt += alone["usage"]["prompt_tokens"]
        for i in range(2):
            assert body["choices"][p * 2 + i]["text"] == alone["choices"][0]["text"], (p, i)
    assert body["usage"]["prompt_tokens"] == total_prompt
    assert body["usage"]["completion_tokens"] == 6 * 5
    with requests.post(server.url + C, json={"prompt": prompts, "max_tokens": 3, "stream": True}, stream=True) as s:
        indices = {json.loads(line[6:])["choices"][0]["index"] for line in s.iter_lines(decode_unicode=True)
                   if line.startswith("data: ") and line != "data: [DONE]"}
    assert indices == {0, 1, 2}


def test_logit_bias_forces_and_forbids_tokens(server):
    base = {"prompt": "In the beginning", "max_tokens": 4, "temperature": 0, "ignore_eos": True,
            "logprobs": 0, "return_tokens_as_token_ids": True}
    plain = requests.post(server.url + C, json=base).json()["choices"][0]["logprobs"]["tokens"]
    forced = requests.post(server.url + C, json={**base, "logit_bias": {"1056": 100}}).json()
    assert forced["choices"][0]["logprobs"]["tokens"] == ["token_id:1056"] * 4
    first = plain[0].split(":")[1]
    avoided = requests.post(server.url + C, json={**base, "logit_bias": {first: -100}}).json()
    assert avoided["choices"][0]["logprobs"]["tokens"][0] != plain[0]


def test_allowed_token_ids_bound_greedy_and_sampled_choices(server):
    base = {"prompt": "In the beginning", "max_tokens": 6, "ignore_eos": True, "return_tokens_as_token_ids": True,
            "logprobs": 1, "allowed_token_ids": [14, 261, 1056]}
    for temperature in (0, 1):
        r = requests.post(server.url + C, json={**base, "temperature": temperature, "seed": 2}).json()
        lp = r["choices"][0]["logprobs"]
        assert set(lp["tokens"]) <= {"token_id:14", "token_id:261", "token_id:1056"}, lp["tokens"]
        assert all(v <= 0 for v in lp["token_logprobs"]), "the model's own logprobs"
    for bad, word in [([], "non-empty list"), (["a"], "non-empty list"), ([4096], "outside the vocabulary"),
                      ([2 ** 40], "is not a token id")]:
        r = requests.post(server.url + C, json={**base, "allowed_token_ids": bad})
        assert r.status_code == 400 and word in r.text and r.json()["error"]["param"] == "allowed_token_ids", r.text


def test_bad_words_are_never_completed(server):
    base = {"prompt": "In the beginning", "max_tokens": 24, "temperature": 0, "ignore_eos": True,
            "return_tokens_as_token_ids": True, "logprobs": 0}
    plain = requests.post(server.url + C, json=base).json()["choices"][0]
    the = requests.post(server.url + "/tokenize", json={"prompt": " the", "add_special_tokens": False}).json()["tokens"]
    assert len(the) == 1 and f"token_id:{the[0]}" in plain["logprobs"]["tokens"], "the word comes up unbanned"
    banned = requests.post(server.url + C, json={**base, "bad_words": ["the"]}).json()["choices"][0]
    assert f"token_id:{the[0]}" not in banned["logprobs"]["tokens"]
    assert " the " not in banned["text"]
    for bad in (["", "x"], "the", [3]):
        r = requests.post(server.url + C, json={**base, "bad_words": bad})
        assert r.status_code == 400 and r.json()["error"]["param"] == "bad_words", r.text
