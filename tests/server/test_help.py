"""latentserve --help lists every flag once, grouped by topic (model, network, serving limits,
cache, expert parallelism, rank group, chat, security, logging), without the build machine's source
paths."""
import re
import subprocess

from conftest import BIN

TOPICS = ["Model", "Network", "Serving limits", "Cache", "Expert parallelism",
          "Rank group (several processes launched by mpirun)", "Chat", "Security", "Logging"]


def test_help_groups_flags_by_topic_without_source_paths():
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Flags from" not in out and ".cc" not in out, out[:2000]
    headings = re.findall(r"^(\S[^:\n]*):$", out, re.M)
    assert headings == TOPICS, headings
    flags = re.findall(r"^  --([a-z_0-9]+) \(", out, re.M)
    assert len(flags) == len(set(flags)), "a flag listed twice"
    for expected in ("model", "http_port", "max_connections", "http_header_timeout_s", "http_keepalive_timeout_s",
                     "kv_cache_mb", "devices", "rank_timeout_s", "api_key_file", "log_level"):
        assert expected in flags, expected
    section = out[out.index("Serving limits:"):out.index("Cache:")]
    assert "--max_connections (" in section and "--http_header_timeout_s (" in section
    # Every flag the full listing knows (Abseil's own aside) is in a topic.
    full = subprocess.run([BIN, "--helpfull"], capture_output=True, text=True, timeout=30)
    own = full.stdout + full.stderr
    own = own[own.index("server/main.cc"):]
    own = own[:own.find("\n\n  Flags from") if "\n\n  Flags from" in own else len(own)]
    assert set(re.findall(r"--([a-z_0-9]+) \(", own)) <= set(flags)
