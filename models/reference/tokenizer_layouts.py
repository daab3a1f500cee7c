#!/usr/bin/env python3
# Builds the tokenizer fixtures for the layouts published MoE models ship beyond plain byte-level
# BPE, and their oracle vectors:
#   sp_llama2, sp_metaspace, sp_metaspace_split, sp_unk, sp_unk_nofuse: SentencePiece-style BPE
#     tokenizer.json files (Llama-2/Mistral/Mixtral layouts) trained with Hugging Face
#     `tokenizers` on multilingual text; oracle: `tokenizers`.
#   llama3_post: llama3_8192 with Llama-3's real post-processor Sequence[ByteLevel,
#     TemplateProcessing(<|begin_of_text|> $A)]; oracle: `tokenizers`.
#   added_tokens: qwen2_4096 with an NFC normalizer and added tokens using every flag
#     (lstrip, rstrip, single_word, normalized, special); oracle: `tokenizers`.
#   kimi_k3: a Kimi-K3-style directory (tiktoken.model from a BPE trained with Kimi's pattern,
#     256 reserved control ids named by tokenizer_config.json, config.json model_type kimi_k3);
#     oracle: `tiktoken` with Kimi's original pattern, driven the way tokenization_kimi.py does.
# Usage: tokenizer_layouts.py ROOT (ROOT = tests/data/tokenizer, which must hold llama3_8192 and
# qwen2_4096). Deterministic: single-threaded training, fixed seeds.
import base64
import json
import os
import random
import sys
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tiktoken  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers, processors, trainers  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multilingual_corpus import split_multilingual  # noqa: E402
from tokenizer_vectors import test_strings  # noqa: E402

META = "\u2581"
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]

# Kimi's pre-tokenizer pattern as tokenization_kimi.py writes it (tiktoken, Rust regex syntax).
KIMI_PATTERN = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
# The same split for training (Oniguruma, which HF's Split uses, spelled without `&&`).
KIMI_TRAIN_PATTERN = KIMI_PATTERN.replace(
    r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]", r"[^\p{Han}\p{Ll}\p{N}\p{P}\p{S}\p{Z}\p{C}]").replace(
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]", r"[^\p{Han}\p{Lu}\p{Lt}\p{N}\p{P}\p{S}\p{Z}\p{C}]")

# Strings the issue found wrong or that stress these layouts.
HARD = [
    # NUL (NFC stopped at it), also next to composing characters and added tokens
    "a\x00b", "\x00", "\x00\x00x\x00", "cafe\u0301\x00e\u0301", "<sep>\x00<sep>", "\x00<|im_end|>\x00",
    # CJK next to Latin and digits
    "\u4e2d\u6587abc\u65e5\u672cDEF123\u4e2d", "GPT\u4e2d\u6587\u6a21\u578bLLM", "\u6211\u662fKimi\uff0c\u4f60\u597dWorld!",
    "\u3005\u3007\u3021\u302a\u4e00A\u4e00a", "\u6771\u4eac2024\u5e74Tokyo", "abc\u4e00def\u4e8cGHI",
    "I'm\u4e2d'S\u6587'll", "\U00020000\U0002a700x\U00031350\U0002ebf0y", "\u30ab\u30bf\u30ab\u30caKatakana\u3072\u3089",
    # long digit runs
    "1234567890" * 6, "3.14159265358979323846264338327950288419716939937510", "0" * 100, "\uff11\uff12\uff13" * 10,
    # CRLF and other line breaks
    "line\r\nline\r\n\r\n", "\r\n\r\n  \r\n", "a\r\n\tb", "\r\r\n\n\r", "x\u2028y\u2029z\x85w",
    # Unicode whitespace around added and special tokens
    "\u3000<sep>\u3000", "\u00a0<|im_end|>\u00a0", "x\u2003<ls>\u2003y", "\u3000\u3000<rs>\u3000x", "a\u00a0<lrs>\u00a0b",
    " <ls> ", "\t<rs>\n", "\u2009<lrs>\u2009", "\u200b<ls>\u200b", "\u00a0<s>\u00a0</s>\u00a0",
    # single_word neighbours: ASCII, accented, CJK, digits, marks, joiners, circled letters
    "word", "a word b", "aword", "worda", "\u00e9word", "word\u00e9", "\u4e2dword", "word\u4e2d", "1word", "word_",
    "e\u0301word", "\u200dword", "\u24b6word", "\u00bdword", "<sw>", "x<sw>", "<sw>x", "\u4e2d<sw>\u4e2d", "!<sw>!",
    # normalized added tokens (NFC composes the text before matching)
    "caf\u00e9", "cafe\u0301", "CAFE\u0301", "x cafe\u0301 y", "<nn>", "<nn\u0301>",
    # added tokens whose content the decoder has to read
    "\u00e9", "a b", "\u00e9!", "<sp ace>",
    # Unicode versions: the reference composes nothing newer than its tables
    "\U00011935\U00011930", "\U00011935\u0301\U00011930", "a\U0001133b\u0301", "e\u0301\u0302\u0323", "\u1e9b\u0323",
    "A\u030a\u212b\u00c5", "\u0344\u0340\u0341", "\uac00\u11a8", "\u1100\u1161\u11a8",
    # metaspace and byte-fallback look-alikes
    META + "already" + META + "spaced", " " + META + " ", META, META * 3, "<0x41>", "<0xZZ>", "<unk>", "<s>hi</s>",
    META + "<s>", "a" + META + "<s>" + META + "b", "  leading", "trailing  ", "   ", "a  b   c",
    # emoji and rare characters (byte fallback, unk runs)
    "\U0001F600\U0001F600", "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\U0001F1EF\U0001F1F5",
    "\u16a0\u16a2\u16a6 \u13a0\u13a1", "\U0001d400\U0001d401", "\u2603\u2604\u2605\u2606",
    # the empty string and long runs
    "", "x" * 700, "\u4e00" * 80, " " * 300, "\n" * 50, "ab " * 120, "\U0001F600" * 40,
]


