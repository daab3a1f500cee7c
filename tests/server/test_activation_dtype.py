"""--activation_dtype through the real server: float32 by default on the CPU; bfloat16 (the BF16
weights' GEMM inputs rounded to BF16) serves and says so in the ready line, with greedy text that
stays the default's on the tiny model; int8 with int4 weights quantized at load serves w4a8's
text. (A bad value, and int8 for a model without integer weights, are among test_bad_input's bad
flags.)"""
import requests

from conftest import Server


def complete(s, prompt):
    r = requests.post(s.url + "/v1/completions",
                      json={"prompt": prompt, "max_tokens": 12, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def test_float32_by_default_and_bfloat16_when_asked(server):
    assert server.ready["activation_dtype"] == "float32"
    bf16 = Server("--activation_dtype", "bfloat16")
    try:
        assert bf16.ready["activation_dtype"] == "bfloat16"
        for prompt in ("In the beginning", "The king said"):
            assert complete(bf16, prompt) == complete(server, prompt), prompt
    finally:
        bf16.stop()


def test_int8_activations_of_int4_weights_serve_what_w4a8_serves():
    a8 = Server("--quantization", "int4", "--activation_dtype", "int8")
    w4a8 = Server("--quantization", "w4a8")
    try:
        assert a8.ready["activation_dtype"] == "int8"
        for prompt in ("In the beginning", "The king said"):
            assert complete(a8, prompt) == complete(w4a8, prompt), prompt
    finally:
        a8.stop()
        w4a8.stop()
