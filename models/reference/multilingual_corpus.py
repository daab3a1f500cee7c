#!/usr/bin/env python3
# Multilingual offline text for the tokenizer fixtures: the KJV/English-fortune corpus of
# train_tokenizers.py plus Chinese (fortunes-zh: Tang and Song poems, Debian sayings), Russian,
# German and Spanish fortunes (fortunes-ru, fortunes-de, fortunes-es). Every 10th item is held out.
import re
from pathlib import Path

from train_tokenizers import split_corpus

FORTUNES = Path("/usr/share/games/fortunes")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _items(path):
    text = path.read_text(encoding="utf-8", errors="strict")
    return [f.strip("\n") for f in text.split("\n%\n") if f.strip()]


def foreign_items(keep_ansi_every=25):
    """Fortunes in zh/ru/de/es, sorted by file; ANSI colour codes kept in every 25th item."""
    items = []
    for name in ("chinese", "tang300", "song100"):
        items += _items(FORTUNES / name)
    for lang in ("ru", "de", "es"):
        for p in sorted((FORTUNES / lang).iterdir()):
            if p.is_file() and not p.is_symlink() and not p.name.endswith((".dat", ".u8")):
                items += _items(p)
    return [it if i % keep_ansi_every == 0 else ANSI.sub("", it) for i, it in enumerate(items)]


def split_multilingual():
    """(train documents, held-out snippets)."""
    train, held = split_corpus()
    foreign = foreign_items()
    train += [f for i, f in enumerate(foreign) if i % 10]
    held_foreign = [f for i, f in enumerate(foreign) if i % 10 == 0]
    return train, held, held_foreign
