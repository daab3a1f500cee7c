#!/usr/bin/env python3
"""Quantile Balancing (docs/quantile-balancing.md): the histogram estimator of the router biases, used by
the trainer (one update per batch) and by calibration (layer by layer on a prompt set).

Estimator, for scores s [T, N] (after sigmoid/softmax, float32), biases b [N] (float32), K, and a
histogram spec (B bins over the fixed range [lo, hi], default B = 1024, [lo, hi] = [-1.5, 1.5]):

1. Thresholds. v = s + b (float32). Per token, order the N values of v descending with ties to
   the lower expert index (a stable sort) and take the K-th value v_K and the (K+1)-th value
   v_K1 (1-based ranks; with K = N, v_K1 = v_K). For every expert e:
       theta(t, e) = v_K1  if e is one of the token's first K experts in that order,
                     v_K   otherwise;
       r[t, e]     = theta(t, e) - s[t, e]       (float32)
   r[t, e] is the bias expert e needs to be chosen by token t: with the other biases fixed, e is
   in t's top-K exactly when b[e] >= r[t, e] (up to ties).
2. Histogram. w = (hi - lo) / B. Bin of a value x: j = floor((x - lo) / w) computed in float64,
   clamped to [0, B - 1], so values below lo count in bin 0 and values at or above hi in bin
   B - 1. counts[e, j] = number of tokens t whose r[t, e] falls in bin j (N x B integers;
   histograms from several workers or batches are summed before step 3).
3. Quantile. T = total count per expert (the same for every expert), q = K / N, target rank
   L = q * T = K * T / N (float64, possibly fractional; 0 < L <= T). C[e, j] = counts[e, 0] + ...
   + counts[e, j]. j* = the first bin with C[e, j*] >= L; prev = C[e, j*] - counts[e, j*];
       b_q[e] = lo + (j* + (L - prev) / counts[e, j*]) * w          (float64, stored as float32)
   i.e. the count is taken as spread uniformly inside the bin and b_q is where the cumulative
   count reaches L. counts[e, j*] > 0 always, because C[e, j*] >= L > prev.
4. Update. b <- float32(double(b) + eta * (b_q - double(b))). eta = 1 replaces b by b_q.

Range and bins: b_q is exact (up to the in-bin interpolation) whenever the L-th smallest r lies
inside [lo, hi); values outside the range only pile up in the edge bins and do not move a quantile
that lies inside. The quantile sits at the bias itself, so the range must hold the biases with a
margin. Sigmoid scores lie in (0, 1); a router's biases spread over well under 1 and also share a
common offset that the estimator does not pin (adding c to every bias changes no routing and adds
c to every r); the trained tiny model ends with biases in [-0.18, 0.87]. [-1.5, 1.5] holds that
with room for the offset to wander, for sigmoid and softmax scores alike. 1024 bins give
w = 3/1024 = 0.0029296875 (exact in binary), finer than the spacing of the K/N quantile of a few
thousand tokens, and the linear interpolation resolves the quantile further inside the bin.
Re-implementations that follow the float32 threshold arithmetic and the float64 bin rule agree
with this one bit for bit on the same scores; on scores from another forward pass they agree to
within about one bin width (a value within rounding of a bin edge may change bins).

Calibration (what `latentserve-calibrate` re-implements): given a model and token sequences,
for each MoE layer l from the first to the last, in order:
  a. run the model forward over every sequence (each sequence on its own, positions 0..len-1)
     with the current biases of all layers (layers before l already re-fitted, l and later
     still at their starting values), and collect the layer-l scores s of every token of every
     sequence into one [T, N] matrix (T = total tokens);
  b. run `iters` (default 10) estimator updates with eta = 1 on those fixed scores, each one
     recomputing r from the current b of layer l (steps 1-4 above, one histogram over all T);
  c. store b as layer l's new biases and move on to layer l + 1.
Output: the new biases per MoE layer (float32, [N] each).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from stable_latent_moe import load_model  # noqa: E402

DEFAULT_NUM_BINS = 1024
DEFAULT_RANGE = (-1.5, 1.5)
DEFAULT_ITERS = 10


def bias_thresholds(scores, biases, k):
    """r [T, N]: the bias each expert needs to be chosen by each token (step 1)."""
    scores = scores.float()
    v = scores + biases.float()
    n = v.shape[-1]
    vals, order = torch.sort(-v, dim=-1, stable=True)  # ascending -v == descending v, ties to lower index
    vals = -vals
    theta_in = vals[:, min(k, n - 1)]   # (K+1)-th value (K-th when K == N: nothing left to displace)
    theta_out = vals[:, k - 1]          # K-th value
    in_topk = torch.zeros_like(v, dtype=torch.bool).scatter_(1, order[:, :k], True)
    theta = torch.where(in_topk, theta_in[:, None], theta_out[:, None])
    return theta - scores


def histogram(r, num_bins=DEFAULT_NUM_BINS, value_range=DEFAULT_RANGE):
    """counts [N, B] (int64): per expert, tokens whose r[t, e] falls in each bin (step 2)."""
    lo, hi = float(value_range[0]), float(value_range[1])
    width = (hi - lo) / num_bins
    n = r.shape[1]
    bins = torch.floor((r.double() - lo) / width).clamp_(0, num_bins - 1).long()  # [T, N]
    flat = bins + torch.arange(n, dtype=torch.long)[None, :] * num_bins
    return torch.bincount(flat.reshape(-1), minlength=n * num_bins).view(n, num_bins)


def quantile_from_histogram(counts, k, n, value_range=DEFAULT_RANGE):
    """b_q [N] (float64): the K/N quantile of each expert's histogram, interpolated inside the bin
    (step 3). The target rank L = q * T is computed as K * T / N in float64."""
    lo, hi = float(value_range[0]), float(value_range[1])
    num_bins = counts.shape[1]
    width = (hi - lo) / num_bins
    cum = counts.cumsum(dim=1)                                       # [N, B] int64
    target = (k * cum[:, -1]).double() / n                           # L = K * T / N
    j = (cum.double() < target[:, None]).sum(dim=1).clamp_(max=num_bins - 1)  # first bin with C >= L
    in_bin = counts.gather(1, j[:, None])[:, 0].double()
    prev = cum.gather(1, j[:, None])[:, 0].double() - in_bin
    frac = (target - prev) / in_bin.clamp(min=1)
    return lo + (j.double() + frac) * width


def estimator_update(scores, biases, k, eta, num_bins=DEFAULT_NUM_BINS, value_range=DEFAULT_RANGE,
                     return_counts=False):
    """One Quantile Balancing step on a batch of scores [T, N]: returns the new biases [N] (float32)."""
    biases = biases.float()
    n = scores.shape[1]
    counts = histogram(bias_thresholds(scores, biases, k), num_bins, value_range)
    b_q = quantile_from_histogram(counts, k, n, value_range)
    new = (biases.double() + eta * (b_q - biases.double())).float()
    return (new, counts) if return_counts else new


def expert_load(selected, n):
    """tokens per expert [N] for a [T, K] selection."""
    return torch.bincount(selected.reshape(-1), minlength=n)


def moe_layers(model):
    return [i for i, layer in enumerate(model.model.layers) if layer.is_moe]


def get_bias(model, layer):
    return model.model.layers[layer].mlp.gate.e_score_correction_bias


@torch.no_grad()
def layer_scores(model, sequences, layer):
    """[T, N] scores of one MoE layer over every token of every sequence (current biases)."""
    out = []
    for ids in sequences:
        routing = model.router_trace(torch.as_tensor(ids, dtype=torch.long))[layer]
        out.append(routing.scores.float())
    return torch.cat(out, dim=0)


@torch.no_grad()
def calibrate(model, sequences, iters=DEFAULT_ITERS, num_bins=DEFAULT_NUM_BINS,
              value_range=DEFAULT_RANGE, eta=1.0, scores_out=None):
    """Re-fit the biases layer by layer (see the module docstring); updates the model in place and
    returns {layer index: new biases [N] float32}. scores_out (a dict), if given, receives the
    [T, N] scores each layer was fitted on."""
    k = model.cfg.num_experts_per_tok
    result = {}
    for layer in moe_layers(model):
        scores = layer_scores(model, sequences, layer)
        if scores_out is not None:
            scores_out[layer] = scores
        bias = get_bias(model, layer).clone().float()
        for _ in range(iters):
            bias = estimator_update(scores, bias, k, eta, num_bins, value_range)
        get_bias(model, layer).copy_(bias)
        result[layer] = bias.clone()
    return result


@torch.no_grad()
def max_over_mean_load(model, sequences):
    """{layer: max/mean tokens per expert} over all tokens of the sequences, current biases."""
    n = model.cfg.n_routed_experts
    loads = {}
    for ids in sequences:
        for layer, routing in enumerate(model.router_trace(torch.as_tensor(ids, dtype=torch.long))):
            if routing is not None:
                loads[layer] = loads.get(layer, 0) + expert_load(routing.selected, n)
    return {layer: float(c.max() / c.float().mean()) for layer, c in loads.items()}


# ---------------------------------------------------------------- test vectors for the C++ side


def random_sequences(vocab, count, length, seed):
    rng = np.random.Generator(np.random.PCG64(seed))
    return rng.integers(0, vocab, size=(count, length)).tolist()


def calibration_vector(model_dir, rel_name, count=8, length=32, seed=0, iters=DEFAULT_ITERS,
                       num_bins=DEFAULT_NUM_BINS, value_range=DEFAULT_RANGE, with_scores=False):
    model = load_model(model_dir)
    model.set_vectorized(True)
    seqs = random_sequences(model.cfg.vocab_size, count, length, seed)
    before_bias = {str(l): get_bias(model, l).tolist() for l in moe_layers(model)}
    before = max_over_mean_load(model, seqs)
    scores = {}
    biases = calibrate(model, seqs, iters, num_bins, value_range, scores_out=scores)
    after = max_over_mean_load(model, seqs)
    extra = {}
    if with_scores:  # the loop without the forward pass: layer l's scores, tokens in sequence order
        extra["layer_scores"] = {str(l): s.tolist() for l, s in scores.items()}
    return {
        "model": rel_name,
        "sequences": seqs,
        "sequence_seed": seed,
        "num_bins": num_bins,
        "range": list(value_range),
        "bin_width": (value_range[1] - value_range[0]) / num_bins,
        "iters": iters,
        "eta": 1.0,
        "k": model.cfg.num_experts_per_tok,
        "initial_biases": before_bias,
        "biases": {str(l): b.tolist() for l, b in biases.items()},
        "max_over_mean_load_before": {str(l): v for l, v in before.items()},
        "max_over_mean_load_after": {str(l): v for l, v in after.items()},
        **extra,
    }


def estimator_vectors(seed=0):
    """Three model-free cases: scores [T, N], b, K, bins, range -> b after one update, eta = 1."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    specs = [  # (T, N, K, bins, range, logit scale, bias scale, name)
        (64, 8, 2, 1024, DEFAULT_RANGE, 2.0, 0.1, "sigmoid_t64_n8_k2"),
        (200, 16, 4, 256, DEFAULT_RANGE, 1.0, 0.3, "sigmoid_t200_n16_k4_256bins"),
        (37, 6, 3, 64, (-0.5, 0.5), 3.0, 0.2, "clamped_t37_n6_k3_narrow_range"),
    ]
    for t, n, k, bins, rng_, scale, bscale, name in specs:
        scores = torch.sigmoid(torch.randn(t, n, generator=g) * scale)
        b = torch.randn(n, generator=g) * bscale
        if name.startswith("clamped"):
            scores[0, :] = scores[0, 0]   # a token with all scores tied: ties go to the lower index
        r = bias_thresholds(scores, b, k)
        counts = histogram(r, bins, rng_)
        new = estimator_update(scores, b, k, 1.0, bins, rng_)
        cases.append({
            "name": name, "k": k, "num_bins": bins, "range": list(rng_),
            "bin_width": (rng_[1] - rng_[0]) / bins, "eta": 1.0,
            "scores": scores.tolist(), "biases": b.tolist(),
            "thresholds": r.tolist(),
            "nonzero_bins": {str(e): {str(j): int(c) for j, c in enumerate(counts[e].tolist()) if c}
                             for e in range(n)},
            "new_biases": new.tolist(),
        })
    return {"description": "Quantile Balancing estimator, one update with eta = 1 "
                           "(models/reference/quantile_balancing.py; docs/quantile-balancing.md)",
            "cases": cases}


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def main():
    torch.set_num_threads(1)
    p = argparse.ArgumentParser(description="Quantile Balancing calibration and test vectors")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("calibrate", help="re-fit the biases of MODEL_DIR on token sequences")
    c.add_argument("model_dir")
    c.add_argument("--sequences", required=True, help="json file: a list of token id lists")
    c.add_argument("--iters", type=int, default=DEFAULT_ITERS)
    c.add_argument("--num-bins", type=int, default=DEFAULT_NUM_BINS)
    c.add_argument("--range", type=float, nargs=2, default=DEFAULT_RANGE)
    c.add_argument("--out", required=True, help="json file for {layer: biases}")
    v = sub.add_parser("vectors", help="write tests/data/tiny/calibration/*.json")
    v.add_argument("--out-dir", required=True)
    v.add_argument("--model", action="append", default=[],
                   help="NAME=DIR=REL: model directory and the path written into the json")
    v.add_argument("--with-scores", action="append", default=[],
                   help="NAME: also write the per-layer scores the loop was fitted on")
    a = p.parse_args()
    if a.cmd == "calibrate":
        with open(a.sequences) as f:
            seqs = json.load(f)
        model = load_model(a.model_dir)
        model.set_vectorized(True)
        biases = calibrate(model, seqs, a.iters, a.num_bins, tuple(a.range))
        write_json(a.out, {str(l): b.tolist() for l, b in biases.items()})
    else:
        write_json(os.path.join(a.out_dir, "estimator_vectors.json"), estimator_vectors())
        for spec in a.model:
            name, model_dir, rel = spec.split("=")
            vec = calibration_vector(model_dir, rel, with_scores=name in a.with_scores)
            write_json(os.path.join(a.out_dir, f"{name}.json"), vec)
            print(name, "max/mean load before", vec["max_over_mean_load_before"],
                  "after", vec["max_over_mean_load_after"])


if __name__ == "__main__":
    main()
