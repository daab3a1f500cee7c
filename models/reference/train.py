#!/usr/bin/env python3
"""Trains the tiny Stable LatentMoE demo model on the KJV Bible (offline, CPU, one thread).

  train.py tokenizer --work DIR          KJV chapters -> byte-level BPE (gpt2_4096 style) + token ids
  train.py train --work DIR --run NAME --balance {qb,aux,none} [--steps S] [--minutes M]
  train.py plot --work DIR --runs qb aux none --out PNG [--table MD]
  train.py check                         batched training forward == reference forward

The training forward is a batched re-statement of the reference forward (stable_latent_moe.py):
same modules, same parameters, same math; routed experts run once per expert over the rows routed
to them (tokens sorted by expert id). The state dict keeps the reference tensor names, so a
checkpoint loads into StableLatentMoeForCausalLM and gives the same logits.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import quantile_balancing as qb  # noqa: E402
from stable_latent_moe import (Config, StableLatentMoeForCausalLM, apply_rope,  # noqa: E402
                               rope_cos_sin, stable_topk)

EOT = "<|endoftext|>"
HELDOUT_FRACTION = 0.02

# The tiny model (the keys of docs/formats.md). See models/tiny/README.md for the reasons.
TINY_CONFIG = {
    "architectures": ["StableLatentMoeForCausalLM"], "model_type": "stable_latent_moe",
    "vocab_size": 4096, "hidden_size": 256, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 256,
    "qk_norm": True, "tie_word_embeddings": True,
    "first_k_dense_replace": 0, "intermediate_size": 0,
    "n_routed_experts": 64, "num_experts_per_tok": 4, "moe_intermediate_size": 128,
    "moe_latent_size": 64, "n_shared_experts": 1, "shared_expert_intermediate_size": 256,
    "hidden_act": "situ", "scoring_func": "sigmoid", "norm_topk_prob": True,
    "routed_scaling_factor": 1.0, "expert_output_norm": True,
    "bos_token_id": 0, "eos_token_id": 0,
}


# ---------------------------------------------------------------- data


def kjv_chapters():
    """[(title, text)] per chapter in canonical order: "Genesis 1\\n1 In the beginning ...\\n2 ..."."""
    out = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], check=True,
                         capture_output=True, text=True, cwd="/").stdout
    chapters, title, verses = [], None, []
    for line in out.splitlines():
        if line.startswith("  ") and line.strip():
            verses.append(line.strip())
        elif line.strip():
            if title is not None:
                chapters.append((title, verses))
            title, verses = line.strip(), []
    chapters.append((title, verses))
    return [(t, t + "\n" + "\n".join(v) + "\n") for t, v in chapters]


def split_chapters(chapters):
    """(train, held-out): the held-out part is the last chapters holding >= 2% of the characters."""
    total = sum(len(text) for _, text in chapters)
    cut, acc = len(chapters), 0
    while acc < HELDOUT_FRACTION * total:
        cut -= 1
        acc += len(chapters[cut][1])
    return chapters[:cut], chapters[cut:]


def encode_stream(tok, chapters):
    """All chapters as one id stream, each chapter followed by <|endoftext|>."""
    eot = tok.token_to_id(EOT)
    ids = []
    for enc in tok.encode_batch([text for _, text in chapters]):
        ids.extend(enc.ids)
        ids.append(eot)
    return np.asarray(ids, dtype=np.int32)


def cmd_tokenizer(a):
    import train_tokenizers as tt  # needs Hugging Face `tokenizers`
    from tokenizers import Tokenizer
    os.makedirs(a.work, exist_ok=True)
    chapters = kjv_chapters()
    train, held = split_chapters(chapters)
    tok = tt.build(tt.GPT2_PATTERN, 4096, [], False, [text for _, text in train])
    text = tt.to_string_merges(tok.to_str(pretty=True))
    tok = Tokenizer.from_str(text)
    assert tok.get_vocab_size() == 4096 and tok.token_to_id(EOT) == 0
    with open(os.path.join(a.work, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    train_ids, held_ids = encode_stream(tok, train), encode_stream(tok, held)
    np.save(os.path.join(a.work, "train_ids.npy"), train_ids)
    np.save(os.path.join(a.work, "heldout_ids.npy"), held_ids)
    meta = {"train_chapters": len(train), "heldout_chapters": len(held),
            "heldout_first": held[0][0], "train_tokens": int(train_ids.size),
            "heldout_tokens": int(held_ids.size),
            "train_chars": sum(len(t) for _, t in train), "heldout_chars": sum(len(t) for _, t in held)}
    with open(os.path.join(a.work, "data.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(json.dumps(meta))


def windows(stream, ctx):
    """Non-overlapping windows of ctx + 1 ids (inputs ids[:-1], targets ids[1:])."""
    n = (stream.size - 1) // ctx
    idx = np.arange(n)[:, None] * ctx + np.arange(ctx + 1)[None, :]
    return torch.from_numpy(stream[idx].astype(np.int64))


# ---------------------------------------------------------------- model: batched training forward


class TrainableStableLatentMoe(StableLatentMoeForCausalLM):
    """The reference module with a batched forward over [B, T] ids (same parameters and math)."""

    def __init__(self, cfg: Config):
        super().__init__(cfg)
        cos, sin = rope_cos_sin(torch.arange(cfg.max_position_embeddings), cfg.head_dim, cfg.rope_theta)
        self._cos, self._sin = cos, sin

    def init_weights(self, seed):
        cfg = self.cfg
        g = torch.Generator().manual_seed(seed)
        depth_scale = 1.0 / math.sqrt(2 * cfg.num_hidden_layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                elif name == "model.embed_tokens.weight" or name == "lm_head.weight":
                    p.normal_(0.0, 0.05, generator=g)
                elif name.endswith("mlp.gate.weight"):
                    p.normal_(0.0, 0.5 / math.sqrt(p.shape[1]), generator=g)
                else:
                    std = 1.0 / math.sqrt(p.shape[1])
                    if any(name.endswith(s) for s in ("o_proj.weight", "latent_up_proj.weight",
                                                      "shared_experts.down_proj.weight")) \
                            or (name.endswith("mlp.down_proj.weight")):
                        std *= depth_scale
                    p.normal_(0.0, std, generator=g)
            for layer in self.model.layers:
                if layer.is_moe:
                    layer.mlp.gate.e_score_correction_bias.zero_()

    def attention(self, attn, x):  # x [B, T, d]
        B, T, _ = x.shape
        q = attn.q_proj(x).view(B, T, attn.H, attn.hd)
        k = attn.k_proj(x).view(B, T, attn.Hkv, attn.hd)
        v = attn.v_proj(x).view(B, T, attn.Hkv, attn.hd)
        if attn.qk_norm:
            q, k = attn.q_norm(q), attn.k_norm(k)
        cos, sin = self._cos[:T], self._sin[:T]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        group = attn.H // attn.Hkv
        q = q.transpose(1, 2)                                             # [B, H, T, hd]
        k = k.repeat_interleave(group, dim=2).transpose(1, 2)
        v = v.repeat_interleave(group, dim=2).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(attn.hd)          # [B, H, T, T]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        probs = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(B, T, attn.H * attn.hd)
        return attn.o_proj(out)

    @staticmethod
    def grouped_experts(mlp, z, routing):
        """c[t] = sum_k w[t,k] * expert_{e[t,k]}(z[t]) with the rows sorted by expert id."""
        n, k = mlp.cfg.n_routed_experts, routing.selected.shape[1]
        flat = routing.selected.reshape(-1)
        order = torch.sort(flat, stable=True).indices
        rows = order // k
        counts = torch.bincount(flat, minlength=n).tolist()
        zs = z[rows]
        outs = [mlp.experts[e](chunk) for e, chunk in enumerate(zs.split(counts)) if counts[e]]
        y = torch.cat(outs, dim=0) * routing.weights.reshape(-1)[order, None]
        return torch.zeros_like(z).index_add_(0, rows, y)

    def moe(self, mlp, h):  # h [M, d]
        routing = mlp.gate(h)
        z = mlp.latent_down_proj(h) if mlp.cfg.moe_latent_size else h
        c = self.grouped_experts(mlp, z, routing)
        if mlp.cfg.expert_output_norm:
            c = mlp.latent_norm(c)
        out = mlp.latent_up_proj(c) if mlp.cfg.moe_latent_size else c
        if mlp.cfg.n_shared_experts > 0:
            out = out + mlp.shared_experts(h)
        return out, routing

    def forward_batch(self, ids):
        """ids [B, T] -> (logits [B, T, V], [Routing over B*T tokens or None per layer])."""
        B, T = ids.shape
        x = self.model.embed_tokens(ids).float()
        routings = []
        for layer in self.model.layers:
            x = x + self.attention(layer.self_attn, layer.input_layernorm(x))
            h = layer.post_attention_layernorm(x)
            if layer.is_moe:
                out, routing = self.moe(layer.mlp, h.reshape(B * T, -1))
                x = x + out.view(B, T, -1)
                routings.append(routing)
            else:
                x = x + layer.mlp(h)
                routings.append(None)
        x = self.model.norm(x)
        head = self.model.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight
        return x @ head.float().t(), routings


def aux_balance_loss(routing, n, k):
    """Switch / DeepSeek-style batch balance loss: N * sum_e f_e * P_e with f_e = share of the T*K
    routed slots that went to e and P_e = mean over tokens of the token-normalised score of e."""
    t = routing.scores.shape[0]
    f = torch.bincount(routing.selected.reshape(-1), minlength=n).float() / (t * k)
    p = (routing.scores / routing.scores.sum(dim=-1, keepdim=True)).mean(dim=0)
    return n * (f * p).sum()


def sequence_balance_loss(routing, batch, n, k):
    """DeepSeek-V3's complementary sequence-wise balance loss: the batch loss above taken within
    each sequence (f_e and P_e over that sequence's tokens) and averaged over the sequences. 1.0
    when every sequence spreads its tokens evenly; it pushes the router, not the biases, to balance
    any stretch of text, which the biases' batch-level balance cannot (a text that wants other
    experts than the training batches' mix)."""
    t = routing.scores.shape[0] // batch
    sel = routing.selected.reshape(batch, t * k)
    f = torch.zeros(batch, n).scatter_add_(1, sel, torch.ones_like(sel, dtype=torch.float)) / (t * k)
    s = routing.scores.reshape(batch, t, n)
    p = (s / s.sum(dim=-1, keepdim=True)).mean(dim=1)
    return n * (f * p).sum(dim=1).mean()


def max_over_mean(selected, n):
    load = torch.bincount(selected.reshape(-1), minlength=n).float()
    return float(load.max() / load.mean())


@torch.no_grad()
def evaluate(model, data, batch=16):
    """Mean next-token cross-entropy over [S, ctx+1] windows, and per-layer max/mean load."""
    model.eval()
    total, count, loads = 0.0, 0, {}
    n = model.cfg.n_routed_experts
    for i in range(0, data.shape[0], batch):
        chunk = data[i:i + batch]
        logits, routings = model.forward_batch(chunk[:, :-1])
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1),
                                       reduction="sum"))
        count += chunk[:, 1:].numel()
        for l, r in enumerate(routings):
            if r is not None:
                loads[l] = loads.get(l, 0) + torch.bincount(r.selected.reshape(-1), minlength=n)
    model.train()
    return total / count, {l: float(c.max() / c.float().mean()) for l, c in loads.items()}


