# PyTorch reference for the Kimi K3 text tower (and the Kimi-Linear family it extends), written from K3's math:
# AttnRes residuals, KDA with K3's bounded gate, gated MLA without RoPE, SiTU experts, LatentMoE. Float32 by
# default (float64 for checks); a prefill and a cached token-by-token decode that must agree. Offline only.
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from safetensors import safe_open

TEXT_PREFIX = "language_model."
NON_TEXT_PREFIXES = ("vision_tower.", "mm_projector.")  # the multimodal parts a text server skips by name
MLA_NORM_EPS = 1e-6   # q_a_layernorm / kv_a_layernorm
L2_EPS = 1e-6         # KDA q/k l2 norm: x / sqrt(sum x^2 + eps)
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
MX_GROUP = 32


# ---------------------------------------------------------------------------------------------------- config


@dataclass
class K3Config:
    vocab_size: int
    hidden_size: int                       # d
    num_hidden_layers: int
    rms_norm_eps: float
    tie_word_embeddings: bool
    hidden_act: str                        # "situ" | "silu"
    situ_beta: float                       # activation_situ_beta
    situ_gamma: Optional[float]            # activation_situ_linear_beta (None: u passes untouched)
    attn_res_block_size: Optional[int]     # None: plain pre-norm residuals (Kimi-Linear)
    kda_layers: List[int]                  # 0-based
    # MLA
    num_attention_heads: int
    q_lora_rank: Optional[int]
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    mla_output_gate: bool
    # KDA
    kda_heads: int
    kda_head_dim: int
    conv_kernel: int
    gate_lower_bound: Optional[float]      # None: Kimi-Linear's -exp(A_log) * softplus gate
    full_rank_gate: bool                   # g_proj, else g_a_proj/g_b_proj
    # FFN / MoE
    intermediate_size: int
    first_k_dense_replace: int
    moe_layer_freq: int
    num_experts: int
    top_k: int
    num_shared_experts: int
    moe_intermediate_size: int
    latent_size: Optional[int]             # routed_expert_hidden_size (None: experts work at width d)
    latent_norm: bool                      # latent_moe_use_norm
    router_act: str                        # "sigmoid" | "softmax"
    renormalize: bool
    routed_scaling_factor: float
    num_expert_group: int
    topk_group: int

    @staticmethod
    def from_text_config(c: dict) -> "K3Config":
        lin = c.get("linear_attn_config") or {}
        n = c["num_hidden_layers"]
        kda = sorted(i - 1 for i in lin.get("kda_layers", []))
        full = sorted(i - 1 for i in lin.get("full_attn_layers", []))
        if sorted(kda + full) != list(range(n)):
            raise ValueError(f"linear_attn_config: kda_layers {lin.get('kda_layers')} and full_attn_layers "
                             f"{lin.get('full_attn_layers')} (1-based) must cover layers 1..{n} once each")
        act = c.get("hidden_act", "silu")
        if act not in ("situ", "silu"):
            raise ValueError(f"hidden_act {act!r} is not implemented")
        grouped = bool(c.get("use_grouped_topk", True))
        cfg = K3Config(
            vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], num_hidden_layers=n,
            rms_norm_eps=float(c["rms_norm_eps"]), tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
            hidden_act=act, situ_beta=float(c.get("activation_situ_beta") or 1.0),
            situ_gamma=(float(c["activation_situ_linear_beta"]) if c.get("activation_situ_linear_beta") else None),
            attn_res_block_size=c.get("attn_res_block_size"), kda_layers=kda,
            num_attention_heads=c["num_attention_heads"], q_lora_rank=c.get("q_lora_rank"),
            kv_lora_rank=c["kv_lora_rank"], qk_nope_head_dim=c["qk_nope_head_dim"],
            qk_rope_head_dim=c["qk_rope_head_dim"], v_head_dim=c["v_head_dim"],
            mla_output_gate=bool(c.get("mla_use_output_gate", False)),
            kda_heads=lin.get("num_heads", 0), kda_head_dim=lin.get("head_dim", 0),
            conv_kernel=lin.get("short_conv_kernel_size", 4),
            gate_lower_bound=(float(lin["gate_lower_bound"]) if lin.get("gate_lower_bound") is not None else None),
            full_rank_gate=bool(lin.get("use_full_rank_gate", False)),
            intermediate_size=c.get("intermediate_size", 0),
            first_k_dense_replace=c.get("first_k_dense_replace", 0), moe_layer_freq=c.get("moe_layer_freq", 1),
            num_experts=c.get("num_experts") or 0,
            top_k=c.get("num_experts_per_token") or c.get("num_experts_per_tok") or 0,
            num_shared_experts=c.get("num_shared_experts", c.get("n_shared_experts", 0)) or 0,
            moe_intermediate_size=c.get("moe_intermediate_size") or 0,
            latent_size=c.get("routed_expert_hidden_size"), latent_norm=bool(c.get("latent_moe_use_norm", False)),
            router_act=c.get("moe_router_activation_func", "sigmoid"),
            renormalize=bool(c.get("moe_renormalize", c.get("norm_topk_prob", True))),
            routed_scaling_factor=float(c.get("routed_scaling_factor", 1.0)),
            num_expert_group=(c.get("num_expert_group", c.get("n_group", 1)) or 1) if grouped else 1,
            topk_group=(c.get("topk_group", 1) or 1) if grouped else 1)
        if cfg.router_act not in ("sigmoid", "softmax"):
            raise ValueError(f"moe_router_activation_func {cfg.router_act!r} is not implemented")
        if cfg.num_experts % cfg.num_expert_group:
            raise ValueError(f"num_expert_group {cfg.num_expert_group} does not divide num_experts {cfg.num_experts}")
        return cfg

    def is_kda(self, layer: int) -> bool:
        return layer in self.kda_layers

    def is_moe(self, layer: int) -> bool:
        return self.num_experts > 0 and layer >= self.first_k_dense_replace and layer % self.moe_layer_freq == 0


