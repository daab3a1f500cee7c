# Cross-checks of the K3 reference (k3_reference.py) against independent code: transformers' kimi_linear KDA and
# MLA layers and whole model, transformers' glm5_next bounded-gate KDA, fla's naive KDA and gates, compressed-
# tensors' MXFP4 decompression, and a float64 numpy forward written separately from the K3 math. Offline only.
# Run: python3 test_k3_reference.py (prints the figures), or python3 -m pytest. fla: FLA_CORE_PATH=<dir with fla/>.
import ast
import importlib.util
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3_reference as R  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
K3_DATA = os.path.join(REPO, "tests", "data", "k3")
HF_DATA = os.path.join(REPO, "tests", "data", "hf")
FLA_PATH = os.environ.get("FLA_CORE_PATH", "/tmp/fla_core")
FIGURES = {}

torch.set_num_threads(1)


def figure(name, value):
    FIGURES[name] = value
    return value


def maxdiff(a, b):
    return float((torch.as_tensor(a).double() - torch.as_tensor(b).double()).abs().max())


def tiny_cfg(**kw) -> R.K3Config:
    """A K3Config for layer-level checks: hidden 64, KDA 2 heads x 16, MLA 4 heads."""
    base = dict(vocab_size=256, hidden_size=64, num_hidden_layers=1, rms_norm_eps=1e-5, tie_word_embeddings=False,
                hidden_act="silu", situ_beta=1.0, situ_gamma=None, attn_res_block_size=None, kda_layers=[0],
                num_attention_heads=4, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                v_head_dim=16, mla_output_gate=False, kda_heads=2, kda_head_dim=16, conv_kernel=4,
                gate_lower_bound=None, full_rank_gate=False, intermediate_size=64, first_k_dense_replace=1,
                moe_layer_freq=1, num_experts=0, top_k=0, num_shared_experts=0, moe_intermediate_size=0,
                latent_size=None, latent_norm=False, router_act="sigmoid", renormalize=True,
                routed_scaling_factor=1.0, num_expert_group=1, topk_group=1)
    base.update(kw)
    return R.K3Config(**base)


def randomize(module, seed):
    """Non-trivial random parameters for a transformers layer (decays in (0.3, 1), gates away from 0.5)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters()):
            if name.endswith("A_log"):
                v = torch.empty(p.shape).uniform_(np.log(0.5), np.log(2.0), generator=g)
            elif name.endswith("dt_bias"):
                v = torch.randn(p.shape, generator=g) - 2.0
            elif "norm" in name:
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
            elif "conv1d" in name:
                v = 0.5 * torch.randn(p.shape, generator=g)
            else:
                v = torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5
            p.copy_(v)


def kda_weights_from_hf(layer, full_rank=False):
    """transformers' KDA parameters under the checkpoint names (fused conv split into q/k/v)."""
    sd = {k: v for k, v in layer.state_dict().items()}
    C = layer.qkv_dim
    conv = sd.pop("conv1d.weight")
    out = {"q_conv1d.weight": conv[:C], "k_conv1d.weight": conv[C:2 * C], "v_conv1d.weight": conv[2 * C:]}
    for k, v in sd.items():
        out[k.replace("forget_gate.", "")] = v
    return R.Weights.from_tensors(out)


# ---------------------------------------------------------------------------------------------------- KDA / MLA


