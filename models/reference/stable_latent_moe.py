# PyTorch reference for StableLatentMoeForCausalLM (docs/formats.md, docs/math.md), fp32 throughout.
# Module names mirror the checkpoint tensor names, so state_dict() keys are the safetensors names.
import json
import math
import os
from dataclasses import dataclass
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn

try:
    from . import safetensors_io
except ImportError:  # run as a plain script from this folder
    import safetensors_io

ARCHITECTURE = "StableLatentMoeForCausalLM"
REQUIRED_KEYS = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "rms_norm_eps", "rope_theta", "n_routed_experts", "num_experts_per_tok",
                 "moe_intermediate_size", "hidden_act", "scoring_func"]


@dataclass
class Config:
    vocab_size: int
    hidden_size: int                      # d
    num_hidden_layers: int
    num_attention_heads: int              # H
    num_key_value_heads: int              # Hkv
    head_dim: int                         # hd
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    qk_norm: bool
    tie_word_embeddings: bool
    first_k_dense_replace: int
    intermediate_size: int                # dense FFN width
    n_routed_experts: int                 # N
    num_experts_per_tok: int              # K
    moe_intermediate_size: int            # f
    moe_latent_size: Optional[int]        # d_lat, None = plain MoE
    n_shared_experts: int
    shared_expert_intermediate_size: int
    hidden_act: str                       # "situ" | "silu"
    scoring_func: str                     # "sigmoid" | "softmax"
    norm_topk_prob: bool
    routed_scaling_factor: float
    expert_output_norm: bool

    @staticmethod
    def from_dict(c):
        missing = [k for k in REQUIRED_KEYS if k not in c]
        if missing:
            raise ValueError(f"config.json: missing required key {missing[0]!r}")
        H = c["num_attention_heads"]
        n_shared = c.get("n_shared_experts") or 0
        cfg = Config(
            vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
            num_hidden_layers=c["num_hidden_layers"], num_attention_heads=H,
            num_key_value_heads=c.get("num_key_value_heads") or H,
            head_dim=c.get("head_dim") or c["hidden_size"] // H,
            rms_norm_eps=float(c["rms_norm_eps"]), rope_theta=float(c["rope_theta"]),
            max_position_embeddings=c.get("max_position_embeddings", 4096),
            qk_norm=bool(c.get("qk_norm", False)),
            tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
            first_k_dense_replace=c.get("first_k_dense_replace", 0),
            intermediate_size=c.get("intermediate_size", 0),
            n_routed_experts=c["n_routed_experts"], num_experts_per_tok=c["num_experts_per_tok"],
            moe_intermediate_size=c["moe_intermediate_size"],
            moe_latent_size=c.get("moe_latent_size"),
            n_shared_experts=n_shared,
            shared_expert_intermediate_size=(c.get("shared_expert_intermediate_size")
                                             or n_shared * c["moe_intermediate_size"]),
            hidden_act=c["hidden_act"], scoring_func=c["scoring_func"],
            norm_topk_prob=bool(c.get("norm_topk_prob", False)),
            routed_scaling_factor=float(c.get("routed_scaling_factor", 1.0)),
            expert_output_norm=bool(c.get("expert_output_norm", False)))
        cfg.validate()
        return cfg

    def validate(self):
        def check(ok, key, why):
            if not ok:
                raise ValueError(f"config.json: {key}: {why}")
        check(self.num_attention_heads % self.num_key_value_heads == 0, "num_key_value_heads",
              "must divide num_attention_heads")
        check(self.head_dim % 2 == 0, "head_dim", "must be even for rotate-half RoPE")
        check(0 < self.num_experts_per_tok <= self.n_routed_experts, "num_experts_per_tok",
              "must be in 1..n_routed_experts")
        check(0 <= self.first_k_dense_replace <= self.num_hidden_layers, "first_k_dense_replace",
              "must be in 0..num_hidden_layers")
        check(self.first_k_dense_replace == 0 or self.intermediate_size > 0, "intermediate_size",
              "needed for dense layers")
        check(self.hidden_act in ("situ", "silu"), "hidden_act", "must be 'situ' or 'silu'")
        check(self.scoring_func in ("sigmoid", "softmax"), "scoring_func",
              "must be 'sigmoid' or 'softmax'")
        check(not self.expert_output_norm or self.moe_latent_size, "expert_output_norm",
              "requires moe_latent_size")

    @property
    def expert_width(self):
        """Width the routed experts read and write: d_lat, or d without a latent."""
        return self.moe_latent_size or self.hidden_size


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    if c.get("architectures", [ARCHITECTURE]) != [ARCHITECTURE]:
        raise ValueError(f"config.json: architectures: expected [{ARCHITECTURE!r}]")
    return Config.from_dict(c)