def dump(obj):
    return json.dumps(obj, ensure_ascii=False) + "\n"


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(dump(r))


def fuzz_strings(rng, count, pieces):
    out = []
    pools = ["abcdefghijklmnopqrstuvwxyzABC", "0123456789", " \t\n\r\u00a0\u3000", "!?.,'\"-",
             "\u4f60\u597d\u4e16\u754c\u6587\u5b57", "\u043f\u0440\u0438\u0432\u0435\u0442", "\u00e4\u00f6\u00fc\u00df\u00e9\u00f1",
             "\U0001F600\u200d\ufe0f", "\u0301\u0303", META, "\x00\x01"]
    for _ in range(count):
        s = []
        for _ in range(rng.randint(1, 20)):
            if rng.random() < 0.08:
                s.append(rng.choice(pieces))
            else:
                s.append(rng.choice(rng.choice(pools)) * rng.choice([1, 1, 2, 3]))
        out.append("".join(s))
    return out


def all_strings(held_foreign, extra_pieces, seed):
    rng = random.Random(seed)
    foreign = [s for s in held_foreign if len(s) <= 1500]
    sample = rng.sample(foreign, 200)
    frags = []
    for s in rng.sample(foreign, 60):
        a = rng.randrange(len(s))
        frags.append(s[a:a + rng.randint(1, 60)])
    strings = test_strings() + HARD + sample + frags + fuzz_strings(rng, 120, extra_pieces)
    seen, out = set(), []
    for s in strings:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


# ------------------------------------------------------------------ tokenizer.json layouts