def read_config(model_dir: str) -> K3Config:
    """config.json of a K3 directory (text_config nested) or of a plain Kimi-Linear one."""
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    return K3Config.from_text_config(c.get("text_config", c))


# ---------------------------------------------------------------------------------------------------- weights


def mxfp4_dequantize(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """compressed-tensors mxfp4-pack-quantized -> float32 [out, in]. packed uint8 [out, in/2]: element 2i is the
    low nibble, 2i+1 the high one; a nibble is an E2M1 code (bit 3 the sign). scale uint8 [out, in/32], E8M0:
    2^(s-127) in float32, so s = 255 is 2^128 = +inf (a zero code then gives NaN), as compressed-tensors does."""
    if packed.dtype != torch.uint8 or scale.dtype != torch.uint8 or packed.dim() != 2 or scale.dim() != 2:
        raise ValueError(f"mxfp4: want uint8 [out, in/2] and [out, in/32], got {packed.dtype} {tuple(packed.shape)}"
                         f" and {scale.dtype} {tuple(scale.shape)}")
    rows, half = packed.shape
    cols = 2 * half
    if cols % MX_GROUP or tuple(scale.shape) != (rows, cols // MX_GROUP):
        raise ValueError(f"mxfp4: scale shape {tuple(scale.shape)} does not fit packed {tuple(packed.shape)}")
    p = packed.to(torch.int64)
    codes = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(rows, cols)
    mag = torch.tensor(E2M1, dtype=torch.float32)[codes & 7]
    vals = torch.where((codes & 8) != 0, -mag, mag)
    s = torch.pow(torch.tensor(2.0, dtype=torch.float32), scale.to(torch.float32) - 127.0)  # 255 -> inf
    return vals * s.repeat_interleave(MX_GROUP, dim=1)


class Weights:
    """Every text tensor of a model directory as float32, MXFP4 experts dequantized; tracks which are read so a
    forward can prove it consumed them all (strict like the server)."""

    def __init__(self, model_dir: str):
        raw = {}
        for name in sorted(os.listdir(model_dir)):
            if name.endswith(".safetensors"):
                with safe_open(os.path.join(model_dir, name), "pt") as f:
                    for k in f.keys():
                        raw[k] = f.get_tensor(k)
        self.prefix = TEXT_PREFIX if any(k.startswith(TEXT_PREFIX) for k in raw) else ""
        self.skipped = sorted(k for k in raw if k.startswith(NON_TEXT_PREFIXES))
        self.dtypes: Dict[str, torch.dtype] = {}
        self.t: Dict[str, torch.Tensor] = {}
        for k, v in raw.items():
            if k.startswith(NON_TEXT_PREFIXES):
                continue
            if not k.startswith(self.prefix):
                raise ValueError(f"tensor {k} lacks the {self.prefix!r} prefix of the text tower")
            name = k[len(self.prefix):]
            self.dtypes[name] = v.dtype
            if name.endswith(".weight_scale"):
                continue
            if name.endswith(".weight_packed"):
                base = name[: -len("_packed")]
                self.t[base] = mxfp4_dequantize(v, raw[self.prefix + base + "_scale"])
                self.dtypes[base] = torch.uint8
            else:
                self.t[name] = v.to(torch.float32)
        self.used = set()

    @staticmethod
    def from_tensors(tensors: Dict[str, torch.Tensor]) -> "Weights":
        """Weights over in-memory float tensors named without a prefix (for layer-level checks)."""
        W = Weights.__new__(Weights)
        W.prefix, W.skipped, W.used = "", [], set()
        W.t = {k: v.detach().to(torch.float32) for k, v in tensors.items()}
        W.dtypes = {k: v.dtype for k, v in tensors.items()}
        return W

    def get(self, name: str, dtype=torch.float32) -> torch.Tensor:
        if name not in self.t:
            raise KeyError(f"missing tensor {self.prefix}{name}")
        self.used.add(name)
        return self.t[name].to(dtype)

    def has(self, name: str) -> bool:
        return name in self.t

    def unused(self) -> List[str]:
        return sorted(set(self.t) - self.used)


# ---------------------------------------------------------------------------------------------------- math


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) over the last dim (no weight)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return rms(x, eps) * w


def glu_act(cfg: K3Config, g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """SiTU(g, u) = beta*tanh(g/beta)*sigmoid(g) * gamma*tanh(u/gamma); SwiGLU silu(g)*u for hidden_act silu."""
    if cfg.hidden_act == "silu":
        return F.silu(g) * u
    b = cfg.situ_beta
    gate = b * torch.tanh(g / b) * torch.sigmoid(g)
    up = u if cfg.situ_gamma is None else cfg.situ_gamma * torch.tanh(u / cfg.situ_gamma)
    return gate * up


def glu_mlp(cfg: K3Config, W: Weights, prefix: str, x: torch.Tensor, dt) -> torch.Tensor:
    g = x @ W.get(prefix + "gate_proj.weight", dt).T
    u = x @ W.get(prefix + "up_proj.weight", dt).T
    return glu_act(cfg, g, u) @ W.get(prefix + "down_proj.weight", dt).T


def attn_res(sources: List[torch.Tensor], norm_w: torch.Tensor, proj_w: torch.Tensor, eps: float) -> torch.Tensor:
    """AttnRes over sources V_i [T, d]: s_i = sum_d rms(V_i)_d * nw_d * pw_d; out = sum_i softmax(s)_i * V_i."""
    V = torch.stack(sources)                                   # [n, T, d]
    q = norm_w * proj_w.reshape(-1)                            # [d]
    s = (rms(V, eps) * q).sum(-1)                              # [n, T]
    a = torch.softmax(s, dim=0)
    return (a.unsqueeze(-1) * V).sum(0)


def kda_gate(cfg: K3Config, graw: torch.Tensor, a_log: torch.Tensor, dt_bias: torch.Tensor) -> torch.Tensor:
    """Log-space forget gate [T, H, dk] from graw = f_b(f_a(x)) [T, H*dk]. K3: lb * sigmoid(exp(A_log_h) *
    (graw + dt_bias)); Kimi-Linear: -exp(A_log_h) * softplus(graw + dt_bias)."""
    H, dk = cfg.kda_heads, cfg.kda_head_dim
    z = (graw + dt_bias).reshape(-1, H, dk)
    A = torch.exp(a_log.reshape(-1)[:H]).reshape(1, H, 1)
    if cfg.gate_lower_bound is not None:
        return cfg.gate_lower_bound * torch.sigmoid(A * z)
    return -A * F.softplus(z)


def l2_normalize(x: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + L2_EPS)


def kda_recurrence(q, k, v, g, beta, S):
    """Gated delta rule per head over T tokens. q, k [T, H, dk] (q already l2-normed and scaled, k l2-normed),
    v [T, H, dv], g [T, H, dk] log-decay, beta [T, H], S [H, dk, dv] (updated copy returned).
    S <- diag(exp g) S; S <- S + beta k (v - S^T k)^T; o = S^T q."""
    out = []
    for t in range(q.shape[0]):
        S = S * torch.exp(g[t]).unsqueeze(-1)
        kt = k[t]
        pred = torch.einsum("hkv,hk->hv", S, kt)
        S = S + beta[t].reshape(-1, 1, 1) * torch.einsum("hk,hv->hkv", kt, v[t] - pred)
        out.append(torch.einsum("hkv,hk->hv", S, q[t]))
    return torch.stack(out), S


def causal_conv(x: torch.Tensor, w: torch.Tensor, tail: torch.Tensor):
    """Depthwise causal conv: out_t[c] = sum_j w[c, j] * x_{t-K+1+j}[c] (the newest token meets w[c, K-1]).
    x [T, C], w [C, K], tail [K-1, C] (the inputs before x). Returns out [T, C] and the new tail."""
    K = w.shape[1]
    full = torch.cat([tail, x], dim=0)                         # [K-1+T, C]
    T = x.shape[0]
    out = sum(full[j:j + T] * w[:, j] for j in range(K))
    return out, full[-(K - 1):].clone()


def route(cfg: K3Config, x: torch.Tensor, W_r: torch.Tensor, bias: Optional[torch.Tensor], probe=None):
    """Router on x [T, d] in float32/64: top-k of score + bias inside the best topk_group groups (groups ranked by
    their two best biased scores); weights are the unbiased scores, renormalised, times routed_scaling_factor.
    Ties go to the lower index. Returns (idx [T, k], w [T, k])."""
    logits = x @ W_r.T
    s = torch.sigmoid(logits) if cfg.router_act == "sigmoid" else torch.softmax(logits, dim=-1)
    choice = s + bias if bias is not None else s.clone()
    T, E = choice.shape
    G = cfg.num_expert_group
    if G > 1:
        per = E // G
        gs = choice.reshape(T, G, per).topk(min(2, per), dim=-1).values.sum(-1)      # [T, G]
        if probe is not None:
            probe.gap(gs, cfg.topk_group)
        order = stable_argsort_desc(gs)[:, :cfg.topk_group]
        keep = torch.zeros(T, G, dtype=torch.bool).scatter_(1, order, True)
        choice = choice.masked_fill(~keep.repeat_interleave(per, dim=1), float("-inf"))
    if probe is not None:
        probe.gap(choice, cfg.top_k)
    idx = stable_argsort_desc(choice)[:, :cfg.top_k]
    w = s.gather(1, idx)
    if cfg.renormalize:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return idx, w * cfg.routed_scaling_factor


def stable_argsort_desc(x: torch.Tensor) -> torch.Tensor:
    """Indices sorting each row descending, equal values in ascending index order."""
    return torch.sort(-x, dim=-1, stable=True).indices


class RoutingProbe:
    """Smallest gap between the k-th and (k+1)-th selection score (and group score) seen by the routers."""

    def __init__(self):
        self.margin = float("inf")

    def gap(self, values: torch.Tensor, k: int):
        if values.shape[-1] <= k:
            return
        s = values.double().sort(dim=-1, descending=True).values
        d = s[:, k - 1] - s[:, k]
        d = d[torch.isfinite(d)]
        if d.numel():
            self.margin = min(self.margin, float(d.min()))


# ---------------------------------------------------------------------------------------------------- layers


@dataclass
class KdaCache:
    conv: List[torch.Tensor]    # q, k, v inputs of the last K-1 tokens, each [K-1, H*dk]
    state: torch.Tensor         # [H, dk, dv]


@dataclass
class MlaCache:
    latent: torch.Tensor        # [t, kv_lora_rank] kv_a_layernorm(c) per past token
    k_tail: torch.Tensor        # [t, qk_rope_head_dim] shared by the heads, not rotated


def kda_attention(cfg, W, p, x, cache: Optional[KdaCache], dt):
    """KDA layer on x [T, d] (the input_layernorm output). Returns out [T, d] and the cache after x."""
    H, dk = cfg.kda_heads, cfg.kda_head_dim
    C = H * dk
    T = x.shape[0]
    if cache is None:
        zero = torch.zeros(cfg.conv_kernel - 1, C, dtype=dt)
        cache = KdaCache([zero, zero, zero], torch.zeros(H, dk, dk, dtype=dt))
    qkv, tails = [], []
    for i, n in enumerate("qkv"):
        y = x @ W.get(f"{p}{n}_proj.weight", dt).T
        w = W.get(f"{p}{n}_conv1d.weight", dt).reshape(C, cfg.conv_kernel)
        y, tail = causal_conv(y, w, cache.conv[i])
        qkv.append(F.silu(y).reshape(T, H, dk))   # SiLU whatever hidden_act says
        tails.append(tail)
    q, k, v = qkv
    graw = (x @ W.get(p + "f_a_proj.weight", dt).T) @ W.get(p + "f_b_proj.weight", dt).T
    g = kda_gate(cfg, graw, W.get(p + "A_log", dt), W.get(p + "dt_bias", dt))
    beta = torch.sigmoid(x @ W.get(p + "b_proj.weight", dt).T)                       # [T, H]
    q = l2_normalize(q) * dk ** -0.5
    k = l2_normalize(k)
    o, S = kda_recurrence(q, k, v, g, beta, cache.state)                             # [T, H, dk]
    if cfg.full_rank_gate:
        gate = x @ W.get(p + "g_proj.weight", dt).T
    else:
        gate = (x @ W.get(p + "g_a_proj.weight", dt).T) @ W.get(p + "g_b_proj.weight", dt).T
    o = rms_norm(o, W.get(p + "o_norm.weight", dt), cfg.rms_norm_eps) * torch.sigmoid(gate.reshape(T, H, dk))
    return o.reshape(T, C) @ W.get(p + "o_proj.weight", dt).T, KdaCache(tails, S)


def mla_attention(cfg, W, p, x, cache: Optional[MlaCache], dt):
    """Gated MLA without RoPE on x [T, d]. With no past tokens: the expanded form (per-head k and v from kv_b);
    with a cache: the absorbed form over the latent cache (kv_b's k rows folded into q, its v rows applied after
    attention), so prefill and decode run different algebra of the same math."""
    H, nope, rope, vd, r = (cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim,
                            cfg.kv_lora_rank)
    T = x.shape[0]
    if cfg.q_lora_rank:
        qa = rms_norm(x @ W.get(p + "q_a_proj.weight", dt).T, W.get(p + "q_a_layernorm.weight", dt), MLA_NORM_EPS)
        q = qa @ W.get(p + "q_b_proj.weight", dt).T
    else:
        q = x @ W.get(p + "q_proj.weight", dt).T
    q = q.reshape(T, H, nope + rope)
    ckv = x @ W.get(p + "kv_a_proj_with_mqa.weight", dt).T
    c = rms_norm(ckv[:, :r], W.get(p + "kv_a_layernorm.weight", dt), MLA_NORM_EPS)   # [T, r]
    k_tail = ckv[:, r:]                                                               # [T, rope]
    kv_b = W.get(p + "kv_b_proj.weight", dt).reshape(H, nope + vd, r)
    w_uk, w_uv = kv_b[:, :nope], kv_b[:, nope:]                                       # [H, nope, r], [H, vd, r]
    scale = (nope + rope) ** -0.5
    past = 0 if cache is None else cache.latent.shape[0]
    lat = c if cache is None else torch.cat([cache.latent, c])
    tail = k_tail if cache is None else torch.cat([cache.k_tail, k_tail])
    S = past + T
    mask = torch.arange(S).unsqueeze(0) <= (past + torch.arange(T)).unsqueeze(1)     # [T, S]
    if past == 0:
        k_nope = torch.einsum("hnr,sr->shn", w_uk, lat)                              # [S, H, nope]
        keys = torch.cat([k_nope, tail.unsqueeze(1).expand(S, H, rope)], dim=-1)
        vals = torch.einsum("hvr,sr->shv", w_uv, lat)
        scores = torch.einsum("thd,shd->hts", q, keys) * scale
        probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        attn = torch.einsum("hts,shv->thv", probs, vals)
    else:
        q_lat = torch.einsum("thn,hnr->thr", q[..., :nope], w_uk)                     # [T, H, r]
        scores = (torch.einsum("thr,sr->hts", q_lat, lat) + torch.einsum("thd,sd->hts", q[..., nope:], tail)) * scale
        probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        attn = torch.einsum("hvr,thr->thv", w_uv, torch.einsum("hts,sr->thr", probs, lat))
    attn = attn.reshape(T, H * vd)
    if cfg.mla_output_gate:
        attn = attn * torch.sigmoid(x @ W.get(p + "g_proj.weight", dt).T)
    return attn @ W.get(p + "o_proj.weight", dt).T, MlaCache(lat, tail)


def moe_ffn(cfg, W, p, x, dt, probe=None):
    """LatentMoE on x [T, d] (post_attention_layernorm output): routed experts in the latent space with
    RMSNorm on their weighted sum, plus the merged shared experts at full width."""
    bias_name = p + "gate.e_score_correction_bias"
    bias = W.get(bias_name, dt) if W.has(bias_name) else None
    idx, w = route(cfg, x, W.get(p + "gate.weight", dt), bias, probe)
    latent = cfg.latent_size is not None
    xl = x @ W.get(p + "routed_expert_down_proj.weight", dt).T if latent else x
    y = torch.zeros_like(xl)
    experts = [(W.get(f"{p}experts.{e}.w1.weight", dt), W.get(f"{p}experts.{e}.w3.weight", dt),
                W.get(f"{p}experts.{e}.w2.weight", dt)) for e in range(cfg.num_experts)]
    for t in range(x.shape[0]):
        for j in range(cfg.top_k):
            w1, w3, w2 = experts[int(idx[t, j])]
            y[t] += w[t, j] * (glu_act(cfg, w1 @ xl[t], w3 @ xl[t]) @ w2.T)
    if latent:
        if cfg.latent_norm:
            y = rms_norm(y, W.get(p + "routed_expert_norm.weight", dt), cfg.rms_norm_eps)
        y = y @ W.get(p + "routed_expert_up_proj.weight", dt).T
    if cfg.num_shared_experts:
        y = y + glu_mlp(cfg, W, p + "shared_experts.", x, dt)
    return y


# ---------------------------------------------------------------------------------------------------- model


@dataclass
class Cache:
    layers: list = field(default_factory=list)   # per layer: KdaCache | MlaCache | None before the first token
    length: int = 0


class K3Model:
    """The text tower over a Weights object. forward(ids, cache) runs ids after what the cache holds and returns
    (logits [T, V], new cache); a fresh call with cache None is the full-sequence prefill."""

    def __init__(self, cfg: K3Config, W: Weights, dtype=torch.float32):
        self.cfg, self.W, self.dt = cfg, W, dtype
        self.probe: Optional[RoutingProbe] = None

    def _ffn(self, layer, x):
        p = f"model.layers.{layer}."
        if self.cfg.is_moe(layer):
            return moe_ffn(self.cfg, self.W, p + "block_sparse_moe.", x, self.dt, self.probe)
        return glu_mlp(self.cfg, self.W, p + "mlp.", x, self.dt)

    def _attn(self, layer, x, cache):
        p = f"model.layers.{layer}.self_attn."
        if self.cfg.is_kda(layer):
            return kda_attention(self.cfg, self.W, p, x, cache, self.dt)
        return mla_attention(self.cfg, self.W, p, x, cache, self.dt)

    def _norm(self, name, x):
        return rms_norm(x, self.W.get(name, self.dt), self.cfg.rms_norm_eps)

    def _ar(self, prefix, p, blocks):
        W, dt = self.W, self.dt
        return attn_res(blocks + [p], W.get(prefix + "_norm.weight", dt), W.get(prefix + "_proj.weight", dt),
                        self.cfg.rms_norm_eps)

    def hidden(self, ids: List[int], cache: Optional[Cache] = None):
        cfg, W, dt = self.cfg, self.W, self.dt
        cache = cache or Cache([None] * cfg.num_hidden_layers, 0)
        new_layers = []
        h = W.get("model.embed_tokens.weight", dt)[torch.tensor(ids, dtype=torch.long)]
        B = cfg.attn_res_block_size
        blocks: List[torch.Tensor] = []
        for l in range(cfg.num_hidden_layers):
            pre = f"model.layers.{l}."
            if not B:  # plain pre-norm residual stream
                a, c = self._attn(l, self._norm(pre + "input_layernorm.weight", h), cache.layers[l])
                h = h + a
                h = h + self._ffn(l, self._norm(pre + "post_attention_layernorm.weight", h))
                new_layers.append(c)
                continue
            # AttnRes: h is the running sum of the current block's outputs, blocks the earlier sums (embedding
            # first). Layer 0's self_attention_res_* exist in the file but have nothing to attend over.
            if l == 0:
                W.get(pre + "self_attention_res_norm.weight"), W.get(pre + "self_attention_res_proj.weight")
            p = h
            x = self._ar(pre + "self_attention_res", p, blocks) if blocks else h
            if l % B == 0:
                blocks.append(p)
                p = None
            a, c = self._attn(l, self._norm(pre + "input_layernorm.weight", x), cache.layers[l])
            p = a if p is None else p + a
            y = self._ar(pre + "mlp_res", p, blocks)
            h = p + self._ffn(l, self._norm(pre + "post_attention_layernorm.weight", y))
            new_layers.append(c)
        if B:
            h = self._ar("model.output_attn_res", h, blocks)
        return self._norm("model.norm.weight", h), Cache(new_layers, cache.length + len(ids))

    def forward(self, ids: List[int], cache: Optional[Cache] = None):
        h, cache = self.hidden(ids, cache)
        head = "model.embed_tokens.weight" if self.cfg.tie_word_embeddings else "lm_head.weight"
        return h @ self.W.get(head, self.dt).T, cache


def load(model_dir: str, dtype=torch.float32) -> K3Model:
    return K3Model(read_config(model_dir), Weights(model_dir), dtype)


def run_golden(model: K3Model, prompt: List[int], decode_len: int):
    """Logits of one prefill over the prompt, then decode_len greedy steps fed one token at a time through the
    caches. Returns (logits [len(prompt) + decode_len, V], the greedy decode ids)."""
    logits, cache = model.forward(prompt)
    rows, decode = [logits], []
    for _ in range(decode_len):
        nxt = int(rows[-1][-1].argmax())
        decode.append(nxt)
        out, cache = model.forward([nxt], cache)
        rows.append(out)
    return torch.cat(rows), decode