# ---------------------------------------------------------------- layers


def situ(x):
    return torch.sigmoid(x) * torch.tanh(x)


ACTIVATIONS = {"situ": situ, "silu": F.silu}


class RMSNorm(nn.Module):
    def __init__(self, width, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))  # [width]
        self.eps = eps

    def forward(self, x):  # [..., width]
        x = x.float()
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class GluMLP(nn.Module):
    """act(x·Wg^T) * (x·Wu^T), then ·Wd^T. Used for dense FFNs, experts and shared experts."""

    def __init__(self, width, inner, act):
        super().__init__()
        self.gate_proj = nn.Linear(width, inner, bias=False)  # [inner, width]
        self.up_proj = nn.Linear(width, inner, bias=False)    # [inner, width]
        self.down_proj = nn.Linear(inner, width, bias=False)  # [width, inner]
        self.act = ACTIVATIONS[act]

    def forward(self, x):  # [..., width]
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


def rope_cos_sin(positions, head_dim, theta):
    """cos, sin of shape [T, hd] for rotate-half RoPE; angles computed in float64."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = theta ** (-2.0 * i / head_dim)                               # [hd/2]
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]       # [T, hd/2]
    angles = torch.cat([angles, angles], dim=-1)                            # [T, hd]
    return angles.cos().float(), angles.sin().float()


def apply_rope(x, cos, sin):
    """x: [T, heads, hd]. Pairs (i, i + hd/2) rotate by angle pos * inv_freq[i]."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        d, H, Hkv, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.H, self.Hkv, self.hd, self.theta = H, Hkv, hd, cfg.rope_theta
        self.q_proj = nn.Linear(d, H * hd, bias=False)
        self.k_proj = nn.Linear(d, Hkv * hd, bias=False)
        self.v_proj = nn.Linear(d, Hkv * hd, bias=False)
        self.o_proj = nn.Linear(H * hd, d, bias=False)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(hd, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(hd, cfg.rms_norm_eps)
        self.qk_norm = cfg.qk_norm

    def forward(self, x):  # [T, d], positions 0..T-1, causal
        T = x.shape[0]
        q = self.q_proj(x).view(T, self.H, self.hd)
        k = self.k_proj(x).view(T, self.Hkv, self.hd)
        v = self.v_proj(x).view(T, self.Hkv, self.hd)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = rope_cos_sin(torch.arange(T), self.hd, self.theta)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        group = self.H // self.Hkv  # query head h reads KV head h // group
        k = k.repeat_interleave(group, dim=1)                       # [T, H, hd]
        v = v.repeat_interleave(group, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(self.hd)  # [H, T, T]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        probs = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        out = torch.einsum("hts,shd->thd", probs, v).reshape(T, self.H * self.hd)
        return self.o_proj(out)


# ---------------------------------------------------------------- routing


def stable_topk(values, k):
    """Indices [T, k] of the k largest values per row; ties go to the lower index.
    A stable ascending sort of -values keeps equal entries in index order."""
    order = torch.sort(-values, dim=-1, stable=True).indices
    return order[..., :k]


@dataclass
class Routing:
    logits: torch.Tensor    # [T, N] h·Wr^T
    scores: torch.Tensor    # [T, N] sigmoid/softmax of logits (unbiased)
    selected: torch.Tensor  # [T, K] expert ids, ordered by descending s + b
    weights: torch.Tensor   # [T, K] combine weights


class Router(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        N, d = cfg.n_routed_experts, cfg.hidden_size
        self.weight = nn.Parameter(torch.zeros(N, d))                            # [N, d]
        self.register_buffer("e_score_correction_bias", torch.zeros(N))          # [N], frozen
        self.cfg = cfg

    def forward(self, h):  # [T, d] -> Routing
        cfg = self.cfg
        logits = h.float() @ self.weight.float().t()
        scores = logits.sigmoid() if cfg.scoring_func == "sigmoid" else logits.softmax(dim=-1)
        selected = stable_topk(scores + self.e_score_correction_bias, cfg.num_experts_per_tok)
        weights = scores.gather(-1, selected)
        if cfg.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return Routing(logits, scores, selected, weights * cfg.routed_scaling_factor)


class MoE(nn.Module):
    """Router -> latent down -> K routed GLU experts -> (latent RMSNorm) -> latent up, + shared."""

    def __init__(self, cfg: Config):
        super().__init__()
        d, w = cfg.hidden_size, cfg.expert_width
        self.gate = Router(cfg)
        if cfg.moe_latent_size:
            self.latent_down_proj = nn.Linear(d, w, bias=False)  # [d_lat, d]
            self.latent_up_proj = nn.Linear(w, d, bias=False)    # [d, d_lat]
        self.experts = nn.ModuleList(GluMLP(w, cfg.moe_intermediate_size, cfg.hidden_act)
                                     for _ in range(cfg.n_routed_experts))
        if cfg.expert_output_norm:
            self.latent_norm = RMSNorm(w, cfg.rms_norm_eps)
        if cfg.n_shared_experts > 0:
            self.shared_experts = GluMLP(d, cfg.shared_expert_intermediate_size, cfg.hidden_act)
        self.cfg = cfg
        self.vectorized = False  # True: batched per-expert path (same math, for speed)

    def combine(self, z, routing):
        """c[t] = sum_k w[t,k] * expert_{e[t,k]}(z[t]); z: [T, w]."""
        c = torch.zeros_like(z)
        if self.vectorized:
            for e, expert in enumerate(self.experts):
                rows, slot = (routing.selected == e).nonzero(as_tuple=True)
                if rows.numel():
                    c.index_add_(0, rows, routing.weights[rows, slot, None] * expert(z[rows]))
            return c
        for t in range(z.shape[0]):
            for k in range(routing.selected.shape[1]):
                e = int(routing.selected[t, k])
                c[t] += routing.weights[t, k] * self.experts[e](z[t])
        return c

    def forward(self, h, trace=None):  # [T, d]
        routing = self.gate(h)
        if trace is not None:
            trace.append(routing)
        z = self.latent_down_proj(h) if self.cfg.moe_latent_size else h
        c = self.combine(z, routing)
        if self.cfg.expert_output_norm:
            c = self.latent_norm(c)
        out = self.latent_up_proj(c) if self.cfg.moe_latent_size else c
        if self.cfg.n_shared_experts > 0:
            out = out + self.shared_experts(h)
        return out


class DecoderLayer(nn.Module):
    def __init__(self, cfg: Config, index):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.is_moe = index >= cfg.first_k_dense_replace
        self.mlp = (MoE(cfg) if self.is_moe else
                    GluMLP(cfg.hidden_size, cfg.intermediate_size, cfg.hidden_act))

    def forward(self, x, trace=None):
        x = x + self.self_attn(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        return x + (self.mlp(h, trace) if self.is_moe else self.mlp(h))


class Backbone(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)  # [V, d]
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class StableLatentMoeForCausalLM(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)  # [V, d]

    def set_vectorized(self, on):
        for layer in self.model.layers:
            if layer.is_moe:
                layer.mlp.vectorized = on

    def forward_with_routing(self, ids):
        """ids: [T] token ids at positions 0..T-1 -> (logits [T, V], list of Routing or None per layer)."""
        ids = torch.as_tensor(ids, dtype=torch.long)
        x = self.model.embed_tokens(ids).float()
        routings: List[Optional[Routing]] = []
        for layer in self.model.layers:
            trace = []
            x = layer(x, trace)
            routings.append(trace[0] if trace else None)
        x = self.model.norm(x)
        head = self.model.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight
        return x @ head.float().t(), routings

    def forward(self, ids):
        return self.forward_with_routing(ids)[0]

    def router_trace(self, ids):
        """Per-layer Routing (scores, selected experts, weights) for ids; None for dense layers."""
        return self.forward_with_routing(ids)[1]


def load_model(model_dir):
    """Build the reference from config.json + safetensors (single or sharded); weights upcast to fp32."""
    cfg = load_config(model_dir)
    model = StableLatentMoeForCausalLM(cfg)
    arrays, dtypes = safetensors_io.load_model(model_dir)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(arrays))
    extra = sorted(set(arrays) - set(expected))
    if missing or extra:
        raise ValueError(f"{model_dir}: missing tensors {missing[:5]}, unexpected tensors {extra[:5]}")
    for name, ref in expected.items():
        if tuple(arrays[name].shape) != tuple(ref.shape):
            raise ValueError(f"{model_dir}: tensor {name}: shape {list(arrays[name].shape)}, "
                             f"config implies {list(ref.shape)}")
        if name.endswith("e_score_correction_bias") and dtypes[name] != "F32":
            raise ValueError(f"{model_dir}: tensor {name}: must be F32, is {dtypes[name]}")
    model.load_state_dict({n: torch.from_numpy(a.copy()) for n, a in arrays.items()})
    return model.eval()