def lr_at(step, total, peak, warmup, floor=0.1):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


def cmd_train(a):
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    config = {**TINY_CONFIG, **json.loads(a.config)}
    cfg = Config.from_dict(config)
    model = TrainableStableLatentMoe(cfg)
    model.init_weights(a.seed)
    model.train()
    n, k, ctx = cfg.n_routed_experts, cfg.num_experts_per_tok, a.context
    train = windows(np.load(os.path.join(a.work, "train_ids.npy")), ctx)
    held = windows(np.load(os.path.join(a.work, "heldout_ids.npy")), ctx)
    router = [p for nm, p in model.named_parameters() if nm.endswith("mlp.gate.weight")]
    decay = [p for nm, p in model.named_parameters() if p.dim() >= 2 and not nm.endswith("mlp.gate.weight")]
    no_decay = [p for nm, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay, "lr_scale": 1.0},
                             {"params": no_decay, "weight_decay": 0.0, "lr_scale": 1.0},
                             {"params": router, "weight_decay": 0.0, "lr_scale": a.router_lr_scale}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    moe_layers = [i for i, layer in enumerate(model.model.layers) if layer.is_moe]
    run_dir = os.path.join(a.work, a.run)
    os.makedirs(run_dir, exist_ok=True)
    log = open(os.path.join(run_dir, "log.jsonl"), "w")
    rng = np.random.Generator(np.random.PCG64(a.seed))
    perm, pos, epoch = rng.permutation(train.shape[0]), 0, 0
    start, step = time.time(), 0
    acc_loss, acc_n, acc_load = 0.0, 0, {l: 0.0 for l in moe_layers}
    print(f"[{a.run}] params {sum(p.numel() for p in model.parameters())} train windows "
          f"{train.shape[0]} held-out windows {held.shape[0]}", flush=True)
    while step < a.steps and (time.time() - start) < a.minutes * 60:
        if pos + a.batch > perm.size:
            perm, pos, epoch = rng.permutation(train.shape[0]), 0, epoch + 1
        batch = train[perm[pos:pos + a.batch]]
        pos += a.batch
        lr = lr_at(step, a.steps, a.lr, a.warmup)
        for group in opt.param_groups:
            group["lr"] = lr * group["lr_scale"]
        logits, routings = model.forward_batch(batch[:, :-1])
        ce = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), batch[:, 1:].reshape(-1))
        loss = ce
        aux = torch.zeros(())
        if a.balance == "aux":
            aux = sum(aux_balance_loss(routings[l], n, k) for l in moe_layers)
            loss = loss + a.aux_coef * aux
        elif a.seq_aux_coef > 0:
            aux = sum(sequence_balance_loss(routings[l], batch.shape[0], n, k) for l in moe_layers)
            loss = loss + a.seq_aux_coef * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        loads = {l: max_over_mean(routings[l].selected, n) for l in moe_layers}
        if a.balance == "qb":  # this batch's scores set the biases that route the next batch
            with torch.no_grad():
                for l in moe_layers:
                    gate = model.model.layers[l].mlp.gate
                    gate.e_score_correction_bias.copy_(qb.estimator_update(
                        routings[l].scores.detach(), gate.e_score_correction_bias, k, a.eta,
                        a.num_bins, tuple(a.range)))
        step += 1
        acc_loss += float(ce)
        acc_n += 1
        for l in moe_layers:
            acc_load[l] += loads[l]
        if step % a.log_every == 0 or step == a.steps:
            rec = {"step": step, "tokens": step * a.batch * ctx, "elapsed_s": round(time.time() - start, 2),
                   "lr": lr, "loss": float(ce), "loss_avg": acc_loss / acc_n, "aux": float(aux),
                   "grad_norm": float(gnorm), "epoch": epoch,
                   "max_over_mean": {str(l): loads[l] for l in moe_layers},
                   "max_over_mean_avg": {str(l): acc_load[l] / acc_n for l in moe_layers}}
            if a.balance == "qb":
                rec["bias_range"] = {str(l): [float(model.model.layers[l].mlp.gate.e_score_correction_bias.min()),
                                              float(model.model.layers[l].mlp.gate.e_score_correction_bias.max())]
                                     for l in moe_layers}
            if a.eval_every and step % a.eval_every == 0:
                rec["heldout_loss"], rec["heldout_max_over_mean"] = evaluate(model, held)
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print(f"[{a.run}] step {step} loss {rec['loss_avg']:.4f} load "
                  f"{[round(v, 2) for v in rec['max_over_mean_avg'].values()]} "
                  f"{rec['elapsed_s']:.0f}s", flush=True)
            acc_loss, acc_n, acc_load = 0.0, 0, {l: 0.0 for l in moe_layers}
    wall = time.time() - start
    held_loss, held_load = evaluate(model, held)
    last = read_log(os.path.join(run_dir, "log.jsonl"))[-1:]
    summary = {"run": a.run, "balance": a.balance, "steps": step, "planned_steps": a.steps,
               "final_train_loss": last[0]["loss_avg"] if last else None,
               "wall_s": round(wall, 1), "tokens_seen": step * a.batch * ctx, "batch": a.batch,
               "context": ctx, "lr": a.lr, "seed": a.seed, "eta": a.eta, "aux_coef": a.aux_coef,
               "seq_aux_coef": a.seq_aux_coef,
               "num_bins": a.num_bins, "range": list(a.range), "epochs": epoch + pos / train.shape[0],
               "heldout_loss": held_loss, "heldout_max_over_mean": {str(l): v for l, v in held_load.items()},
               "config": config}
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    torch.save({"config": config, "state_dict": model.state_dict(), "summary": summary},
               os.path.join(run_dir, "model.pt"))
    print(json.dumps(summary), flush=True)


