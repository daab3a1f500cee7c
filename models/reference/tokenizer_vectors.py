#!/usr/bin/env python3
# Writes Hugging Face `tokenizers` oracle vectors (vectors.jsonl, decode_vectors.jsonl) next to
# the byte-level fixtures ROOT/<name>/tokenizer.json that train_tokenizers.py makes (the other
# layouts get theirs from tokenizer_layouts.py); test strings are deterministic (fixed seeds).
import json
import os
import random
import sys
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_tokenizers import CONFIGS, split_corpus  # noqa: E402

CHAT = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "Hi! What's 2+2?<|im_end|>\n<|im_start|>assistant\n2 + 2 = 4.<|im_end|>\n")

HANDWRITTEN = [
    # empty, ASCII prose
    "", "a", "Hello", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    " leading space", "trailing space ", "  two leading", "Mixed CASE Words AND ACRONYMS like NASA.",
    "In the beginning God created the heaven and the earth.", "hello world", " hello world ",
    # whitespace runs
    " ", "  ", "   ", "a b", "a  b", "a   b", "a    b", "end   ", "   start", "\t", "\t\t", "a\tb", "a\t\tb",
    " \t ", "\n", "\n\n", "\n\n\n", "a\nb", "a\n\nb", "a\n\n\nb", "a\r\nb", "\r\n", "\r\n\r\n", "a\rb", "\r",
    "a \n b", "a  \n\n  b", "  \n  ", "x \t\n y", "line1\n  indented\n\tTabbed\n", " \r\n ", "a\n ",
    "trailing newline\n", "word \n", "\u00a0nbsp\u00a0", "ideographic\u3000space", "line\u2028sep",
    "\x0b\x0c", "a \u00a0 b", "a\x1cb\x1dc\x1ed\x1fe", "a\x85b", "a\u200bb", "a\u180eb", "\u2007\u202f\u205f x",
    "a \x0b b", "tab\tthen  spaces   then\nnewline", "    def indented():\n        pass\n",
    # digits and numbers
    "0", "7", "12", "123", "1234", "12345", "123456", "1234567", "1234567890123", "3.14159", "1,000,000",
    "-42", "+1e10", "0x1F", "2024-01-15", "10:30:45", "v1.2.3", "abc123def", "123abc", " 123", "a 1 b 22",
    "\u0663\u0664\u0665", "\u00bd and \u00bc", "\u2460\u2461\u2462", "\u216b", "\uff11\uff12\uff13\uff14",
    "a1b22c333d4444e55555", "Psalm 119:105", "9" * 40, "$1,234.56", "50%", "1st 2nd 3rd 4th",
    # punctuation runs
    "!!!", "...", "?!?!", "---", "===", "()", "{}[]", '"quoted"', "'single'", "@#$%^&*", "a.b.c",
    "foo()", "x += 1;", "<<<>>>", "...\n", "!!\n\n", " !!!", "a, b; c: d.", "\u2014", "\u2026",
    "\u00abguillemets\u00bb", "\u201ccurly\u201d", "\u2018s", "(!!)\r\n", "#!/bin/sh\n", "-- \n",
    # contractions
    "it's", "don't", "we're", "I've", "I'm", "we'll", "he'd", "IT'S", "DON'T", "WE'RE", "I'VE", "I'M",
    "WE'LL", "HE'D", "It'S", "He'Ll", "'s", "'t", "''s", "'S", "rock'n'roll", "James' book", "can't've",
    "o'clock", "it\u2019s", "'re'''ve", " 's", "x's y's", "'LL 'll 'Ll", "'d'm't",
    "'Sam 'Tom I'M'S", "DON'TALK", "x'Ve'RE'd", "SHE'LL BE THERE'S", "'sdeath 'tis 'twas",
    # CJK
    "\u4f60\u597d\uff0c\u4e16\u754c", "\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c",
    "\u30ab\u30bf\u30ab\u30ca", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\uc548\ub155\ud558\uc138\uc694",
    "\u4e2d\u6587English\u6df7\u5408", "\u6f22\u5b57123", "\u6771\u4eac\u3000\u5927\u962a",
    # emoji
    "\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466",
    "\U0001F3F3\ufe0f\u200d\U0001F308", "\U0001F1FA\U0001F1F8\U0001F1EF\U0001F1F5", "\u2764\ufe0f",
    "\U0001F469\U0001F3FF\u200d\U0001F4BB", "\U0001F9D1\u200d\U0001F680", "hello \U0001F600 world",
    "\U0001F600\U0001F600\U0001F600", "1\ufe0f\u20e3",
    "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", "I \u2764\ufe0f NY!",
    # combining marks
    "e\u0301", "\u00e9", "cafe\u0301", "caf\u00e9", "n\u0303", "a\u0300\u0301\u0302", "\u0301",
    "Z\u0351\u036b\u0343a\u0352\u036el\u0310\u0344g\u0307o", "\u00c5 vs A\u030a", "\u1100\u1161\u11a8",
    "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\u00fcber \u00dcBER",
    # RTL
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "Hello \u0645\u0631\u062d\u0628\u0627 world",
    "\u200fRTL mark", "\u202eoverride\u202c", "\u05e2\u05b4\u05d1\u05b0\u05e8\u05b4\u05d9\u05ea 123",
    # special and added tokens embedded in text
    "hi<|im_end|>there", "<|im_start|>user\nhello<|im_end|>", "<|endoftext|>",
    "<|endoftext|><|endoftext|>", " <|endoftext|> ", "a<|im_start|>", CHAT, "<|im_end",
    "<|im_end|", "<|IM_END|>", "<|im_end|>>", "<<|im_end|>", "<|endoftext|>\n\n", "x\n<|im_start|>",
    "<sep>", "a<sep>b", "x <sep> y", "<sep><sep>", "< sep>", "<SEP>", "<|im_start|><sep><|im_end|>",
    "it's<|endoftext|>'s", "123<|endoftext|>456",
    # miscellaneous
    "\x00", "\x01\x02", "\x7f", "\ufeffBOM", "\ufffd", "\U0010ffff", "\ue000",
    "\U0001d518\U0001d52b\U0001d526\U0001d520\U0001d52c\U0001d521\U0001d522", "\u01c5", "\u0130stanbul",
    "https://example.com/path?q=1&r=2#frag", "user@example.org", "def f(x):\n    return x ** 2\n",
    '{"a": [1, 2, 3], "b": null}', "C:\\Windows\\System32", "a" * 300, " " * 100, "\n" * 40,
    "ab" * 100, "\U0001F642" * 30, "\u0416\u0438\u0432\u0438 \u0441\u0432\u043e\u0431\u043e\u0434\u043d\u043e",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac", "Stra\u00dfe", "\ufb01ne \ufb02ow",
]

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " \t\n\r\u00a0", "  \n\r\n",
    "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~", "'", "sStTdDmM", "\u4f60\u597d\u4e16\u754c\u3053\u3093\ud55c",
    "\U0001F600\U0001F44D\U0001F3FD\u200d\ufe0f\U0001F1FA\U0001F1F8", "\u0301\u0303\u0308",
    "\u00e9\u00fc\u00df\u00f1", "\u0645\u0631\u062d\u05e9\u05dc", "\u0663\u00bd\u2460\uff11",
]
SPECIAL_PIECES = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<sep>", "'s", "'ll", "'VE"]


