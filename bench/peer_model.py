#!/usr/bin/env python3
"""Writes one random Qwen3-MoE-shaped model twice, so that LatentServe and a llama.cpp-family CPU
engine (ik_llama.cpp) can be timed on the same weights: OUTDIR/peer.gguf for the peer, and
OUTDIR/latentserve/ in this project's StableLatentMoeForCausalLM format with the same math (no
latent projection, softmax router, SiLU experts, q/k norm; docs/formats.md). bench/peer_compare.sh
runs both; docs/benchmarks.md ("Measuring against ik_llama.cpp") says how to build the peer.

  bench/peer_model.py OUTDIR [d layers experts top_k ff vocab]     (default 1024 4 64 8 512 8192)

Needs numpy, and the `gguf` package from the peer's source tree on PYTHONPATH
(PYTHONPATH=PEER_CHECKOUT/gguf-py). Weights are drawn with a fixed seed and rounded to BF16.
"""
import json, os, sys
import numpy as np
import gguf

import struct


def write_safetensors(path, tensors, dtype="BF16"):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        u = a.view(np.uint32)
        b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(h)))
        fh.write(h)
        for b in blobs:
            fh.write(b)

out = sys.argv[1]
d, L, N, K, f, V = (int(x) for x in (sys.argv[2:8] or [1024, 4, 64, 8, 512, 8192]))
H, Hkv, hd = 16, 4, 64
rng = np.random.default_rng(7)


def lin(o, i):
    return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)


def bf16_round(a):
    u = a.astype(np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.view(np.float32)


W = {"model.embed_tokens.weight": rng.standard_normal((V, d)).astype(np.float32),
     "model.norm.weight": np.ones(d, np.float32), "lm_head.weight": lin(V, d)}
for i in range(L):
    p = f"model.layers.{i}."
    W[p + "input_layernorm.weight"] = np.ones(d, np.float32)
    W[p + "post_attention_layernorm.weight"] = np.ones(d, np.float32)
    W[p + "self_attn.q_proj.weight"] = lin(H * hd, d)
    W[p + "self_attn.k_proj.weight"] = lin(Hkv * hd, d)
    W[p + "self_attn.v_proj.weight"] = lin(Hkv * hd, d)
    W[p + "self_attn.o_proj.weight"] = lin(d, H * hd)
    W[p + "self_attn.q_norm.weight"] = np.ones(hd, np.float32)
    W[p + "self_attn.k_norm.weight"] = np.ones(hd, np.float32)
    W[p + "mlp.gate.weight"] = lin(N, d)
    for e in range(N):
        W[p + f"mlp.experts.{e}.gate_proj.weight"] = lin(f, d)
        W[p + f"mlp.experts.{e}.up_proj.weight"] = lin(f, d)
        W[p + f"mlp.experts.{e}.down_proj.weight"] = lin(d, f)
W = {k: bf16_round(v) for k, v in W.items()}

# LatentServe format
ls = os.path.join(out, "latentserve")
os.makedirs(ls, exist_ok=True)
cfg = dict(architectures=["StableLatentMoeForCausalLM"], model_type="stable_latent_moe", vocab_size=V,
           hidden_size=d, num_hidden_layers=L, num_attention_heads=H, num_key_value_heads=Hkv, head_dim=hd,
           rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=4096, qk_norm=True,
           tie_word_embeddings=False, first_k_dense_replace=0, intermediate_size=f, n_routed_experts=N,
           num_experts_per_tok=K, moe_intermediate_size=f, moe_latent_size=None, n_shared_experts=0,
           hidden_act="silu", scoring_func="softmax", norm_topk_prob=True, routed_scaling_factor=1.0,
           expert_output_norm=False, bos_token_id=1, eos_token_id=2)
json.dump(cfg, open(os.path.join(ls, "config.json"), "w"), indent=1)
write_safetensors(os.path.join(ls, "model.safetensors"), W, dtype="BF16")

# GGUF (qwen3moe), BF16
w = gguf.GGUFWriter(os.path.join(out, "peer.gguf"), "qwen3moe")
w.add_name("latentserve-peer-random")
w.add_context_length(4096); w.add_embedding_length(d); w.add_block_count(L)
w.add_feed_forward_length(f); w.add_head_count(H); w.add_head_count_kv(Hkv)
w.add_key_length(hd); w.add_value_length(hd); w.add_rope_freq_base(1000000.0)
w.add_layer_norm_rms_eps(1e-6); w.add_expert_count(N); w.add_expert_used_count(K)
w.add_expert_feed_forward_length(f)
w.add_tokenizer_model("llama")
toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
toks += [f"\u2581w{i}" for i in range(V - len(toks))]
types = [2, 3, 3] + [6] * 256 + [1] * (V - 259)
w.add_token_list(toks); w.add_token_types(types); w.add_token_scores([0.0] * V)
w.add_bos_token_id(1); w.add_eos_token_id(2); w.add_unk_token_id(0)
BF = gguf.GGMLQuantizationType.BF16


def put(name, a):
    w.add_tensor(name, gguf.quants.quantize(a, BF), raw_dtype=BF)


put("token_embd.weight", W["model.embed_tokens.weight"])
w.add_tensor("output_norm.weight", W["model.norm.weight"])
put("output.weight", W["lm_head.weight"])
for i in range(L):
    p = f"model.layers.{i}."
    w.add_tensor(f"blk.{i}.attn_norm.weight", W[p + "input_layernorm.weight"])
    w.add_tensor(f"blk.{i}.ffn_norm.weight", W[p + "post_attention_layernorm.weight"])
    put(f"blk.{i}.attn_q.weight", W[p + "self_attn.q_proj.weight"])
    put(f"blk.{i}.attn_k.weight", W[p + "self_attn.k_proj.weight"])
    put(f"blk.{i}.attn_v.weight", W[p + "self_attn.v_proj.weight"])
    put(f"blk.{i}.attn_output.weight", W[p + "self_attn.o_proj.weight"])
    w.add_tensor(f"blk.{i}.attn_q_norm.weight", W[p + "self_attn.q_norm.weight"])
    w.add_tensor(f"blk.{i}.attn_k_norm.weight", W[p + "self_attn.k_norm.weight"])
    w.add_tensor(f"blk.{i}.ffn_gate_inp.weight", W[p + "mlp.gate.weight"])
    for kind, key in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
        put(f"blk.{i}.ffn_{kind}_exps.weight", np.stack([W[p + f"mlp.experts.{e}.{key}.weight"] for e in range(N)]))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print(f"wrote {out}/peer.gguf and {ls} (d={d} L={L} N={N} K={K} f={f} V={V})")
