"""generation_config.json's sampling defaults (models/tiny: temperature 0.8, top_p 0.95) apply to
requests that leave those fields unset, as in vLLM; --generation_config none turns them off."""
import json

import pytest
import requests

from conftest import Server

PROMPT = {"prompt": "In the beginning", "max_tokens": 24, "ignore_eos": True}


def text(server, seeds=range(4), **fields):
    return [requests.post(server.url + "/v1/completions", json={**PROMPT, "seed": s, **fields}).json()
            ["choices"][0]["text"] for s in seeds]


@pytest.fixture(scope="module")
def no_defaults_server():
    s = Server("--generation_config", "none")
    yield s
    s.stop()


def start_line(server):
    [line] = [json.loads(l) for l in server.logs().splitlines() if '"event":"generation_config"' in l]
    return line


def test_unset_fields_take_the_models_defaults(server):
    assert start_line(server)["defaults"] == {"temperature": 0.8, "top_p": 0.95, "eos_token_ids": [0]}
    unset = text(server)
    assert unset == text(server, temperature=0.8, top_p=0.95)
    assert unset != text(server, temperature=1.0, top_p=1.0)
    # A field the request sets is its own; the others still come from the file.
    assert text(server, temperature=0.8) == unset


def test_generation_config_none_turns_them_off(server, no_defaults_server):
    assert start_line(no_defaults_server) == {**start_line(no_defaults_server), "source": "none", "defaults": {}}
    assert text(no_defaults_server) == text(server, temperature=1.0, top_p=1.0)
    assert text(no_defaults_server) != text(server)


def test_a_bad_generation_config_stops_the_start(tmp_path):
    bad = tmp_path / "generation_config.json"
    bad.write_text('{"temperature": "warm"}')
    with pytest.raises(RuntimeError) as e:
        Server("--generation_config", str(bad))
    assert "--generation_config" in str(e.value) and "'temperature'" in str(e.value)