# ---------------------------------------------------------------- plot and table


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cmd_plot(a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    rows = []
    for run in a.runs:
        log = read_log(os.path.join(a.work, run, "log.jsonl"))
        with open(os.path.join(a.work, run, "summary.json")) as f:
            summary = json.load(f)
        steps = [r["step"] for r in log]
        axes[0].plot(steps, [r["loss_avg"] for r in log], label=run)
        mean_load = [np.mean(list(r["max_over_mean_avg"].values())) for r in log]
        worst = [max(r["max_over_mean_avg"].values()) for r in log]
        line, = axes[1].plot(steps, mean_load, label=f"{run}: mean over layers")
        axes[1].plot(steps, worst, linestyle=":", color=line.get_color(), label=f"{run}: worst layer")
        last = log[-1]["max_over_mean"]
        rows.append((run, summary["steps"], log[-1]["loss_avg"], summary["heldout_loss"],
                     float(np.mean(list(last.values()))), max(last.items(), key=lambda kv: kv[1]),
                     summary["heldout_max_over_mean"]))
    axes[0].set_xlabel("step"); axes[0].set_ylabel("train cross-entropy (nats/token)")
    axes[0].set_title("training loss"); axes[0].legend(); axes[0].grid(alpha=0.3)
    axes[1].set_xlabel("step"); axes[1].set_ylabel("max / mean tokens per expert")
    axes[1].set_title("expert load per batch (64 experts, top-4)"); axes[1].set_yscale("log")
    axes[1].legend(fontsize=8); axes[1].grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    table = ["| run | steps | final train loss | held-out loss | max/mean load, mean over layers (last batch) "
             "| worst layer (last batch) | held-out max/mean per layer |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for run, steps, tl, hl, ml, (wl, wv), hml in rows:
        per = ", ".join(f"{v:.2f}" for v in hml.values())
        table.append(f"| {run} | {steps} | {tl:.3f} | {hl:.3f} | {ml:.2f} | layer {wl}: {wv:.2f} | {per} |")
    text = "\n".join(table) + "\n"
    print(text)
    if a.table:
        with open(a.table, "w") as f:
            f.write(text)


def cmd_check(a):
    """The batched training forward against the reference per-sequence forward (random weights)."""
    torch.set_num_threads(1)
    cfg = Config.from_dict(TINY_CONFIG)
    model = TrainableStableLatentMoe(cfg)
    model.init_weights(0)
    g = torch.Generator().manual_seed(1)
    for layer in model.model.layers:
        if layer.is_moe:
            layer.mlp.gate.e_score_correction_bias.normal_(0.0, 0.1, generator=g)
    ids = torch.randint(0, cfg.vocab_size, (2, 48), generator=g)
    with torch.no_grad():
        logits, routings = model.forward_batch(ids)
        model.set_vectorized(True)
        for b in range(ids.shape[0]):
            ref_logits, ref_routings = model.forward_with_routing(ids[b])
            diff = float((ref_logits - logits[b]).abs().max())
            same = all(torch.equal(r.selected, routings[l].selected.view(ids.shape[0], -1, r.selected.shape[1])[b])
                       for l, r in enumerate(ref_routings) if r is not None)
            print(f"sequence {b}: max |logit diff| {diff:.2e}, same experts {same}")
            assert diff < 1e-3 and same


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokenizer")
    t.add_argument("--work", required=True)
    r = sub.add_parser("train")
    r.add_argument("--work", required=True)
    r.add_argument("--run", required=True)
    r.add_argument("--balance", choices=["qb", "aux", "none"], required=True)
    r.add_argument("--steps", type=int, default=600)
    r.add_argument("--minutes", type=float, default=15.0)
    r.add_argument("--batch", type=int, default=8)
    r.add_argument("--context", type=int, default=256)
    r.add_argument("--lr", type=float, default=3e-3)
    r.add_argument("--warmup", type=int, default=30)
    r.add_argument("--router-lr-scale", type=float, default=1.0)
    r.add_argument("--weight-decay", type=float, default=0.1)
    r.add_argument("--clip", type=float, default=1.0)
    r.add_argument("--seed", type=int, default=1234)
    r.add_argument("--eta", type=float, default=0.1)
    r.add_argument("--num-bins", type=int, default=qb.DEFAULT_NUM_BINS)
    r.add_argument("--range", type=float, nargs=2, default=qb.DEFAULT_RANGE)
    r.add_argument("--aux-coef", type=float, default=0.01)
    r.add_argument("--config", default="{}",
                   help="JSON object of config.json fields that replace the tiny model's (experiments)")
    r.add_argument("--seq-aux-coef", type=float, default=0.0,
                   help="weight of the sequence-wise balance loss beside qb or none (0: off)")
    r.add_argument("--log-every", type=int, default=10)
    r.add_argument("--eval-every", type=int, default=0)
    pl = sub.add_parser("plot")
    pl.add_argument("--work", required=True)
    pl.add_argument("--runs", nargs="+", required=True)
    pl.add_argument("--out", required=True)
    pl.add_argument("--table")
    sub.add_parser("check", help="batched training forward == reference forward")
    a = p.parse_args()
    {"tokenizer": cmd_tokenizer, "train": cmd_train, "plot": cmd_plot, "check": cmd_check}[a.cmd](a)


if __name__ == "__main__":
    main()