def fuzz_strings(rng, count):
    out = []
    for _ in range(count):
        pieces = []
        for _ in range(rng.randint(1, 25)):
            if rng.random() < 0.05:
                pieces.append(rng.choice(SPECIAL_PIECES))
            else:
                pieces.append(rng.choice(rng.choice(POOLS)) * rng.choice([1, 1, 1, 2, 3]))
        out.append("".join(pieces))
    return out


def test_strings():
    rng = random.Random(20240601)
    held = [s for s in split_corpus()[1] if len(s) <= 1500]
    samples = rng.sample(held, 300)
    fragments = []
    for s in rng.sample(held, 60):
        a = rng.randrange(len(s))
        fragments.append(s[a:a + rng.randint(1, 80)])
    strings = HANDWRITTEN + samples + fragments + fuzz_strings(rng, 120)
    seen, unique = set(), []
    for s in strings:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    return unique


def byte_symbol(b):
    """The GPT-2 byte-to-unicode symbol that byte-level BPE uses for byte b."""
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    return chr(b) if b in kept else chr(256 + [x for x in range(256) if x not in kept].index(b))


def decode_cases(tok, rng):
    vocab = tok.get_vocab(with_added_tokens=True)
    size = tok.get_vocab_size(with_added_tokens=True)
    specials = [vocab[t] for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")]
    added = [vocab[t] for t in ("<sep>",) if t in vocab]
    enc = lambda s: tok.encode(s).ids
    raw = lambda bs: [vocab[byte_symbol(b)] for b in bs]
    cases = [[], specials, specials[::-1] + added, added * 3, [specials[0]] * 4]
    cases += [enc("Hello world"), enc("<|im_start|>user\nhi<|im_end|>\n"), enc(" a <sep> b "), enc(CHAT)]
    cases += [enc("hello") + [specials[2]] + enc(" world") + [specials[0]]]
    for s in ("\u4f60\u597d", "\U0001F468\u200d\U0001F469", "  x  "):
        cases.append([specials[1]] + enc(s) + [specials[2]])
    # byte sequences: complete characters split over tokens, truncated and invalid UTF-8
    for bs in (b"\xc3", "\u4e2d".encode(), "\u4e2d".encode()[:2] + b"a", "\U0001F600".encode()[:3],
               b"\x80", b"\xff", b"\xf0\x9fx", b"\xc0\xaf", b"\xed\xa0\x80", b"a\xe2\x82"):
        cases.append(raw(bs))
    cases.append(raw("\u00e9".encode()[:1]) + [specials[0]] + raw("\u00e9".encode()[1:]))
    cases += [[i] for i in rng.sample(range(size), 10)]
    cases += [rng.sample(range(size), rng.randint(2, 24)) for _ in range(16)]
    cases += [[rng.choice(specials + added + [rng.randrange(size)]) for _ in range(8)] for _ in range(4)]
    return cases


def main(root):
    strings = test_strings()
    for path in sorted(Path(root) / name / "tokenizer.json" for name in CONFIGS):
        tok = Tokenizer.from_file(str(path))
        with open(path.parent / "vectors.jsonl", "w", encoding="utf-8") as f:
            for s in strings:
                ids = tok.encode(s).ids
                rec = {"text": s, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        rng = random.Random("decode:" + path.parent.name)
        with open(path.parent / "decode_vectors.jsonl", "w", encoding="utf-8") as f:
            for ids in decode_cases(tok, rng):
                rec = {"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                       "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        print(f"{path.parent.name}: {len(strings)} encode vectors")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tokenizer_vectors.py ROOT  (ROOT/<name>/tokenizer.json)")
    main(sys.argv[1])
