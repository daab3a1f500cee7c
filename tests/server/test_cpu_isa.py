"""--cpu_isa through the real server: the ready line names the CPU kernels' instruction sets, and
every SIMD target this CPU runs serves the same greedy tokens (the kernels give the same bits on
every target), so a fleet of mixed CPUs answers alike: with float32 activations, and with int8
activations (--quantization w8a8) over a prompt long enough for the AMX tiles where the CPU has
them. A target the CPU lacks stops the start, naming it. (An unknown name is among
test_bad_input's bad flags.)"""
import pathlib
import re

import requests

from conftest import Server

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Every target's name, from the rows of the targets' table.
TARGETS = tuple(re.findall(r'^LS_SIMD_TARGET_ROW\(\w+,\s*"(\w+)"',
                           (ROOT / "kernels/cpu/simd/targets.def").read_text(), re.M))
assert "portable" in TARGETS and len(TARGETS) > 2, TARGETS


def complete(s, prompt):
    r = requests.post(s.url + "/v1/completions",
                      json={"prompt": prompt, "max_tokens": 16, "temperature": 0, "logprobs": 1})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return choice["text"], choice["logprobs"]["token_logprobs"]




def served_alike(want, *flags):
    """The targets this CPU runs whose servers (started with `flags`) answer every prompt as in `want`."""
    served = []
    for t in TARGETS:
        try:
            s = Server("--cpu_isa", t, *flags)
        except RuntimeError as e:
            assert "is not available on this CPU" in str(e) or "unknown --cpu_isa" in str(e), str(e)
            continue
        try:
            assert s.ready["cpu_isa"].split("+")[0] in TARGETS, s.ready["cpu_isa"]
            for prompt, (text, logprobs) in want.items():
                assert complete(s, prompt) == (text, logprobs), (t, prompt)
            served.append(t)
        finally:
            s.stop()
    return served


def test_every_target_serves_the_same_tokens_and_logprobs(server):
    best = server.ready["cpu_isa"]
    assert best.split("+")[0] in TARGETS, best
    want = {p: complete(server, p) for p in ("In the beginning", "And God said")}
    served = served_alike(want)
    assert "portable" in served, served


def test_every_target_serves_the_same_int8_activation_tokens():
    # 40 prompt tokens and more: the dense GEMMs of the prefill take int8 rows in blocks of 16 and 32.
    prompt = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
              "and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.")
    ref = Server("--cpu_isa", "portable", "--quantization", "w8a8")
    try:
        want = {prompt: complete(ref, prompt), "And God said": complete(ref, "And God said")}
    finally:
        ref.stop()
    served = served_alike(want, "--quantization", "w8a8")
    assert "portable" in served, served