def test_kda_kimi_gate_matches_transformers_kimi_linear():
    """Kimi-Linear's gate (-exp(A_log) softplus) and low-rank output gate vs transformers' KDA layer (its chunked
    WY form, 64-token chunks, over 150 tokens), plus our cached continuation vs its full run."""
    import transformers as T
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearDeltaAttention
    hf_cfg = T.KimiLinearConfig(hidden_size=64, num_hidden_layers=1, linear_attn_config={
        "kda_layers": [1], "full_attn_layers": [], "num_heads": 2, "head_dim": 16, "short_conv_kernel_size": 4},
        hidden_act="silu", rms_norm_eps=1e-5, num_attention_heads=4)
    layer = KimiLinearDeltaAttention(hf_cfg, 0).eval()
    randomize(layer, 11)
    x = torch.randn(1, 150, 64, generator=torch.Generator().manual_seed(12))
    with torch.no_grad():
        want = layer(x)[0]
    W, cfg = kda_weights_from_hf(layer), tiny_cfg()
    got, _ = R.kda_attention(cfg, W, "", x[0], None, torch.float32)
    a, cache = R.kda_attention(cfg, W, "", x[0, :100], None, torch.float32)
    b, _ = R.kda_attention(cfg, W, "", x[0, 100:], cache, torch.float32)
    d = figure("kda_kimi_vs_transformers_max_abs", maxdiff(got, want))
    dc = figure("kda_kimi_cached_vs_transformers_max_abs", maxdiff(torch.cat([a, b]), want))
    figure("kda_kimi_output_max_abs", float(want.abs().max()))
    assert W.unused() == [] and d < 1e-5 and dc < 1e-5, (d, dc)


def test_kda_bounded_gate_matches_transformers_glm5_next():
    """K3's bounded gate lb*sigmoid(exp(A_log)(graw + dt_bias)) vs transformers' glm5_next KDA layer
    (linear_lower_bound -5, low-rank output gate), 150 tokens."""
    import transformers as T
    from transformers.models.glm5_next.modeling_glm5_next import Glm5NextTextLinearAttention
    hf_cfg = T.Glm5NextTextConfig(hidden_size=64, linear_head_dim=16, linear_num_heads=2, linear_conv_kernel_dim=4,
                                  linear_lower_bound=-5.0, hidden_act="silu", rms_norm_eps=1e-5, num_hidden_layers=1)
    layer = Glm5NextTextLinearAttention(hf_cfg, 0).eval()
    randomize(layer, 21)
    x = torch.randn(1, 150, 64, generator=torch.Generator().manual_seed(22))
    with torch.no_grad():
        want = layer(x)[0]
    W, cfg = kda_weights_from_hf(layer), tiny_cfg(gate_lower_bound=-5.0)
    got, _ = R.kda_attention(cfg, W, "", x[0], None, torch.float32)
    d = figure("kda_bounded_vs_glm5_next_max_abs", maxdiff(got, want))
    assert d < 1e-5, d


def _hf_mla(q_lora_rank, seed):
    import transformers as T
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearAttention
    hf_cfg = T.KimiLinearConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4,
                                q_lora_rank=q_lora_rank, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                                v_head_dim=16, linear_attn_config={"kda_layers": [], "full_attn_layers": [1]},
                                rms_norm_eps=1e-5)
    hf_cfg._attn_implementation = "eager"
    layer = KimiLinearAttention(hf_cfg, 0).eval()
    randomize(layer, seed)
    return layer


def test_mla_without_rope_matches_transformers_kimi_linear():
    """Our MLA (expanded prefill, absorbed continuation over the latent cache) vs transformers' Kimi-Linear MLA
    (no RoPE, shared k tail), with and without the q LoRA path; 40 tokens, continuation after 13."""
    for rank, tag in ((32, "qlora"), (None, "qproj")):
        layer = _hf_mla(rank, 31)
        T_ = 40
        x = torch.randn(1, T_, 64, generator=torch.Generator().manual_seed(32))
        mask = torch.full((T_, T_), float("-inf")).triu(1).reshape(1, 1, T_, T_)
        with torch.no_grad():
            want = layer(x, attention_mask=mask)[0][0]
        W, cfg = R.Weights.from_tensors(dict(layer.state_dict())), tiny_cfg(q_lora_rank=rank, kda_layers=[])
        full, _ = R.mla_attention(cfg, W, "", x[0], None, torch.float32)
        a, cache = R.mla_attention(cfg, W, "", x[0, :13], None, torch.float32)
        b, _ = R.mla_attention(cfg, W, "", x[0, 13:], cache, torch.float32)
        d = figure(f"mla_{tag}_expanded_vs_transformers_max_abs", maxdiff(full, want))
        da = figure(f"mla_{tag}_absorbed_vs_transformers_max_abs", maxdiff(torch.cat([a, b]), want))
        assert W.unused() == [] and d < 1e-5 and da < 1e-5, (tag, d, da)


