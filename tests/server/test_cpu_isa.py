"""--cpu_isa through the real server: the ready line names the CPU kernels' instruction sets, and
every SIMD target this CPU runs serves the same greedy tokens (the kernels give the same bits on
every target), so a fleet of mixed CPUs answers alike. A target the CPU lacks stops the start,
naming it. (An unknown name is among test_bad_input's bad flags.)"""
import requests

from conftest import Server

TARGETS = ("portable", "avx2", "avx2_vnni", "avx512", "avx512_vnni", "avx512_bf16", "neon", "neon_dot")


def complete(s, prompt):
    r = requests.post(s.url + "/v1/completions",
                      json={"prompt": prompt, "max_tokens": 16, "temperature": 0, "logprobs": 1})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return choice["text"], choice["logprobs"]["token_logprobs"]




def test_every_target_serves_the_same_tokens_and_logprobs(server):
    best = server.ready["cpu_isa"]
    assert best.split("+")[0] in TARGETS, best
    want = {p: complete(server, p) for p in ("In the beginning", "And God said")}
    served = []
    for t in TARGETS:
        try:
            s = Server("--cpu_isa", t)
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
    assert "portable" in served, served
