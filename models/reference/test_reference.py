# Self-checks for the PyTorch reference: safetensors I/O, stable top-K, loop vs vectorized MoE, an
# independent float64 numpy forward, and the committed fixtures. Run: python3 -m pytest, or python3 this.
import json
import math
import os
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io as st  # noqa: E402
from make_random_model import BASE, PRESETS, write_model  # noqa: E402
from stable_latent_moe import Config, load_model, stable_topk  # noqa: E402

FIXTURES = os.path.join(HERE, "..", "..", "tests", "data", "fixtures")
_TMP = tempfile.TemporaryDirectory()


def preset_dir(name):
    """A freshly written random model for a preset (cached per run)."""
    path = os.path.join(_TMP.name, name)
    if not os.path.exists(path):
        overrides, opts = PRESETS[name]
        write_model(path, {**BASE, **overrides}, seed=7, shards=opts.get("shards", 1),
                    router_ties=opts.get("router_ties", False))
    return path


# ---------------------------------------------------------------- independent numpy forward (float64)


def np_rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def np_act(name, x):
    sig = 1.0 / (1.0 + np.exp(-x))
    return sig * np.tanh(x) if name == "situ" else x * sig


def np_glu(W, prefix, x, act):
    g = W[prefix + "gate_proj.weight"] @ x
    u = W[prefix + "up_proj.weight"] @ x
    return W[prefix + "down_proj.weight"] @ (np_act(act, g) * u)


