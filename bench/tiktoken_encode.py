#!/usr/bin/env python3
# Single-threaded `tiktoken` encode throughput for a Kimi-style model directory (tiktoken.model,
# Kimi's pre-tokenizer pattern, 256 control ids): encode_ordinary() of each line (split on '\n',
# newlines kept, as bench/tokenizer_bench.cc does), best of --repeat runs, as JSON.
import argparse
import json
import sys
import time
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models" / "reference"))
from tokenizer_layouts import KIMI_PATTERN  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("text_file")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ranks = load_tiktoken_bpe(str(Path(args.model_dir) / "tiktoken.model"))
    specials = {f"<|reserved_token_{i}|>": i for i in range(len(ranks), len(ranks) + 256)}
    enc = tiktoken.Encoding(name="bench", pat_str=KIMI_PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    data = Path(args.text_file).read_bytes()
    text = data.decode("utf-8")
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    best, tokens = float("inf"), 0
    for _ in range(args.repeat):
        start = time.perf_counter()
        tokens = sum(len(enc.encode_ordinary(line)) for line in lines)
        best = min(best, time.perf_counter() - start)
    print(json.dumps({"mb_per_s": round(len(data) / 1e6 / best, 3), "bytes": len(data), "tokens": tokens,
                      "seconds": round(best, 4), "lines": len(lines), "mode": "per line, 1 thread",
                      "tiktoken_version": tiktoken.__version__}))


if __name__ == "__main__":
    main()