# ---------------------------------------------------------------------------------------------------- fla


def _fla_naive():
    """fla's naive KDA (fla/ops/kda/naive.py needs only torch + einops) and its naive gate functions, taken out
    of fla/ops/kda/gate.py without importing it (the module needs triton)."""
    naive_path = os.path.join(FLA_PATH, "fla", "ops", "kda", "naive.py")
    gate_path = os.path.join(FLA_PATH, "fla", "ops", "kda", "gate.py")
    if not (os.path.exists(naive_path) and os.path.exists(gate_path)):
        return None
    sys.path.insert(0, FLA_PATH)  # einops installed beside fla
    spec = importlib.util.spec_from_file_location("fla_kda_naive", naive_path)
    naive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(naive)
    src = open(gate_path).read()
    funcs = [n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name.startswith("naive_")]
    ns = {"torch": torch, "F": torch.nn.functional}
    exec(compile(ast.Module(body=funcs, type_ignores=[]), gate_path, "exec"), ns)
    return naive, ns


def _random_kda_inputs(T_, H=2, dk=16, seed=41, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(T_, H, dk, generator=g, dtype=dtype)
    k = torch.randn(T_, H, dk, generator=g, dtype=dtype)
    v = torch.randn(T_, H, dk, generator=g, dtype=dtype)
    graw = torch.randn(T_, H * dk, generator=g, dtype=dtype) * 0.5
    beta = torch.sigmoid(torch.randn(T_, H, generator=g, dtype=dtype))
    a_log = torch.empty(128, dtype=dtype).uniform_(-0.7, 0.7, generator=g)
    dt_bias = torch.randn(H * dk, generator=g, dtype=dtype) - 2.0
    return q, k, v, graw, beta, a_log, dt_bias


def test_kda_recurrence_and_gates_match_fla_naive():
    fla = _fla_naive()
    if fla is None:
        print(f"  fla not found under {FLA_PATH}: skipped (pip install --target DIR --no-deps fla-core einops)")
        return
    naive, gates = fla
    T_, H, dk = 128, 2, 16
    q, k, v, graw, beta, a_log, dt_bias = _random_kda_inputs(T_)
    for lb, tag in ((-5.0, "bounded"), (None, "softplus")):
        cfg = tiny_cfg(gate_lower_bound=lb)
        g = R.kda_gate(cfg, graw, a_log, dt_bias)
        if lb is None:
            fg = gates["naive_kda_gate"](graw.reshape(T_, H, dk), a_log[:H], dt_bias, output_dtype=torch.float64)
        else:
            fg = gates["naive_kda_lowerbound_gate"](graw.reshape(T_, H, dk), a_log[:H], dt_bias, lower_bound=lb,
                                                    output_dtype=torch.float64)
        dg = figure(f"gate_{tag}_vs_fla_naive_max_abs", maxdiff(g, fg))
        assert dg < 1e-6, (tag, dg)  # fla's naive code computes in float32 whatever it is given
    g = R.kda_gate(tiny_cfg(gate_lower_bound=-5.0), graw, a_log, dt_bias)
    qn, kn = R.l2_normalize(q), R.l2_normalize(k)
    S0 = torch.zeros(H, dk, dk, dtype=torch.float64)
    o, S = R.kda_recurrence(qn * dk ** -0.5, kn, v, g, beta, S0)
    batch = [t.unsqueeze(0) for t in (qn, kn, v, g, beta)]
    fo, fS = naive.naive_recurrent_kda(*batch, scale=dk ** -0.5, output_final_state=True)
    co, cS = naive.naive_chunk_kda(*batch, scale=dk ** -0.5, output_final_state=True, chunk_size=32)
    d1 = figure("kda_recurrence_vs_fla_naive_recurrent_max_abs", max(maxdiff(o, fo[0]), maxdiff(S, fS[0])))
    d2 = figure("kda_recurrence_vs_fla_naive_chunk_max_abs", max(maxdiff(o, co[0]), maxdiff(S, cS[0])))
    figure("kda_recurrence_output_max_abs", float(o.abs().max()))
    assert d1 < 1e-5 and d2 < 1e-5, (d1, d2)


def test_kda_recurrence_matches_transformers_chunked_and_recurrent():
    from transformers.models.kimi_linear.modeling_kimi_linear import (chunk_kimi_delta_attention,
                                                                      recurrent_kimi_delta_attention)
    T_, H, dk = 150, 2, 16
    q, k, v, graw, beta, a_log, dt_bias = _random_kda_inputs(T_, dtype=torch.float32, seed=43)
    g = R.kda_gate(tiny_cfg(gate_lower_bound=-5.0), graw, a_log, dt_bias)
    o, S = R.kda_recurrence(R.l2_normalize(q) * dk ** -0.5, R.l2_normalize(k), v, g, beta,
                            torch.zeros(H, dk, dk))
    batch = [t.unsqueeze(0) for t in (q, k, v, g, beta)]
    co, cS = chunk_kimi_delta_attention(*batch, output_final_state=True, use_qk_l2norm_in_kernel=True)
    ro, rS = recurrent_kimi_delta_attention(*batch, initial_state=None, output_final_state=True,
                                            use_qk_l2norm_in_kernel=True)
    d1 = figure("kda_recurrence_vs_transformers_chunk_max_abs", max(maxdiff(o, co[0]), maxdiff(S, cS[0])))
    d2 = figure("kda_recurrence_vs_transformers_recurrent_max_abs", max(maxdiff(o, ro[0]), maxdiff(S, rS[0])))
    assert d1 < 1e-5 and d2 < 1e-5, (d1, d2)


# ---------------------------------------------------------------------------------------------------- whole models


def test_reference_reproduces_transformers_kimi_linear_goldens():
    """The committed Kimi-Linear fixture (goldens from transformers): prefill, cached decode, greedy ids."""
    d = os.path.join(HF_DATA, "kimi_linear_f32")
    g = json.load(open(os.path.join(d, "golden.json")))
    want = np.load(os.path.join(d, "golden_logits.npy"))
    model = R.load(d)
    got, decode = R.run_golden(model, g["prompt_ids"], len(g["decode_ids"]))
    diff = figure("kimi_linear_f32_vs_transformers_goldens_max_abs", maxdiff(got, want))
    assert decode == g["decode_ids"] and model.W.unused() == [] and diff < 1e-4, diff


def k3_fixtures():
    return sorted(n for n in os.listdir(K3_DATA) if os.path.isdir(os.path.join(K3_DATA, n)))


def test_k3_goldens_reproduce_and_decode_equals_prefill():
    """Each committed K3 golden is what the reference computes now; a split prefill (20 + 12 tokens, the second
    chunk through the absorbed MLA and carried KDA state) and the teacher-forced 48-token prefill match it."""
    for name in k3_fixtures():
        d = os.path.join(K3_DATA, name)
        g = json.load(open(os.path.join(d, "golden.json")))
        want = torch.from_numpy(np.load(os.path.join(d, "golden_logits.npy")))
        model = R.load(d)
        got, decode = R.run_golden(model, g["prompt_ids"], len(g["decode_ids"]))
        assert decode == g["decode_ids"] and torch.equal(got, want), name
        assert model.W.unused() == [], (name, model.W.unused()[:3])
        ids = g["prompt_ids"] + g["decode_ids"]
        a, cache = model.forward(ids[:20])
        b, _ = model.forward(ids[20:], cache)
        full, _ = model.forward(ids)
        figure(f"{name}_split_prefill_vs_golden_max_abs", maxdiff(torch.cat([a, b]), want))
        figure(f"{name}_teacher_forced_vs_golden_max_abs", maxdiff(full, want))
        assert maxdiff(torch.cat([a, b]), want) < 1e-3 and maxdiff(full, want) < 1e-3


# ---------------------------------------------------------------------------------------------------- numpy f64


def np_mxfp4(packed, scale):
    """MXFP4 -> float64, by bit operations on numpy arrays (exact for finite scales)."""
    lut = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)
    b = packed.astype(np.int64)
    codes = np.empty((b.shape[0], 2 * b.shape[1]), dtype=np.int64)
    codes[:, 0::2], codes[:, 1::2] = b & 15, b >> 4
    vals = lut[codes & 7] * np.where(codes >= 8, -1.0, 1.0)
    return vals * np.repeat(np.ldexp(1.0, scale.astype(np.int64) - 127), 32, axis=1)


