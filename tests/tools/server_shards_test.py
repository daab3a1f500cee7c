#!/usr/bin/env python3
"""The server suite's shards (LATENTSERVE_TEST_SHARD=I/N, dealt in tests/server/conftest.py) together
collect every test of the suite exactly once, whole files each, for N = 2 (what ctest runs) and 3.
Usage: server_shards_test.py   (with the Python of the integration tests: pytest, requests, grpc)
"""
import collections
import os
import subprocess
import sys

SUITE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "server")


def collect(shard):
    env = {k: v for k, v in os.environ.items() if k != "LATENTSERVE_TEST_SHARD"}
    if shard:
        env["LATENTSERVE_TEST_SHARD"] = shard
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", SUITE],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"collection with LATENTSERVE_TEST_SHARD={shard} failed:\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    return [line for line in out.stdout.splitlines() if "::" in line]


whole = collect(None)
assert len(whole) > 100, f"the suite collected only {len(whole)} tests"
for n in (2, 3):
    shards = [collect(f"{i}/{n}") for i in range(1, n + 1)]
    seen = collections.Counter(t for s in shards for t in s)
    missing = sorted(set(whole) - set(seen))
    twice = sorted(t for t, c in seen.items() if c > 1)
    assert not missing, f"{n} shards leave out {len(missing)} tests, e.g. {missing[:3]}"
    assert not twice, f"{n} shards run {len(twice)} tests more than once, e.g. {twice[:3]}"
    assert all(shards), f"an empty shard of {n}: {[len(s) for s in shards]}"
    files = [{t.split("::")[0] for t in s} for s in shards]
    for i in range(n):
        for j in range(i + 1, n):
            assert not files[i] & files[j], f"shards {i + 1} and {j + 1} of {n} split a file: {files[i] & files[j]}"
    print(f"{n} shards: {[len(s) for s in shards]} tests, {[len(f) for f in files]} files; all {len(whole)} once")
bad = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", SUITE],
                     env={**os.environ, "LATENTSERVE_TEST_SHARD": "3/2"}, capture_output=True, text=True)
assert bad.returncode != 0 and "want I/N" in bad.stdout + bad.stderr, "a shard outside 1..N is refused"
print("ok: the shards cover the suite")
