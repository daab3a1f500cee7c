#!/usr/bin/env python3
# Writes OUT (tests/data/tokenizer/unicode_classes.json): code-point sets as the reference
# libraries see them, measured by probing them over every code point, as [first, last] ranges:
#   hf_word        characters that make a single_word added token not match next to them
#                  (Hugging Face `tokenizers`, Rust regex \w)
#   hf_space       characters an lstrip added token swallows (Rust regex \s)
#   python_space   str.isspace (Kimi's chunk guard)
#   tiktoken_<cls> what tiktoken's regex engine puts in \p{Han}, \p{L}, \p{Lu}, \p{Ll}, \p{Lt},
#                  \p{Lm}, \p{Lo}, \p{M}, \p{N} and \s (Kimi's pattern uses these classes)
import json
import os
import sys
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "true"

import tiktoken
from tokenizers import AddedToken, Tokenizer

CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def probe_added(base_json, flag):
    tok = Tokenizer.from_file(base_json)
    tok.add_tokens([AddedToken("\u2980P\u2980", single_word=flag == "single_word", lstrip=flag == "lstrip")])
    tid = tok.token_to_id("\u2980P\u2980")
    texts = [chr(c) + "\u2980P\u2980" for c in CODE_POINTS]
    encs = tok.encode_batch(texts, add_special_tokens=False)
    out = set()
    for c, e in zip(CODE_POINTS, encs):
        if flag == "single_word" and tid not in e.ids:
            out.add(c)  # a word character before the token stopped the match
        if flag == "lstrip" and e.ids == [tid]:
            out.add(c)  # the character went into the token
    return out


def probe_tiktoken(cls):
    ranks = {bytes([b]): b for b in range(256)}
    enc = tiktoken.Encoding(name="probe", pat_str=cls, mergeable_ranks=ranks, special_tokens={})
    text = "".join(chr(c) for c in CODE_POINTS)
    matched = enc.decode(enc.encode_ordinary(text))
    return {ord(ch) for ch in matched}


def main(base_json, out):
    data = {"hf_word": ranges(probe_added(base_json, "single_word")),
            "hf_space": ranges(probe_added(base_json, "lstrip")),
            "python_space": ranges(c for c in CODE_POINTS if chr(c).isspace())}
    for name, cls in [("Han", r"\p{Han}"), ("L", r"\p{L}"), ("Lu", r"\p{Lu}"), ("Ll", r"\p{Ll}"), ("Lt", r"\p{Lt}"),
                      ("Lm", r"\p{Lm}"), ("Lo", r"\p{Lo}"), ("M", r"\p{M}"), ("N", r"\p{N}"), ("space", r"\s")]:
        data["tiktoken_" + name] = ranges(probe_tiktoken(cls))
    Path(out).write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print({k: len(v) for k, v in data.items()})


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: unicode_class_vectors.py BYTE_LEVEL_TOKENIZER_JSON OUT")
    main(sys.argv[1], sys.argv[2])