def hf_records(tok, strings):
    plain = Tokenizer.from_str(tok.to_str())
    plain.encode_special_tokens = True
    recs = []
    for s in strings:
        ids = tok.encode(s).ids
        recs.append({"text": s, "ids": ids, "ids_no_special": tok.encode(s, add_special_tokens=False).ids,
                     "ids_special_as_text": plain.encode(s, add_special_tokens=False).ids,
                     "decoded": tok.decode(ids, skip_special_tokens=False),
                     "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    return recs


def hf_decode_cases(tok, rng, specials):
    vocab = tok.get_vocab(with_added_tokens=True)
    size = tok.get_vocab_size(with_added_tokens=True)
    enc = lambda s: tok.encode(s, add_special_tokens=False).ids
    cases = [[], specials, specials[::-1], [specials[0]] * 3]
    for s in ("Hello world", " leading", "  two  ", "\u4f60\u597d\u4e16\u754c", "caf\u00e9 \U0001F600", "a\nb", " ", "x"):
        cases += [enc(s), [specials[0]] + enc(s), enc(s) + [specials[-1]] + enc(s)]
    if "<0x41>" in vocab:
        b = lambda bs: [vocab[f"<0x{x:02X}>"] for x in bs]
        zh = "\u4f60".encode()
        word = enc("word")
        cases += [b(zh), b(zh[:2]), b(zh[:2]) + word, b(b"\xff"), b(b"\xc3") + word + b(b"\xa9"), b(b"A\xe2\x82\xac"),
                  b(b"\xe2\x82") + [specials[0]] + b(b"\xac"), word + b(zh) + word, b(b" ") + word, b(b"  x"),
                  b("\U0001F600".encode()), b("\U0001F600".encode()[:3]) + b(zh)]
    for t in (META, META + META, META + "a"):
        if t in vocab:
            cases += [[vocab[t]], [vocab[t]] + enc("x"), [specials[0], vocab[t]]]
    cases += [[i] for i in rng.sample(range(size), 12)]
    cases += [rng.sample(range(size), rng.randint(2, 24)) for _ in range(20)]
    cases += [[rng.choice(specials + [rng.randrange(size)]) for _ in range(8)] for _ in range(4)]
    return [{"ids": c, "decoded": tok.decode(c, skip_special_tokens=False),
             "decoded_skip_special": tok.decode(c, skip_special_tokens=True)} for c in cases]


def train_sentencepiece_bpe(docs):
    """A SentencePiece-style BPE vocabulary: <unk> <s> </s>, the 256 <0xXX> byte tokens, then
    merges learned on metaspace-split words with a limited alphabet (rare characters fall back)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=4096, min_frequency=2, limit_alphabet=400, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"] + BYTE_TOKENS)
    tok.train_from_iterator(docs, trainer)
    data = json.loads(tok.to_str())
    # The byte tokens live in the model vocab only, as in Llama-2's file.
    data["added_tokens"] = [a for a in data["added_tokens"] if a["content"] not in BYTE_TOKENS]
    return data


def sp_layouts(base):
    bos_template = {"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                             {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    sp_decoder = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": META}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    llama2_norm = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": META}, {"type": "Replace", "pattern": {"String": " "}, "content": META}]}
    sep = AddedToken("<sep>", normalized=True, special=False)

    def make(normalizer, pre, decoder, post, byte_fallback=True, fuse_unk=True, extra=()):
        d = json.loads(json.dumps(base))
        d["normalizer"], d["pre_tokenizer"], d["decoder"], d["post_processor"] = normalizer, pre, decoder, post
        d["model"]["byte_fallback"], d["model"]["fuse_unk"] = byte_fallback, fuse_unk
        return with_added(d, list(extra))

    return {
        # Llama-2 / Mistral-7B-v0.1 / Mixtral-8x7B: Prepend+Replace normalizers, no pre-tokenizer.
        "sp_llama2": make(llama2_norm, None, sp_decoder, bos_template, extra=[sep]),
        # Newer conversions (legacy=False): Metaspace(prepend_scheme first, split false).
        "sp_metaspace": make(None, {"type": "Metaspace", "replacement": META, "prepend_scheme": "first", "split": False},
                             sp_decoder, bos_template, extra=[sep]),
        # Metaspace always + split, decoded by a Metaspace decoder after ByteFallback; no post-processor.
        "sp_metaspace_split": make(None, {"type": "Metaspace", "replacement": META, "prepend_scheme": "always",
                                          "split": True},
                                   {"type": "Sequence", "decoders": [
                                       {"type": "ByteFallback"},
                                       {"type": "Metaspace", "replacement": META, "prepend_scheme": "always",
                                        "split": True}]}, None),
        # No byte fallback: unknown characters become <unk>, one per run (fuse_unk) or one each.
        "sp_unk": make(llama2_norm, None, sp_decoder, bos_template, byte_fallback=False, fuse_unk=True),
        "sp_unk_nofuse": make(llama2_norm, None, sp_decoder, bos_template, byte_fallback=False, fuse_unk=False),
    }


def with_added(d, tokens):
    """`d` with `tokens` added the way HF assigns their ids (a content already in the vocab keeps
    its id), as a JSON dict."""
    tok = Tokenizer.from_str(json.dumps(d))
    tok.add_tokens(tokens)
    return json.loads(tok.to_str())


def llama3_post(root):
    tok = Tokenizer.from_file(str(root / "llama3_8192" / "tokenizer.json"))
    tok.add_special_tokens([AddedToken("<|begin_of_text|>", special=True, normalized=False)])
    bot = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bot)])])
    return json.loads(tok.to_str())


def added_tokens_layout(root):
    d = json.loads((root / "qwen2_4096" / "tokenizer.json").read_text(encoding="utf-8"))
    d["normalizer"] = {"type": "NFC"}
    flags = [  # content, special, lstrip, rstrip, single_word, normalized
        ("<ls>", True, True, False, False, False), ("<rs>", True, False, True, False, False),
        ("<lrs>", False, True, True, False, False), ("word", False, False, False, True, True),
        ("<sw>", True, False, False, True, False), ("cafe\u0301", False, False, False, False, True),
        ("<nn\u0301>", False, False, False, False, True), ("<nn>", False, False, False, False, False),
        ("\u00e9", False, False, False, False, False), ("a b", False, False, False, False, True),
        ("\u00e9!", True, False, False, False, False), ("<sp ace>", True, True, True, False, False)]
    return with_added(d, [AddedToken(c, special=sp, lstrip=l, rstrip=r, single_word=w, normalized=n)
                          for c, sp, l, r, w, n in flags])


def write_hf(root, name, data, strings, seed):
    target = root / name
    target.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2, ensure_ascii=False)
    tok = Tokenizer.from_str(text)  # HF must accept the file as written
    (target / "tokenizer.json").write_text(text + "\n", encoding="utf-8")
    write_jsonl(target / "vectors.jsonl", hf_records(tok, strings))
    specials = [a["id"] for a in data["added_tokens"] if a["special"]] or [0]
    write_jsonl(target / "decode_vectors.jsonl", hf_decode_cases(tok, random.Random("decode:" + name), specials))
    print(f"{name}: {len(strings)} encode vectors")


# ------------------------------------------------------------------ tiktoken (Kimi K3 style)

K3_NAMED = {0: "[BOS]", 1: "[EOS]", 2: "<|end_of_msg|>", 3: "<|open|>", 4: "<|close|>", 5: "<|sep|>",
            6: "<|im_user|>", 7: "<|im_assistant|>", 8: "<|im_system|>", 9: "<|im_middle|>",
            254: "[UNK]", 255: "[PAD]"}  # offsets from the number of base ranks; the rest stay unnamed


def train_kimi_ranks(docs, vocab_size=6000):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(KIMI_TRAIN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer)
    symbols = pre_tokenizers.ByteLevel.alphabet()
    byte_of = {}
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = [b for b in range(256) if b not in kept]
    for b in range(256):
        byte_of[chr(b) if b in kept else chr(256 + others.index(b))] = b
    assert set(symbols) == set(byte_of)
    ranks = {}
    for token, rank in sorted(tok.get_vocab().items(), key=lambda kv: kv[1]):
        ranks[bytes(byte_of[c] for c in token)] = rank
    assert sorted(ranks.values()) == list(range(len(ranks)))
    return ranks


def kimi_chunks(text, max_chars=400_000, max_run=25_000):
    """The pieces tokenization_kimi.py hands to tiktoken one by one: 400k-character chunks, each
    cut so that no run of str.isspace() / non-space characters exceeds 25k."""
    for i in range(0, len(text), max_chars):
        s = text[i:i + max_chars]
        start, run, space = 0, 0, s[0].isspace() if s else False
        for j, ch in enumerate(s):
            now = ch.isspace()
            if now != space:
                run, space = 1, now
            else:
                run += 1
                if run > max_run:
                    yield s[start:j]
                    start, run = j, 1
        yield s[start:]


def kimi_encode(enc, text, allow_special):
    ids = []
    for piece in kimi_chunks(text):
        ids += enc.encode(piece, allowed_special="all") if allow_special else enc.encode(piece, disallowed_special=())
    return ids


def write_kimi(root, docs, strings):
    target = root / "kimi_k3"
    target.mkdir(parents=True, exist_ok=True)
    ranks = train_kimi_ranks(docs)
    base = len(ranks)
    with open(target / "tiktoken.model", "w") as f:
        for b, r in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(f"{base64.b64encode(b).decode()} {r}\n")
    names = {base + k: v for k, v in K3_NAMED.items()}
    decoder = {str(i): {"content": n, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                        "special": True} for i, n in sorted(names.items())}
    config = {"added_tokens_decoder": decoder, "bos_token": "[BOS]", "eos_token": "<|end_of_msg|>",
              "pad_token": "[PAD]", "unk_token": "[UNK]", "tokenizer_class": "TikTokenTokenizer",
              "model_max_length": 1048576}
    (target / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (target / "config.json").write_text(json.dumps({
        "model_type": "kimi_k3", "vocab_size": base + 256, "bos_token_id": base, "eos_token_id": base + 2,
        "pad_token_id": base + 255}, indent=2) + "\n")
    specials = {names.get(i, f"<|reserved_token_{i}|>"): i for i in range(base, base + 256)}
    enc = tiktoken.Encoding(name="kimi_k3_fixture", pat_str=KIMI_PATTERN, mergeable_ranks=ranks,
                            special_tokens=specials)
    k3 = ["<|open|>message role=\"user\"<|sep|>hi <|open|> there<|close|>message<|sep|><|end_of_msg|>",
          "[BOS]<|open|>think<|sep|>", "<|reserved_token_%d|>x<|reserved_token_%d|>" % (base + 20, base + 200),
          "<|open|><|open|>", "<|ope", "|>", "[PAD][UNK]", "\u4e2d<|sep|>\u6587", " <|close|> ", "<|im_user|>"]
    long_cases = ["a" * 25_001 + " " * 25_002 + "b", "\u4e00" * 26_000, " " * 25_000 + "x", "ab" * 13_000,
                  ("x" * 24_999 + " ") * 2]
    recs = []
    for s in strings + k3 + long_cases:
        ids = kimi_encode(enc, s, False)
        recs.append({"text": s, "ids": ids, "ids_special": kimi_encode(enc, s, True),
                     "decoded": enc.decode(ids)})
    write_jsonl(target / "vectors.jsonl", recs)
    rng = random.Random("decode:kimi_k3")
    size = base + 256
    enc_t = lambda s: kimi_encode(enc, s, False)
    cases = [[], [base, base + 2], list(range(base, base + 12)), [base + 255, base + 254, base + 100],
             enc_t("Hello world") + [base + 2], [base + 3] + enc_t("message") + [base + 5]]
    zh = "\u4f60".encode()
    one = lambda bs: [ranks[bytes([x])] for x in bs]
    cases += [one(zh), one(zh[:2]), one(zh[:2]) + enc_t("ok"), one(b"\xff\xfe"), one(b"\xc3") + [base] + one(b"\xa9"),
              one(b"\xed\xa0\x80"), one(b"\xf0\x9f\x98"), one("\U0001F600".encode())]
    cases += [[i] for i in rng.sample(range(size), 12)]
    cases += [rng.sample(range(size), rng.randint(2, 24)) for _ in range(20)]
    recs = []
    for c in cases:
        recs.append({"ids": c, "decoded": enc.decode(c),
                     "decoded_skip_special": enc.decode([i for i in c if i < base])})
    write_jsonl(target / "decode_vectors.jsonl", recs)
    print(f"kimi_k3: {base} base ranks + 256 control ids, {len(strings) + len(k3) + len(long_cases)} encode vectors")


def main(root):
    root = Path(root)
    train, _, held_foreign = split_multilingual()
    strings = all_strings(held_foreign, ["<s>", "</s>", "<unk>", "<sep>", META, "<0x41>", " ", "<ls>", "<rs>", "<lrs>",
                                         "word", "<sw>", "cafe\u0301", "<nn>", "<|im_end|>", "<|endoftext|>"], 7)
    base = train_sentencepiece_bpe(train)
    for name, data in sp_layouts(base).items():
        write_hf(root, name, data, strings, 11)
    write_hf(root, "llama3_post", llama3_post(root), strings, 13)
    write_hf(root, "added_tokens", added_tokens_layout(root), strings, 17)
    write_kimi(root, train, strings)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tokenizer_layouts.py ROOT  (tests/data/tokenizer)")
    main(sys.argv[1])
