"""CORS (--allowed_origins): pages of the listed origins may call the API from a browser. Their
preflights are answered 204 without an API key, their replies (streams included) carry
Access-Control-Allow-Origin; other origins get none and a 403 to a preflight; without the flag no
reply carries CORS headers."""
import json
import tempfile

import pytest
import requests

from conftest import Server

APP = "https://app.example"
KEY = "cors-test-key"


@pytest.fixture(scope="module")
def cors_server():
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        f.write(KEY + "\n")
    s = Server("--allowed_origins", f"{APP},http://localhost:3000", "--api_key_file", f.name)
    yield s
    s.stop()


def test_preflight_from_an_allowed_origin_needs_no_key(cors_server):
    r = requests.options(cors_server.url + "/v1/chat/completions",
                         headers={"Origin": APP, "Access-Control-Request-Method": "POST",
                                  "Access-Control-Request-Headers": "authorization, content-type"})
    assert r.status_code == 204, r.text
    assert r.headers["Access-Control-Allow-Origin"] == APP
    assert "POST" in r.headers["Access-Control-Allow-Methods"]
    assert r.headers["Access-Control-Allow-Headers"] == "authorization, content-type"
    assert "Origin" in r.headers["Vary"]
    assert "Access-Control-Allow-Credentials" not in r.headers


def test_replies_to_an_allowed_origin_say_so(cors_server):
    auth = {"Authorization": f"Bearer {KEY}", "Origin": APP}
    r = requests.post(cors_server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, headers=auth)
    assert r.status_code == 200
    assert r.headers["Access-Control-Allow-Origin"] == APP
    assert "X-Request-Id" in r.headers["Access-Control-Expose-Headers"]
    # Errors too (a page must be able to read why it was refused), and streams.
    r = requests.post(cors_server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2},
                      headers={"Origin": APP})
    assert r.status_code == 401 and r.headers["Access-Control-Allow-Origin"] == APP
    with requests.post(cors_server.url + "/v1/chat/completions", stream=True, headers=auth,
                       json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["Access-Control-Allow-Origin"] == APP
        assert b"[DONE]" in r.content


def test_other_origins_are_not_allowed(cors_server):
    r = requests.post(cors_server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2},
                      headers={"Authorization": f"Bearer {KEY}", "Origin": "https://evil.example"})
    assert r.status_code == 200  # a browser will not let the page read it
    assert "Access-Control-Allow-Origin" not in r.headers
    r = requests.options(cors_server.url + "/v1/completions",
                         headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert r.status_code == 403
    assert "https://evil.example" in r.json()["error"]["message"]
    assert "Access-Control-Allow-Origin" not in r.headers


def test_without_the_flag_no_reply_carries_cors_headers(server):
    r = requests.post(server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2},
                      headers={"Origin": APP})
    assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers
    r = requests.options(server.url + "/v1/completions",
                         headers={"Origin": APP, "Access-Control-Request-Method": "POST"})
    assert r.status_code == 405 and "Access-Control-Allow-Origin" not in r.headers
    assert json.loads(r.text)["error"]["message"]
