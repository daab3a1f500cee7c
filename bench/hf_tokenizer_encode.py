#!/usr/bin/env python3
# Single-threaded Hugging Face `tokenizers` encode throughput: plain encode() of each line
# (newlines kept; --whole: one encode() of the full text), best of --repeat runs, as JSON.
import argparse
import json
import os
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer_json")
    ap.add_argument("text_file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--whole", action="store_true", help="encode the whole text in one call")
    args = ap.parse_args()
    tok = Tokenizer.from_file(args.tokenizer_json)
    with open(args.text_file, "rb") as f:
        data = f.read()
    text = data.decode("utf-8")
    lines = [text] if args.whole else text.splitlines(keepends=True)
    best, tokens = float("inf"), 0
    for _ in range(args.repeat):
        start = time.perf_counter()
        tokens = sum(len(tok.encode(line).ids) for line in lines)
        best = min(best, time.perf_counter() - start)
    mode = ("whole text" if args.whole else "per line") + ", 1 thread"
    print(json.dumps({"mb_per_s": round(len(data) / 1e6 / best, 3), "bytes": len(data), "tokens": tokens,
                      "seconds": round(best, 4), "lines": len(lines), "mode": mode,
                      "tokenizers_version": tokenizers.__version__}))


if __name__ == "__main__":
    main()
