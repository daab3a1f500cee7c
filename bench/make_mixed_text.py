#!/usr/bin/env python3
# Writes ~1 MB of deterministic mixed benchmark text (KJV and fortune prose, code-like text,
# numbers, CJK and emoji) to OUT; needs the corpora used by models/reference/train_tokenizers.py.
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models" / "reference"))
from train_tokenizers import fortunes, kjv_verses  # noqa: E402

TARGET_BYTES = 1_000_000
WORDS = ["count", "value", "index", "buffer", "token", "merge", "rank", "node", "left", "right", "size", "data"]
INTL = ["\u4f60\u597d\uff0c\u4e16\u754c\uff01\u4eca\u5929\u5929\u6c14\u5f88\u597d\u3002",
        "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002",
        "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4.",
        "\U0001F600 \U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467",
        "\U0001F1EF\U0001F1F5 \u2764\ufe0f caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe",
        "\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd"]


def code_block(rng):
    name, a, b = rng.choice(WORDS), rng.choice(WORDS), rng.choice(WORDS)
    n = rng.randint(0, 10_000)
    if rng.random() < 0.5:
        return (f"def {name}_{a}({a}, {b}=None):\n    if {b} is None:\n        {b} = {n}\n"
                f"    return [{a}[i] * {b} for i in range(len({a}))]  # {name} {a}\n\n")
    return (f"static int {name}_{a}(const int *{a}, size_t {b}) {{\n    int s = 0x{n:04x};\n"
            f"    for (size_t i = 0; i < {b}; ++i) s += {a}[i] << {n % 7};\n    return s;\n}}\n\n")


def number_block(rng):
    rows = [f"{rng.randint(1, 99999)},{rng.uniform(-1e4, 1e4):.4f},{rng.randint(1900, 2099)}-"
            f"{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d},{rng.randint(0, 10**15)}" for _ in range(5)]
    return "\n".join(rows) + "\n"


def main(out):
    rng = random.Random(7)
    verses, forts = kjv_verses(), fortunes()
    parts, size = [], 0
    while size < TARGET_BYTES:
        kind = rng.random()
        if kind < 0.45:
            i = rng.randrange(len(verses) - 5)
            chunk = "\n".join(verses[i:i + 5]) + "\n"
        elif kind < 0.7:
            chunk = rng.choice(forts) + "\n\n"
        elif kind < 0.85:
            chunk = code_block(rng)
        elif kind < 0.95:
            chunk = number_block(rng)
        else:
            chunk = " ".join(rng.choice(INTL) for _ in range(3)) + "\n"
        parts.append(chunk)
        size += len(chunk.encode("utf-8"))
    Path(out).write_text("".join(parts), encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_mixed_text.py OUT")
    main(sys.argv[1])