def np_weights(model_dir):
    from safetensors import safe_open
    W = {}
    with safe_open(os.path.join(model_dir, "model.safetensors"), "pt") as f:
        for k in f.keys():
            if not k.startswith("language_model."):
                continue
            n = k[len("language_model."):]
            if n.endswith("weight_scale"):
                continue
            if n.endswith("weight_packed"):
                W[n[:-7]] = np_mxfp4(f.get_tensor(k).numpy(), f.get_tensor(k[:-6] + "scale").numpy())
            else:
                W[n] = f.get_tensor(k).to(torch.float64).numpy()
    return W


def np_forward(model_dir, ids):
    """Token by token in float64, AttnRes in its block form: a sublayer of layer l attends over the embedding,
    the sums of the blocks of B layers that ended by layer l, and the running sum of layer l's block so far."""
    c = json.load(open(os.path.join(model_dir, "config.json")))["text_config"]
    W = np_weights(model_dir)
    lin = c["linear_attn_config"]
    L, B, eps, d = c["num_hidden_layers"], c["attn_res_block_size"], c["rms_norm_eps"], c["hidden_size"]
    H, dk, K = lin["num_heads"], lin["head_dim"], lin["short_conv_kernel_size"]
    Hm, nope, rope, vd, r = (c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"],
                             c["v_head_dim"], c["kv_lora_rank"])
    beta_s, gamma_s = c["activation_situ_beta"], c["activation_situ_linear_beta"]
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    rmsn = lambda z, w, e=eps: z / np.sqrt(np.mean(z * z, -1, keepdims=True) + e) * w  # noqa: E731
    situ = lambda g_, u: beta_s * np.tanh(g_ / beta_s) * sig(g_) * gamma_s * np.tanh(u / gamma_s)  # noqa: E731

    def glu(p, x):
        return W[p + "down_proj.weight"] @ situ(W[p + "gate_proj.weight"] @ x, W[p + "up_proj.weight"] @ x)

    def ar(p, sources):
        q = W[p + "_norm.weight"] * W[p + "_proj.weight"][0]
        s = np.array([np.sum(v / np.sqrt(np.mean(v * v) + eps) * q) for v in sources])
        a = np.exp(s - s.max())
        a /= a.sum()
        return sum(w * v for w, v in zip(a, sources))

    kda_set = {i - 1 for i in lin["kda_layers"]}
    state = {l: {"S": np.zeros((H, dk, dk)), "hist": [np.zeros((K - 1, H * dk)) for _ in range(3)]}
             if l in kda_set else {"k": [], "v": []} for l in range(L)}
    rows = []
    for tok in ids:
        emb = W["model.embed_tokens.weight"][tok]
        outs = []  # (layer, output) of every sublayer so far, this token

        def sources(l, partial_extra=()):
            done = [emb] + [sum(o for j, o in outs if (n - 1) * B <= j < n * B) for n in range(1, l // B + 1)]
            cur = [o for j, o in outs if (l // B) * B <= j < l] + list(partial_extra)
            return done + ([sum(cur)] if cur else [])

        for l in range(L):
            p = f"model.layers.{l}."
            x = rmsn(ar(p + "self_attention_res", sources(l)), W[p + "input_layernorm.weight"])
            a_ = p + "self_attn."
            st = state[l]
            if l in kda_set:
                qkv = []
                for i, n in enumerate("qkv"):
                    cur = W[a_ + f"{n}_proj.weight"] @ x
                    window = np.vstack([st["hist"][i], cur])                            # [K, C], oldest first
                    w = W[a_ + f"{n}_conv1d.weight"][:, 0, :]                          # [C, K]
                    y = np.sum(window.T * w, axis=1)
                    qkv.append((y * sig(y)).reshape(H, dk))
                    st["hist"][i] = window[1:]
                q, k, v = qkv
                z = (W[a_ + "f_b_proj.weight"] @ (W[a_ + "f_a_proj.weight"] @ x) + W[a_ + "dt_bias"]).reshape(H, dk)
                g = lin["gate_lower_bound"] * sig(np.exp(W[a_ + "A_log"][:H])[:, None] * z)
                bt = sig(W[a_ + "b_proj.weight"] @ x)
                gate = sig(W[a_ + "g_proj.weight"] @ x).reshape(H, dk)
                o = np.zeros((H, dk))
                for h in range(H):
                    qh = q[h] / np.sqrt(q[h] @ q[h] + 1e-6) / np.sqrt(dk)
                    kh = k[h] / np.sqrt(k[h] @ k[h] + 1e-6)
                    S = np.diag(np.exp(g[h])) @ st["S"][h]
                    S = S + bt[h] * np.outer(kh, v[h] - S.T @ kh)
                    st["S"][h] = S
                    o[h] = rmsn(S.T @ qh, W[a_ + "o_norm.weight"]) * gate[h]
                attn = W[a_ + "o_proj.weight"] @ o.reshape(-1)
            else:
                qa = rmsn(W[a_ + "q_a_proj.weight"] @ x, W[a_ + "q_a_layernorm.weight"], 1e-6)
                q = (W[a_ + "q_b_proj.weight"] @ qa).reshape(Hm, nope + rope)
                ckv = W[a_ + "kv_a_proj_with_mqa.weight"] @ x
                cn = rmsn(ckv[:r], W[a_ + "kv_a_layernorm.weight"], 1e-6)
                kvb = (W[a_ + "kv_b_proj.weight"] @ cn).reshape(Hm, nope + vd)
                st["k"].append(np.concatenate([kvb[:, :nope], np.tile(ckv[r:], (Hm, 1))], axis=1))
                st["v"].append(kvb[:, nope:])
                Ks, Vs = np.stack(st["k"]), np.stack(st["v"])                            # [t, Hm, *]
                o = np.zeros((Hm, vd))
                for h in range(Hm):
                    s = Ks[:, h] @ q[h] / np.sqrt(nope + rope)
                    e = np.exp(s - s.max())
                    o[h] = (e / e.sum()) @ Vs[:, h]
                attn = W[a_ + "o_proj.weight"] @ (o.reshape(-1) * sig(W[a_ + "g_proj.weight"] @ x))
            outs.append((l, attn))
            y = rmsn(ar(p + "mlp_res", sources(l, [attn])), W[p + "post_attention_layernorm.weight"])
            if l < c["first_k_dense_replace"]:
                f = glu(p + "mlp.", y)
            else:
                m = p + "block_sparse_moe."
                s = sig(W[m + "gate.weight"] @ y)
                choice = s + W[m + "gate.e_score_correction_bias"]
                G, E = c["num_expert_group"], c["num_experts"]
                if G > 1:
                    per = E // G
                    gs = np.array([np.sort(choice[i * per:(i + 1) * per])[-2:].sum() for i in range(G)])
                    keep = np.argsort(-gs, kind="stable")[:c["topk_group"]]
                    choice = np.where(np.isin(np.arange(E) // per, keep), choice, -np.inf)
                idx = np.argsort(-choice, kind="stable")[:c["num_experts_per_token"]]
                wts = s[idx] / (s[idx].sum() + 1e-20) * c["routed_scaling_factor"]
                xl = W[m + "routed_expert_down_proj.weight"] @ y
                yl = sum(w * (W[m + f"experts.{e}.w2.weight"] @ situ(W[m + f"experts.{e}.w1.weight"] @ xl,
                                                                      W[m + f"experts.{e}.w3.weight"] @ xl))
                         for w, e in zip(wts, idx))
                yl = rmsn(yl, W[m + "routed_expert_norm.weight"])
                f = W[m + "routed_expert_up_proj.weight"] @ yl + glu(m + "shared_experts.", y)
            outs.append((l, f))
        h = rmsn(ar("model.output_attn_res", sources(L)), W["model.norm.weight"])
        rows.append(W["lm_head.weight"] @ h)
    return np.stack(rows)


def test_numpy_float64_forward_matches_goldens():
    """An independent float64 numpy forward (block-form AttnRes, explicit per-head KDA matrices, expanded MLA
    per token, numpy MXFP4 decoding) reproduces the float32 goldens, prompt and cached decode rows."""
    for name in k3_fixtures():
        d = os.path.join(K3_DATA, name)
        g = json.load(open(os.path.join(d, "golden.json")))
        want = np.load(os.path.join(d, "golden_logits.npy"))
        got = np_forward(d, g["prompt_ids"] + g["decode_ids"])
        diff = figure(f"{name}_numpy_f64_vs_golden_max_abs", float(np.abs(got - want).max()))
        assert diff < 1e-3, (name, diff)


# ---------------------------------------------------------------------------------------------------- MXFP4, units


def test_mxfp4_dequant_matches_compressed_tensors():
    from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor
    from compressed_tensors.quantization import preset_name_to_scheme
    scheme = preset_name_to_scheme("MXFP4A16", targets=["Linear"])
    g = torch.Generator().manual_seed(51)
    packed = torch.randint(0, 256, (37, 80), generator=g, dtype=torch.uint8)
    scale = torch.randint(0, 256, (37, 5), generator=g, dtype=torch.uint8)
    theirs = MXFP4PackedCompressor.decompress({"weight_packed": packed, "weight_scale": scale}, scheme)["weight"]
    theirs = theirs.float()
    ours = R.mxfp4_dequantize(packed, scale)
    same_nan = torch.equal(theirs.isnan(), ours.isnan())
    finite = ~theirs.isnan()
    assert same_nan and torch.equal(theirs[finite], ours[finite])
    vec = json.load(open(os.path.join(K3_DATA, "mxfp4_vectors.json")))
    for case in vec["cases"]:
        got = R.mxfp4_dequantize(torch.tensor(case["weight_packed"], dtype=torch.uint8),
                                 torch.tensor(case["weight_scale"], dtype=torch.uint8))
        want = torch.tensor([[float(v) for v in row] for row in case["values"]], dtype=torch.float64)
        assert torch.equal(got.isnan(), want.isnan()), case["name"]
        assert torch.equal(got.double()[~want.isnan()], want[~want.isnan()]), case["name"]
    figure("mxfp4_random_37x160_all_scales_bit_exact", True)


def test_attn_res_of_one_source_is_that_source_and_situ_limits():
    v = torch.randn(5, 64, dtype=torch.float64)
    assert torch.equal(R.attn_res([v], torch.ones(64, dtype=torch.float64), torch.randn(1, 64, dtype=torch.float64),
                                  1e-5), v)
    g, u = torch.randn(100, dtype=torch.float64), torch.randn(100, dtype=torch.float64)
    plain = tiny_cfg(hidden_act="situ", situ_beta=1.0, situ_gamma=None)
    assert torch.allclose(R.glu_act(plain, g, u), torch.sigmoid(g) * torch.tanh(g) * u)
    k3 = tiny_cfg(hidden_act="situ", situ_beta=4.0, situ_gamma=25.0)
    assert torch.allclose(R.glu_act(k3, g, u), 4 * torch.tanh(g / 4) * torch.sigmoid(g) * 25 * torch.tanh(u / 25))


def main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    for name, fn in tests:
        fn()
        print(f"ok  {name}")
    print(json.dumps(FIGURES, indent=1))


if __name__ == "__main__":
    main()
