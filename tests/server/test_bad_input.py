"""A battery of malformed requests: each gets a clear 4xx naming the problem, and the server
serves a normal request afterwards."""
import json
import socket

import grpc
import pytest
import requests

C, CHAT, TOK, DETOK = "/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"
OK_MSG = [{"role": "user", "content": "hi"}]

# (path, body (dict, or raw bytes/str), expected status, a word the message must contain)
CASES = [
    (C, b"{not json", 400, "JSON"),
    (C, b"", 400, "JSON"),
    (C, b"[1, 2]", 400, "object"),
    (C, b'"a string"', 400, "object"),
    (C, b"\xff\xfe{}", 400, "UTF-8"),
    (C, {}, 400, "prompt"),
    (C, {"prompt": ""}, 400, "prompt"),
    (C, {"prompt": []}, 400, "prompt"),
    (C, {"prompt": 5}, 400, "prompt"),
    (C, {"prompt": {"a": 1}}, 400, "prompt"),
    (C, {"prompt": ["a", [1, 2]]}, 400, "mix"),
    (C, {"prompt": ["a", ""]}, 400, "prompt 1"),
    (C, {"prompt": ["a"] * 257}, 400, "prompts"),
    (C, {"prompt": [1, "x"]}, 400, "prompt"),
    (C, {"prompt": [1, 99999999]}, 400, "vocabulary"),
    (C, {"prompt": [-1]}, 400, "vocabulary"),
    (C, {"prompt": "hi", "max_tokens": -1}, 400, "max_tokens"),
    (C, {"prompt": "hi", "max_tokens": 0}, 400, "max_tokens"),
    (C, {"prompt": "hi", "max_tokens": 10**9}, 400, "max_tokens"),
    (C, {"prompt": "hi", "max_tokens": "ten"}, 400, "max_tokens"),
    (C, {"prompt": "hi", "max_tokens": 1.5}, 400, "max_tokens"),
    (C, {"prompt": "hi", "temperature": -0.5}, 400, "temperature"),
    (C, {"prompt": "hi", "temperature": "hot"}, 400, "temperature"),
    (C, {"prompt": "hi", "top_p": 1.5}, 400, "top_p"),
    (C, {"prompt": "hi", "top_p": 0}, 400, "top_p"),
    (C, {"prompt": "hi", "top_k": -5}, 400, "top_k"),
    (C, {"prompt": "hi", "top_k": 2.5}, 400, "top_k"),
    (C, {"prompt": "hi", "min_p": 2}, 400, "min_p"),
    (C, {"prompt": "hi", "repetition_penalty": 0}, 400, "repetition_penalty"),
    (C, {"prompt": "hi", "presence_penalty": 5}, 400, "presence_penalty"),
    (C, {"prompt": "hi", "frequency_penalty": -5}, 400, "frequency_penalty"),
    (C, {"prompt": "hi", "n": 0}, 400, "'n'"),
    (C, {"prompt": "hi", "n": 1000}, 400, "'n'"),
    (C, {"prompt": "hi", "stream": "yes"}, 400, "stream"),
    (C, {"prompt": "hi", "stop": 5}, 400, "stop"),
    (C, {"prompt": "hi", "stop": [""]}, 400, "stop"),
    (C, {"prompt": "hi", "stop": ["a", 1]}, 400, "stop"),
    (C, {"prompt": "hi", "stop_token_ids": [10**9]}, 400, "stop_token_ids"),
    (C, {"prompt": "hi", "stop_token_ids": "x"}, 400, "stop_token_ids"),
    (C, {"prompt": "hi", "seed": "abc"}, 400, "seed"),
    (C, {"prompt": "hi", "logprobs": 100}, 400, "logprobs"),
    (C, {"prompt": "hi", "echo": "yes"}, 400, "echo"),
    (C, {"prompt": "hi", "logit_bias": {"x": 10}}, 400, "logit_bias"),
    (C, {"prompt": "hi", "logit_bias": {"5": 101}}, 400, "logit_bias"),
    (C, {"prompt": "hi", "logit_bias": {"99999999": 1}}, 400, "logit_bias"),
    (C, {"prompt": "hi", "stop": ["x"] * 17}, 400, "stop"),
    (C, {"prompt": "hi", "no_such_field": 1}, 400, "not a request field"),
    (C, {"prompt": "hi", "messages": OK_MSG}, 400, "messages"),
    (C, {"prompt": "hi", "best_of": 3}, 400, "best_of"),
    (C, {"prompt": "hi", "model": "no-such-model"}, 404, "does not exist"),
    (C, {"prompt": "hi", "model": 5}, 400, "model"),
    (C, {"prompt": "hi", "ignore_eos": 1}, 400, "ignore_eos"),
    (C, {"prompt": "hi", "stream_options": {"include_usage": "x"}}, 400, "include_usage"),
    (C, {"prompt": "hi", "priority": "high"}, 400, "priority"),
    (C, {"prompt": "hi", "min_tokens": -1}, 400, "min_tokens"),
    (C, {"prompt": "word " * 5000, "max_tokens": 5}, 400, "context length"),
    (CHAT, {}, 400, "messages"),
    (CHAT, {"messages": []}, 400, "messages"),
    (CHAT, {"messages": "hi"}, 400, "messages"),
    (CHAT, {"messages": [{"content": "hi"}]}, 400, "role"),
    (CHAT, {"messages": [{"role": 5, "content": "hi"}]}, 400, "role"),
    (CHAT, {"messages": [{"role": "", "content": "hi"}]}, 400, "role"),
    (CHAT, {"messages": [{"role": "user"}]}, 400, "content"),
    (CHAT, {"messages": [{"role": "user", "content": 5}]}, 400, "content"),
    (CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "content"),
    (CHAT, {"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]}, 400,
     "text only"),
    (CHAT, {"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, 400, "type"),
    (CHAT, {"messages": [{"role": "user", "content": [{"type": "text"}]}]}, 400, "text"),
    (CHAT, {"messages": [{"role": "user", "content": [{"type": "hologram"}]}]}, 400, "hologram"),
    (CHAT, {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}]}, 400,
     "arguments"),
    (CHAT, {"messages": [{"role": "assistant", "tool_calls": "f"}]}, 400, "tool_calls"),
    (CHAT, {"messages": OK_MSG, "tools": {"type": "function"}}, 400, "tools"),
    (CHAT, {"messages": OK_MSG, "tools": [{"type": "function", "function": {}}]}, 400, "name"),
    (CHAT, {"messages": OK_MSG, "tools": [{"type": "retrieval"}]}, 400, "function"),
    (CHAT, {"messages": OK_MSG, "tools": [{"type": "function", "function": {"name": "f", "strict": "yes"}}]}, 400,
     "'tools[0].function.strict' must be true or false"),
    (CHAT, {"messages": OK_MSG, "tool_choice": "required"}, 400, "tools"),
    (CHAT, {"messages": OK_MSG, "tool_choice": "sometimes", "tools": [{"function": {"name": "f"}}]}, 400,
     "tool_choice"),
    (CHAT, {"messages": OK_MSG, "tool_choice": {"type": "function", "function": {"name": "g"}},
            "tools": [{"function": {"name": "f"}}]}, 400, "not in 'tools'"),
    (CHAT, {"messages": OK_MSG, "parallel_tool_calls": "no"}, 400, "parallel_tool_calls"),
    (CHAT, {"messages": OK_MSG, "chat_template_kwargs": [1]}, 400, "chat_template_kwargs"),
    (CHAT, {"messages": OK_MSG, "chat_template_kwargs": {"messages": []}}, 400, "messages"),
    (CHAT, {"messages": OK_MSG, "continue_final_message": True, "add_generation_prompt": True}, 400,
     "continue_final_message"),
    (CHAT, {"messages": OK_MSG, "continue_final_message": True}, 400, "assistant"),
    (CHAT, {"messages": OK_MSG, "documents": "doc"}, 400, "documents"),
    (CHAT, {"messages": OK_MSG, "include_reasoning": 1}, 400, "include_reasoning"),
    (CHAT, {"messages": [{"role": "user", "content": "word " * 5000}]}, 400, "context length"),
    (CHAT, {"messages": ["hi"]}, 400, "messages[0]"),
    (CHAT, {"messages": OK_MSG, "top_logprobs": 3}, 400, "top_logprobs"),
    (CHAT, {"messages": OK_MSG, "logprobs": "yes"}, 400, "logprobs"),
    (CHAT, {"messages": OK_MSG, "max_completion_tokens": 0}, 400, "max_completion_tokens"),
    (CHAT, {"messages": OK_MSG, "temperature": -1}, 400, "temperature"),
    (CHAT, {"messages": OK_MSG, "echo": True}, 400, "echo"),
    (CHAT, {"messages": OK_MSG, "prompt": "hi"}, 400, "prompt"),
    (TOK, {}, 400, "prompt"),
    (TOK, {"prompt": "a", "messages": OK_MSG}, 400, "either"),
    (TOK, {"prompt": 5}, 400, "prompt"),
    (TOK, {"prompt": "a", "tools": []}, 400, "messages"),
    (TOK, {"prompt": "a", "add_special_tokens": "yes"}, 400, "add_special_tokens"),
    (TOK, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400,
     "text only"),
    (TOK, {"prompt": "a", "bogus": 1}, 400, "not a request field"),
    (TOK, {"prompt": "a", "model": "no-such-model"}, 404, "does not exist"),
    (TOK, b"{", 400, "JSON"),
    (DETOK, {"tokens": [-1]}, 400, "token id"),
    (DETOK, {"tokens": [10**9]}, 400, "token id"),
    (DETOK, {"tokens": "abc"}, 400, "tokens"),
    (DETOK, {}, 400, "tokens"),
]


@pytest.mark.parametrize("path,body,status,word", CASES, ids=[f"{i}" for i in range(len(CASES))])
def test_bad_request_is_rejected_clearly(server, path, body, status, word):
    if isinstance(body, (bytes, str)):
        r = requests.post(server.url + path, data=body, headers={"Content-Type": "application/json"})
    else:
        r = requests.post(server.url + path, json=body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert word.lower() in err["message"].lower(), err


def test_battery_has_at_least_fifty_cases():
    assert len(CASES) >= 50


def test_wrong_methods_and_routes(server):
    assert requests.get(server.url + C).status_code == 405
    assert requests.post(server.url + "/v1/models").status_code == 405
    assert requests.get(server.url + "/v2/nothing").status_code == 404
    assert requests.get(server.url + TOK).status_code == 405
    assert requests.get(server.url + "/v1/responses").status_code == 405


def test_ten_megabyte_body_is_refused(server):
    r = requests.post(server.url + C, data=b'{"prompt": "' + b"a" * (10 << 20) + b'"}',
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 413


def test_garbage_on_the_socket_does_not_hurt(server):
    with socket.create_connection(("127.0.0.1", server.http_port)) as s:
        s.sendall(b"\x00\x01 NOT HTTP AT ALL\r\n\r\n")
        s.settimeout(5)
        try:
            s.recv(1000)
        except OSError:
            pass


@pytest.mark.parametrize("target,status,word", [
    (b"/\xff", 404, "no route"),
    (b"/v1/responses/\xff\xfe", 404, "not stored here"),
    (b"/v1/responses/\xff/input_items", 404, "not stored here"),
    (b"/v1/expert_load?\xff=1", 400, "unknown query parameter"),
    (b"/dashboard?\xc3", 200, None),
])
def test_bytes_that_are_not_utf8_in_the_target_are_answered(server, target, status, word):
    # Errors that echo the client's bytes send the invalid ones as U+FFFD: still JSON, still answered.
    with socket.create_connection(("127.0.0.1", server.http_port)) as s:
        s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        s.settimeout(10)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d" % status), reply[:200]
    if word:
        message = json.loads(body)["error"]["message"]
        assert word in message and "\ufffd" in message, message


def test_grpc_bad_inputs(server, grpc_stubs):
    pb2, pb2_grpc = grpc_stubs
    s = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
    bad = [pb2.GenerateRequest(text=""),
           pb2.GenerateRequest(token_ids=pb2.TokenIds(ids=[])),
           pb2.GenerateRequest(token_ids=pb2.TokenIds(ids=[10**8])),
           pb2.GenerateRequest(text="x", sampling=pb2.SamplingParams(max_tokens=0)),
           pb2.GenerateRequest(text="x", sampling=pb2.SamplingParams(temperature=-1)),
           pb2.GenerateRequest(chat=pb2.Chat(messages=[pb2.ChatMessage(role="", content="x")])),
           pb2.GenerateRequest(chat=pb2.Chat(messages=[pb2.ChatMessage(role="user", content="x")], tools_json="[{")),
           pb2.GenerateRequest(chat=pb2.Chat(messages=[pb2.ChatMessage(role="user", content="x")],
                                             tool_choice="required")),
           pb2.GenerateRequest(chat=pb2.Chat(messages=[pb2.ChatMessage(role="user", content="x")],
                                             chat_template_kwargs_json="[]"))]
    for req in bad:
        with pytest.raises(grpc.RpcError) as e:
            list(s.Generate(req))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, req
    with pytest.raises(grpc.RpcError) as e:
        s.Detokenize(pb2.DetokenizeRequest(token_ids=[10**8]))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_server_still_serves_after_the_battery(server):
    r = requests.post(server.url + C, json={"prompt": "Hello", "max_tokens": 3})
    assert r.status_code == 200
    assert r.json()["usage"]["completion_tokens"] >= 1


def test_bad_flags_fail_at_start_naming_the_flag(tmp_path):
    # Each bad flag stops the server at start, before it listens, with a message naming the flag.
    import subprocess
    from conftest import BIN, MODEL, self_signed_cert
    cert, key = map(str, self_signed_cert(tmp_path, "a"))
    other_key = str(self_signed_cert(tmp_path, "b")[1])
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    cases = [
        (["--max_num_seqs", "0"], "--max_num_seqs must be at least 1"),
        (["--block_size", "-5"], "--block_size must be at least 1"),
        (["--http_port", "70000"], "--http_port must be in [0, 65535]"),
        (["--drain_timeout_s", "-1"], "--drain_timeout_s must not be negative"),
        (["--log_level", "loud"], "--log_level must be"),
        (["--backend", "foo"], "unknown --backend 'foo'"),
        (["--activation_dtype", "fp16"], "unknown --activation_dtype 'fp16' (expected auto, float32, bfloat16 or int8)"),
        (["--activation_dtype", "int8"], "--activation_dtype int8: none of this model's GEMM weights are int8"),
        (["--cpu_isa", "avx3"], "unknown --cpu_isa 'avx3' (expected auto or one of: portable"),
        (["--chat_template_content_format", "parts"], "unknown --chat_template_content_format 'parts'"),
        (["--max_model_len", "100000"], "max_model_len 100000 exceeds the model's max_position_embeddings"),
        (["--max_model_len", "-1"], "max_model_len must not be negative"),
        (["--host", "nothost"], "--host: 'nothost' is not an IP address"),
        (["--allowed_origins", "app.example"], "--allowed_origins: 'app.example' is not an origin"),
        (["--tls_cert", cert], "--tls_cert and --tls_key must be given together"),
        (["--tls_cert", "/nonexistent.pem", "--tls_key", key], "--tls_cert: cannot open /nonexistent.pem"),
        (["--tls_cert", cert, "--tls_key", "/nonexistent.key"], "--tls_key: cannot open /nonexistent.key"),
        (["--tls_cert", str(junk), "--tls_key", key], "--tls_cert " + str(junk)),
        (["--tls_cert", cert, "--tls_key", other_key], "--tls_key " + other_key),
    ]
    for args, message in cases:
        r = subprocess.run([BIN, "--model", MODEL, "--http_port", "0", "--grpc_port", "0", "--warmup=false", *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0, (args, r.stderr[-2000:])
        assert message in r.stderr, (args, r.stderr[-2000:])


def nan_embedding_copy(dst, token):
    """The test model with one value of `token`'s embedding row set to NaN (BF16 0x7FC0). Its
    LM head is tied to the embedding, so that token's logit is NaN at every position, and a prompt
    holding the token makes every logit NaN."""
    import json
    import shutil
    import struct
    from conftest import MODEL
    shutil.copytree(MODEL, dst)
    path = dst / "model.safetensors"
    data = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    name = "model.embed_tokens.weight"
    assert header[name]["dtype"] == "BF16" and json.loads((dst / "config.json").read_text())["tie_word_embeddings"]
    cols = header[name]["shape"][1]
    at = 8 + n + header[name]["data_offsets"][0] + 2 * cols * token
    data[at:at + 2] = struct.pack("<H", 0x7FC0)
    path.write_bytes(bytes(data))
    return dst


def test_nan_in_the_weights_is_never_sampled_nor_made_up(tmp_path):
    """A NaN logit is a token that cannot be chosen: sampled and greedy replies leave it out and
    the log-probabilities are numbers over the other tokens (they were null). A step whose every
    logit is NaN makes no token up (greedy took token 0, the end of text, and stopped as if done):
    the request fails naming the cause, streamed or not, and the server serves on."""
    from conftest import Server
    s = Server(model=str(nan_embedding_copy(tmp_path / "nan", 0)))
    try:
        for temperature in (0, 1):
            r = requests.post(s.url + C, json={"prompt": [5, 1], "max_tokens": 6, "temperature": temperature,
                                               "top_p": 0.9, "logprobs": 3, "seed": 1}, timeout=60)
            assert r.status_code == 200, r.text
            lp = r.json()["choices"][0]["logprobs"]
            assert all(isinstance(v, float) for v in lp["token_logprobs"]), lp
            assert all("<|endoftext|>" not in top for top in lp["top_logprobs"]), lp
        for stream in (False, True):
            r = requests.post(s.url + C, json={"prompt": [5, 0], "max_tokens": 3, "temperature": 0, "stream": stream},
                              timeout=60)
            assert "the model's logits are not finite for any token" in r.text, r.text
            assert r.status_code == (200 if stream else 500), r.text
        r = requests.post(s.url + C, json={"prompt": [5, 1], "max_tokens": 2}, timeout=60)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2, r.text
    finally:
        s.stop()