def np_forward(model_dir, ids):
    """Token-by-token float64 forward straight from docs/math.md (no torch)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    W = {n: a.astype(np.float64) for n, a in st.load_model(model_dir)[0].items()}
    d, H, Hkv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    eps, K, act = c["rms_norm_eps"], c["num_experts_per_tok"], c["hidden_act"]
    T = len(ids)
    x = np.stack([W["model.embed_tokens.weight"][i] for i in ids])  # [T, d]
    half = hd // 2
    inv_freq = c["rope_theta"] ** (-2.0 * np.arange(half) / hd)

    def rope(v, pos):  # v: [hd]
        out = v.copy()
        for i in range(half):
            a = pos * inv_freq[i]
            out[i] = v[i] * math.cos(a) - v[i + half] * math.sin(a)
            out[i + half] = v[i + half] * math.cos(a) + v[i] * math.sin(a)
        return out

    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = np_rms(x, W[p + "input_layernorm.weight"], eps)
        q = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(T, Hkv, hd)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, Hkv, hd)
        if c["qk_norm"]:
            q = np_rms(q, W[p + "self_attn.q_norm.weight"], eps)
            k = np_rms(k, W[p + "self_attn.k_norm.weight"], eps)
        q = np.array([[rope(q[t, j], t) for j in range(H)] for t in range(T)])
        k = np.array([[rope(k[t, j], t) for j in range(Hkv)] for t in range(T)])
        attn = np.zeros((T, H, hd))
        for t in range(T):
            for j in range(H):
                kv = j * Hkv // H
                s = np.array([q[t, j] @ k[u, kv] for u in range(t + 1)]) / math.sqrt(hd)
                pr = np.exp(s - s.max())
                pr /= pr.sum()
                attn[t, j] = pr @ v[: t + 1, kv]
        x = x + attn.reshape(T, H * hd) @ W[p + "self_attn.o_proj.weight"].T
        h = np_rms(x, W[p + "post_attention_layernorm.weight"], eps)
        x = x + np.stack([np_ffn(W, c, layer, h[t], act, K) for t in range(T)])
    x = np_rms(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight" if c["tie_word_embeddings"] else "lm_head.weight"]
    return x @ head.T


def np_ffn(W, c, layer, h, act, K):
    p = f"model.layers.{layer}.mlp."
    if layer < c["first_k_dense_replace"]:
        return np_glu(W, p, h, act)
    logits = W[p + "gate.weight"] @ h
    if c["scoring_func"] == "sigmoid":
        s = 1.0 / (1.0 + np.exp(-logits))
    else:
        s = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    b = W[p + "gate.e_score_correction_bias"]
    chosen = sorted(range(len(s)), key=lambda e: (-(s[e] + b[e]), e))[:K]
    w = np.array([s[e] for e in chosen])
    if c["norm_topk_prob"]:
        w = w / w.sum()
    w = w * c["routed_scaling_factor"]
    lat = c.get("moe_latent_size")
    z = W[p + "latent_down_proj.weight"] @ h if lat else h
    out = sum(wk * np_glu(W, f"{p}experts.{e}.", z, act) for wk, e in zip(w, chosen))
    if c["expert_output_norm"]:
        out = np_rms(out, W[p + "latent_norm.weight"], c["rms_norm_eps"])
    if lat:
        out = W[p + "latent_up_proj.weight"] @ out
    if c["n_shared_experts"]:
        out = out + np_glu(W, p + "shared_experts.", h, act)
    return out


# ---------------------------------------------------------------- tests


def test_bf16_rounds_to_nearest_even():
    bits = np.array([0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0xBF80FFFF,
                     0x7F800000, 0x7F7FFFFF, 0x00000001], dtype=np.uint32)
    want = [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xBF81, 0x7F80, 0x7F80, 0x0000]
    assert st.f32_to_bf16_bits(bits.view(np.float32)).tolist() == want
    assert np.isnan(st.bf16_bits_to_f32(st.f32_to_bf16_bits(np.array([np.nan], np.float32))))[0]


def test_safetensors_roundtrip_sorted_and_aligned():
    rng = np.random.default_rng(0)
    t = {"b.w": rng.normal(size=(3, 5)), "a.w": rng.normal(size=(7,)), "c": rng.normal(size=(2, 2))}
    dtypes = {"a.w": "BF16", "b.w": "F16", "c": "F32"}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.safetensors")
        st.save_file(path, t, dtypes)
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
        header, start = st.read_header(path)
        assert n % 8 == 0 and start == 8 + n
        assert sorted(header, key=lambda k: header[k]["data_offsets"][0]) == ["a.w", "b.w", "c"]
        back, got_dtypes = st.load_file(path)
        assert got_dtypes == dtypes
        np.testing.assert_array_equal(back["c"], t["c"].astype(np.float32))
        np.testing.assert_array_equal(back["b.w"], t["b.w"].astype(np.float16).astype(np.float32))
        np.testing.assert_allclose(back["a.w"], t["a.w"], rtol=2 ** -8)
        st.save_sharded(d, t, dtypes, n_shards=2)
        os.remove(path)
        sharded, _ = st.load_model(d)
        assert sorted(sharded) == sorted(t)
        np.testing.assert_array_equal(sharded["a.w"], back["a.w"])


def test_truncated_file_is_an_error():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.safetensors")
        st.save_file(path, {"w": np.ones((4, 4))})
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 4)
        try:
            st.load_file(path)
        except ValueError as e:
            assert "w" in str(e)
        else:
            raise AssertionError("truncated file loaded")


def test_stable_topk_breaks_ties_to_lower_index():
    rng = np.random.default_rng(1)
    values = rng.integers(0, 4, size=(200, 16)).astype(np.float32)  # many ties
    got = stable_topk(torch.from_numpy(values), 5).tolist()
    want = [sorted(range(16), key=lambda e: (-row[e], e))[:5] for row in values.tolist()]
    assert got == want


def test_config_rejects_output_norm_without_latent():
    bad = {**BASE, "expert_output_norm": True, "moe_latent_size": None}
    try:
        Config.from_dict(bad)
    except ValueError as e:
        assert "expert_output_norm" in str(e)
    else:
        raise AssertionError("accepted expert_output_norm without a latent")
    missing = {k: v for k, v in BASE.items() if k != "hidden_size"}
    try:
        Config.from_dict(missing)
    except ValueError as e:
        assert "hidden_size" in str(e)
    else:
        raise AssertionError("accepted a config without hidden_size")


def test_expert_loop_matches_vectorized_and_numpy():
    ids = list(np.random.default_rng(2).integers(0, 256, 12))
    for name in PRESETS:
        model = load_model(preset_dir(name))
        with torch.no_grad():
            loop = model(ids)
            model.set_vectorized(True)
            vec = model(ids)
        torch.testing.assert_close(vec, loop, rtol=1e-5, atol=1e-5)
        ref = np_forward(preset_dir(name), ids)
        np.testing.assert_allclose(loop.numpy(), ref, rtol=1e-4, atol=1e-4, err_msg=name)


def test_router_ties_go_to_lower_index():
    model = load_model(preset_dir("router_ties_sigmoid_f32"))
    K, N = model.cfg.num_experts_per_tok, model.cfg.n_routed_experts
    with torch.no_grad():
        routings = model.router_trace(list(range(40)))
    assert (routings[0].selected == torch.arange(K)).all()  # all scores equal
    tied_slots = 0
    for r in routings[1:]:
        for row in r.selected.tolist():
            tied = [e for e in row if e >= N // 2]  # zero-row experts, all with score 0.5
            assert tied == list(range(N // 2, N // 2 + len(tied)))
            tied_slots += len(tied) > 0
    assert tied_slots > 0


def test_committed_fixtures_match_reference():
    names = sorted(os.listdir(FIXTURES)) if os.path.isdir(FIXTURES) else []
    for name in names:
        path = os.path.join(FIXTURES, name)
        if not os.path.exists(os.path.join(path, "golden.json")):
            continue
        with open(os.path.join(path, "golden.json")) as f:
            g = json.load(f)
        ids = g["prompt_ids"] + g["decode_ids"]
        golden = np.load(os.path.join(path, "golden_logits.npy"))
        assert golden.dtype == np.float32 and golden.shape == (48, load_model(path).cfg.vocab_size)
        with torch.no_grad():
            logits = load_model(path)(ids).numpy()
        np.testing.assert_allclose(logits, golden, rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(np_forward(path, ids), golden, rtol=1e-4, atol=1e-4, err_msg=name)


if __name__ == "__main__":
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_")]
    failed = 0
    for n, f in tests:
        try:
            f()
            print(f"PASS {n}")
        except Exception as e:  # report and continue
            failed += 1
            print(f"FAIL {n}: {type(e).__name__}: {e}")
    print(f"{len(tests) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
