#!/usr/bin/env python3
"""Exports a train.py checkpoint as the shipped tiny model directory and checks it with the reference.

  export_tiny.py --work build-tiny --run qb --out models/tiny --tests tests/data/tiny

Writes OUT/{config.json, model.safetensors (BF16 weights, F32 e_score_correction_bias),
tokenizer.json, tokenizer_config.json, generation_config.json, README.md} and
TESTS/heldout.json, after reloading the written directory with stable_latent_moe.load_model
and measuring held-out loss, expert balance (frozen biases vs zero biases) and samples.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import quantile_balancing as qb  # noqa: E402
import safetensors_io  # noqa: E402
from stable_latent_moe import load_model  # noqa: E402
from train_tokenizers import CHATML_TEMPLATE  # noqa: E402

EOT = "<|endoftext|>"
PROMPTS = [
    "Genesis 1\n1 In the beginning",
    "Psalms 23\n1 The LORD is my shepherd;",
    "And Jesus answered and said unto them,",
    "Revelation 22\n1 And he shewed me",
]
GENERATION = {"temperature": 0.8, "top_p": 0.95}


def tokenizer_config(tokenizer_json):
    added = json.loads(open(tokenizer_json, encoding="utf-8").read())["added_tokens"]
    return {
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added},
        "tokenizer_class": "GPT2Tokenizer",
        "bos_token": EOT,
        "eos_token": EOT,
        "pad_token": EOT,
        "unk_token": None,
        "add_bos_token": False,
        "model_max_length": 256,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHATML_TEMPLATE,
    }


def write_json(path, obj, indent=2):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False)
        f.write("\n")


def export(ckpt, work, out):
    config = dict(ckpt["config"])
    if config.get("first_k_dense_replace", 0) == 0:
        config.pop("intermediate_size", None)  # no dense layer
    config["torch_dtype"] = "bfloat16"
    os.makedirs(out, exist_ok=True)
    tensors = {n: t.detach().float().numpy() for n, t in ckpt["state_dict"].items()}
    dtypes = {n: ("F32" if n.endswith("e_score_correction_bias") else "BF16") for n in tensors}
    write_json(os.path.join(out, "config.json"), config)
    safetensors_io.save_model(out, tensors, dtypes)
    shutil.copyfile(os.path.join(work, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    write_json(os.path.join(out, "tokenizer_config.json"), tokenizer_config(os.path.join(out, "tokenizer.json")))
    write_json(os.path.join(out, "generation_config.json"),
               {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"],
                "pad_token_id": config["eos_token_id"], "do_sample": True, **GENERATION})
    return config


@torch.no_grad()
def sequence_losses(model, seqs):
    """Mean next-token cross-entropy per sequence (each sequence on its own, positions 0..T-1)."""
    out = []
    for ids in seqs:
        ids = torch.as_tensor(ids, dtype=torch.long)
        logits = model(ids[:-1])
        out.append(float(F.cross_entropy(logits, ids[1:])))
    return out


@torch.no_grad()
def load_balance(model, seqs, zero_bias=False):
    """Per MoE layer max/mean tokens per expert over all tokens of seqs."""
    saved = {}
    if zero_bias:
        for i, layer in enumerate(model.model.layers):
            if layer.is_moe:
                saved[i] = layer.mlp.gate.e_score_correction_bias.clone()
                layer.mlp.gate.e_score_correction_bias.zero_()
    n = model.cfg.n_routed_experts
    counts = {}
    for ids in seqs:
        for i, r in enumerate(model.router_trace(torch.as_tensor(ids, dtype=torch.long))):
            if r is not None:
                counts[i] = counts.get(i, 0) + torch.bincount(r.selected.reshape(-1), minlength=n)
    for i, b in saved.items():
        model.model.layers[i].mlp.gate.e_score_correction_bias.copy_(b)
    return {i: (float(c.max() / c.float().mean()), float(c.min() / c.float().mean()), int((c == 0).sum()))
            for i, c in counts.items()}


def top_p_sample(logits, temperature, top_p, gen):
    probs = torch.softmax(logits / temperature, dim=-1)
    sorted_p, order = torch.sort(probs, descending=True)
    keep = (sorted_p.cumsum(0) - sorted_p) < top_p
    sorted_p = sorted_p * keep
    choice = torch.multinomial(sorted_p / sorted_p.sum(), 1, generator=gen)
    return int(order[choice])


@torch.no_grad()
def generate(model, ids, max_new, eos, sample=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ids = list(ids)
    ctx = model.cfg.max_position_embeddings
    out = []
    for _ in range(max_new):
        logits = model(torch.tensor(ids[-ctx:]))[-1]
        nxt = (top_p_sample(logits, GENERATION["temperature"], GENERATION["top_p"], gen) if sample
               else int(logits.argmax()))
        ids.append(nxt)
        out.append(nxt)
        if nxt == eos:
            break
    return out


def main():
    torch.set_num_threads(1)
    p = argparse.ArgumentParser(description="export the tiny model and check it with the reference")
    p.add_argument("--work", default="build-tiny")
    p.add_argument("--run", default="qb")
    p.add_argument("--out", default="models/tiny")
    p.add_argument("--tests", default="tests/data/tiny")
    p.add_argument("--compare", nargs="*", default=[], help="other runs whose summaries the card cites")
    a = p.parse_args()
    from tokenizers import Tokenizer

    ckpt = torch.load(os.path.join(a.work, a.run, "model.pt"))
    summary = dict(ckpt["summary"])
    with open(os.path.join(a.work, a.run, "log.jsonl")) as f:
        summary["final_train_loss"] = json.loads(f.read().strip().splitlines()[-1])["loss_avg"]
    with open(os.path.join(a.work, "data.json")) as f:
        data = json.load(f)
    config = export(ckpt, a.work, a.out)
    tok = Tokenizer.from_file(os.path.join(a.out, "tokenizer.json"))
    eos = config["eos_token_id"]

    model = load_model(a.out)       # the exported BF16 weights, upcast to fp32
    model.set_vectorized(True)
    held = np.load(os.path.join(a.work, "heldout_ids.npy")).astype(np.int64)
    ctx = summary["context"]
    windows = [held[i:i + ctx + 1].tolist() for i in range(0, held.size - ctx, ctx)]
    losses = sequence_losses(model, windows)
    held_loss = float(np.mean(losses))
    print(f"held-out loss: exported BF16 {held_loss:.4f}, trained fp32 {summary['heldout_loss']:.4f}")
    assert abs(held_loss - summary["heldout_loss"]) < 0.05, "exported model disagrees with the trained one"
    inputs = [w[:-1] for w in windows]  # the 256 input positions of each window
    frozen = load_balance(model, inputs)
    zero = load_balance(model, inputs, zero_bias=True)
    biases = {i: model.model.layers[i].mlp.gate.e_score_correction_bias.clone() for i in frozen}

    # Calibration: fit on the even held-out windows (calibrate(), iters 10, eta 1), measure on the
    # odd ones (interleaved, so both halves mix the same books); then restore the frozen biases.
    fit, test = inputs[0::2], inputs[1::2]
    calib = {"trained_biases": load_balance(model, test)}
    qb.calibrate(model, fit)
    calib["calibrated"] = load_balance(model, test)
    calib["calibrated_in_sample"] = load_balance(model, fit)
    calib["calibrated_loss"] = float(np.mean(sequence_losses(model, windows[1::2])))
    calib["frozen_loss"] = float(np.mean(losses[1::2]))
    calib["windows"] = (len(fit), len(test))
    for i, b in biases.items():
        model.model.layers[i].mlp.gate.e_score_correction_bias.copy_(b)

    # Test vector: a few held-out sequences and the exported model's loss on them.
    starts = [0, held.size // 4, held.size // 2, 3 * held.size // 4]
    seqs = [held[s:s + 64].tolist() for s in starts]
    per_seq = sequence_losses(model, seqs)
    write_json(os.path.join(a.tests, "heldout.json"), {
        "model": "models/tiny",
        "description": "held-out KJV token sequences (shipped tokenizer); loss = mean next-token "
                       "cross-entropy (nats) of the exported BF16 model, float32 compute, "
                       "each sequence on its own at positions 0..63 (63 predictions each)",
        "ids": seqs, "texts": [tok.decode(s, skip_special_tokens=False) for s in seqs],
        "loss": float(np.mean(per_seq)), "per_sequence_loss": per_seq}, indent=1)

    samples = []
    for i, prompt in enumerate(PROMPTS):
        pids = tok.encode(prompt).ids
        g = generate(model, pids, 48, eos)
        s = generate(model, pids, 48, eos, sample=True, seed=i)
        samples.append((prompt, pids, tok.decode(g, skip_special_tokens=False),
                        tok.decode(s, skip_special_tokens=False)))
        print(repr(prompt), "->", repr(samples[-1][2]))

    compare = {}
    for run in a.compare:
        with open(os.path.join(a.work, run, "summary.json")) as f:
            compare[run] = json.load(f)
    write_card(a.out, config, summary, data, held_loss, len(windows), frozen, zero, biases, samples, compare,
               calib)
    sizes = {f: os.path.getsize(os.path.join(a.out, f)) for f in sorted(os.listdir(a.out))}
    print(json.dumps(sizes), "total", sum(sizes.values()))
    assert sum(sizes.values()) <= 30 * 1024 * 1024


def param_counts(config):
    d, v, L = config["hidden_size"], config["vocab_size"], config["num_hidden_layers"]
    H, Hkv, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    N, K, f, dl = (config["n_routed_experts"], config["num_experts_per_tok"],
                   config["moe_intermediate_size"], config["moe_latent_size"])
    fs = config["shared_expert_intermediate_size"]
    attn = d * H * hd * 2 + d * Hkv * hd * 2 + 2 * hd
    expert = 3 * f * dl
    moe_fixed = N * d + 2 * d * dl + dl + 3 * d * fs
    per_layer_total = attn + 2 * d + moe_fixed + N * expert
    per_layer_active = attn + 2 * d + moe_fixed + K * expert
    emb = v * d * (1 if config["tie_word_embeddings"] else 2)
    return emb + L * per_layer_total + d, emb + L * per_layer_active + d


def write_card(out, config, summary, data, held_loss, n_windows, frozen, zero, biases, samples, compare,
               calib):
    total, active = param_counts(config)
    size = os.path.getsize(os.path.join(out, "model.safetensors"))
    lines = []
    w = lines.append
    w("# tiny: a trained Stable LatentMoE demo model\n")
    w("A 9M-parameter Stable LatentMoE language model trained for about a quarter of an hour on one "
      "CPU thread on the King James Bible, with Quantile Balancing biases. It is the model "
      "LatentServe ships for demos, examples and end-to-end tests: small enough to load instantly, "
      "trained enough that its text is recognisably KJV English. It is not a useful "
      "general-purpose model.\n")
    w("## Architecture\n")
    w("| key | value |\n| --- | --- |")
    rows = [
        ("architecture", "`StableLatentMoeForCausalLM` (docs/formats.md)"),
        ("layers", f"{config['num_hidden_layers']}, all MoE (`first_k_dense_replace` = {config['first_k_dense_replace']})"),
        ("hidden size d", config["hidden_size"]),
        ("attention", f"GQA, {config['num_attention_heads']} query heads, {config['num_key_value_heads']} KV heads, "
                      f"head_dim {config['head_dim']}, qk_norm, RoPE theta {config['rope_theta']:g}"),
        ("context", config["max_position_embeddings"]),
        ("routed experts", f"{config['n_routed_experts']}, top-{config['num_experts_per_tok']}, SiTU-GLU, "
                           f"width {config['moe_intermediate_size']}, in a latent of {config['moe_latent_size']}"),
        ("shared expert", f"{config['n_shared_experts']}, SiTU-GLU, width {config['shared_expert_intermediate_size']} at full d"),
        ("router", f"{config['scoring_func']} scores, `norm_topk_prob` {str(config['norm_topk_prob']).lower()}, "
                   f"`routed_scaling_factor` {config['routed_scaling_factor']:g}, F32 `e_score_correction_bias`"),
        ("expert output norm", "RMSNorm on the latent expert sum (`expert_output_norm` true)"),
        ("vocabulary", f"{config['vocab_size']}, byte-level BPE (GPT-2 pre-tokenizer)"),
        ("embeddings", "tied (`tie_word_embeddings` true)" if config["tie_word_embeddings"] else "untied"),
        ("parameters", f"{total / 1e6:.2f} M total, {active / 1e6:.2f} M active per token"),
        ("weights", f"BF16 ({size / 2**20:.1f} MiB `model.safetensors`), biases F32"),
        ("bos / eos", f"`<|endoftext|>` = {config['bos_token_id']} / {config['eos_token_id']}"),
    ]
    for k, v in rows:
        w(f"| {k} | {v} |")
    w("")
    w("Why these choices: every layer is MoE (`first_k_dense_replace` 0) so that all four layers "
      "exercise routing and balancing; dense layers are already covered by the test fixtures. "
      "`routed_scaling_factor` is 1: with the RMSNorm on the expert sum, a constant scale on the "
      "combine weights cancels (up to `rms_norm_eps`), so any other value would be cosmetic. "
      "Embeddings are tied: at this data size the input and output embeddings learn from the same "
      "signal, and the file stays near 17 MiB.\n")
    w("## Data and training\n")
    w(f"- Text: the KJV Bible from the Debian `bible-kjv` reader (`bible -l100000 Gen1:1-Rev22:21`), "
      f"one document per chapter: the chapter title line, then one `\"<verse> <text>\"` line per verse; "
      f"documents are joined with `<|endoftext|>` after each chapter, so a chapter ends with id 0.")
    w(f"- Held out: the last {data['heldout_chapters']} chapters ({data['heldout_first']} to Revelation 22, "
      f"{data['heldout_tokens']} tokens, about 2% of the text); training on the first "
      f"{data['train_chapters']} chapters ({data['train_tokens']} tokens).")
    w("- Tokenizer: byte-level BPE trained on the training chapters with Hugging Face `tokenizers` "
      "0.23.3, the `gpt2_4096` recipe of `models/reference/train_tokenizers.py` (GPT-2 pre-tokenizer, "
      "4096 tokens, `<|endoftext|>`=0, `<|im_start|>`=1, `<|im_end|>`=2, merges in `\"a b\"` form).")
    w(f"- Training (`models/reference/train.py`, one CPU thread, fp32): {summary['steps']} steps of "
      f"{summary['batch']} x {summary['context']} tokens = {summary['tokens_seen']:,} tokens "
      f"({summary['epochs']:.2f} epochs), AdamW (betas 0.9/0.95, weight decay 0.1 on matrices except "
      f"the router), peak LR {summary['lr']:g}, 30 warm-up steps then cosine to 10%, gradient clip 1.0, "
      f"seed {summary['seed']}, {summary['wall_s'] / 60:.1f} minutes wall.")
    w(f"- Balancing: Quantile Balancing (`docs/quantile-balancing.md`): after every batch each layer's "
      f"biases move a fraction eta = {summary['eta']:g} towards the K/N quantile of that batch's "
      f"thresholds ({summary['num_bins']}-bin histogram over [{summary['range'][0]:g}, "
      f"{summary['range'][1]:g}]); no auxiliary loss. The biases are frozen in the checkpoint.\n")
    w("## Results\n")
    w(f"| figure | value |\n| --- | --- |")
    w(f"| final training loss (mean of the last logged steps) | {summary.get('final_train_loss', float('nan')):.3f} nats/token |")
    w(f"| held-out loss, trained fp32 model | {summary['heldout_loss']:.3f} nats/token |")
    w(f"| held-out loss, this BF16 export (reference loader) | {held_loss:.3f} nats/token "
      f"(perplexity {np.exp(held_loss):.1f}) over {n_windows} windows of {summary['context']} |")
    w("")
    w("Expert load on the held-out text (all tokens; max/mean = busiest expert's tokens over the "
      "mean, 1.0 is perfect; min/mean and idle experts show the other end), PyTorch reference on "
      "the exported weights:\n")
    w("| layer | frozen biases: max/mean | min/mean | idle experts | biases zero: max/mean | min/mean | idle experts | bias range |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for i in sorted(frozen):
        fz, zr, b = frozen[i], zero[i], biases[i]
        w(f"| {i} | {fz[0]:.2f} | {fz[1]:.2f} | {fz[2]} | {zr[0]:.2f} | {zr[1]:.2f} | {zr[2]} | "
          f"[{float(b.min()):.3f}, {float(b.max()):.3f}] |")
    w("")
    fit, test = calib["windows"]
    w(f"Re-fitting the biases with the calibration procedure (`quantile_balancing.calibrate`, 10 "
      f"iterations, eta 1) on the {fit} even-numbered held-out windows and measuring on the {test} "
      f"odd-numbered ones: max/mean per layer " +
      ", ".join(f"{calib['trained_biases'][i][0]:.2f} -> {calib['calibrated'][i][0]:.2f}" for i in sorted(frozen)) +
      " (trained biases -> calibrated; on the fitted windows themselves " +
      ", ".join(f"{calib['calibrated_in_sample'][i][0]:.2f}" for i in sorted(frozen)) +
      f"); loss on the measured windows {calib['frozen_loss']:.3f} -> {calib['calibrated_loss']:.3f}. "
      f"For scale: perfectly uniform random top-4 routing of that many tokens gives about 1.09. "
      f"The shipped biases are the trained ones.\n")
    if compare:
        w("Same steps and seed without Quantile Balancing (see `docs/quantile-balancing.md`):\n")
        w("| run | held-out loss | held-out max/mean per layer |\n| --- | --- | --- |")
        for run, s in [("qb (this model)", summary)] + list(compare.items()):
            per = ", ".join(f"{v:.2f}" for v in s["heldout_max_over_mean"].values())
            w(f"| {run} | {s['heldout_loss']:.3f} | {per} |")
        w("")
    w("## Samples (PyTorch reference, exported weights)\n")
    w(f"Greedy, and sampled with temperature {GENERATION['temperature']}, top-p {GENERATION['top_p']} "
      "(seed = prompt index, `torch.multinomial`), at most 48 new tokens, stopping at `<|endoftext|>`.\n")
    for prompt, pids, greedy, sampled in samples:
        w(f"Prompt `{json.dumps(prompt)}` (ids {pids}):\n")
        w("- greedy:\n\n```\n" + prompt + greedy + "\n```")
        w("- sampled:\n\n```\n" + prompt + sampled + "\n```\n")
    w("## Reproduce\n")
    w("From a clean checkout (Debian `python3` with `torch`, `numpy`, and `pip install "
      "tokenizers==0.23.3`; `apt-get install bible-kjv`):\n")
    w("    bash models/reference/train_tiny.sh\n")
    w("It trains the tokenizer, runs the Quantile Balancing training, exports this directory and "
      "regenerates `tests/data/tiny/`. The comparison runs (auxiliary loss, no balancing) and "
      "the plot in `docs/quantile-balancing.md`:\n")
    w("    bash models/reference/train_tiny.sh --compare\n")
    w("Training is deterministic for a given machine and BLAS; another BLAS changes the last digits "
      "and, through the routing, the samples. With Debian's `libopenblas0-serial` installed the "
      "script puts it first on the library path (about 6 times faster than the reference BLAS).")
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
