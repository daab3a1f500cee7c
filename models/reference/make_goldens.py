# Writes golden.json (prompt_ids, decode_ids) and golden_logits.npy [48, V] for a model directory.
# Rows 0..31: logits at each prompt position; rows 32+j: logits after feeding decode_ids[j] (teacher forcing).
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stable_latent_moe import load_model  # noqa: E402

PROMPT_LEN, DECODE_LEN = 32, 16


def routing_margin(model, routings):
    """Smallest gap, over tokens and MoE layers, between the K-th largest s+b and the nearest value
    on the other side of the selection boundary. Exact ties at the boundary are skipped over
    (they are resolved by index), so this measures how far the choice is from a rounding flip."""
    K = model.cfg.num_experts_per_tok
    margin = float("inf")
    for layer, r in zip(model.model.layers, routings):
        if r is None:
            continue
        values = (r.scores + layer.mlp.gate.e_score_correction_bias).double()
        for row in values.sort(dim=-1, descending=True).values:
            kth = row[K - 1]
            above, below = row[row > kth], row[row < kth]
            tied_past_k = K < len(row) and row[K] == kth
            gaps = [kth - below.max()] if len(below) else []
            if tied_past_k and len(above):
                gaps.append(above.min() - kth)
            margin = min([margin] + [float(g) for g in gaps])
    return margin


def make_goldens(model_dir, seed=1234, min_margin=1e-4, max_tries=500):
    """Pick ids from seed, seed+1, ... until routing is robust to fp32 rounding; write the goldens."""
    model = load_model(model_dir)
    V = model.cfg.vocab_size
    for attempt in range(max_tries):
        rng = np.random.Generator(np.random.PCG64(seed + attempt))
        ids = rng.integers(0, V, PROMPT_LEN + DECODE_LEN).tolist()
        with torch.no_grad():
            logits, routings = model.forward_with_routing(ids)
        margin = routing_margin(model, routings)
        if margin >= min_margin:
            break
    else:
        raise RuntimeError(f"{model_dir}: no id draw with routing margin >= {min_margin}")
    with open(os.path.join(model_dir, "golden.json"), "w") as f:
        json.dump({"prompt_ids": ids[:PROMPT_LEN], "decode_ids": ids[PROMPT_LEN:]}, f)
        f.write("\n")
    np.save(os.path.join(model_dir, "golden_logits.npy"), logits.numpy().astype(np.float32))
    return seed + attempt, margin


def main():
    p = argparse.ArgumentParser(description="write golden.json and golden_logits.npy")
    p.add_argument("model_dir")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--min-margin", type=float, default=1e-4)
    a = p.parse_args()
    used, margin = make_goldens(a.model_dir, a.seed, a.min_margin)
    print(f"{a.model_dir}: ids seed {used}, routing margin {margin:.3g}")


if __name__ == "__main__":
    main()
