"""The startup warm-up through the real server: by default the largest batch runs once before the
server reports ready (the ready log says how many tokens, on which backend); --nowarmup (here as
LATENTSERVE_WARMUP=false, as every flag may be set) skips it, and either way the server serves
the same greedy completion."""
import os

import requests

from conftest import Server


def greedy(s):
    r = requests.post(s.url + "/v1/completions",
                      json={"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def test_warmup_runs_by_default_and_can_be_skipped():
    server = Server(warmup=True)  # no flag: the binary's default
    cold = None
    try:
        fields = server.ready
        assert fields["backend"] == "cpu"
        # The default step budget, 2048 tokens over at most 64 sequences: 64 sequences of 32 tokens,
        # which the 64 MiB cache holds.
        assert fields["warmup_tokens"] == 2048, fields
        cold = Server(env={**os.environ, "LATENTSERVE_WARMUP": "false"})
        assert cold.ready["warmup_tokens"] == 0
        assert greedy(cold) == greedy(server)
    finally:
        server.stop()
        if cold:
            cold.stop()
