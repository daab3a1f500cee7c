# Writes a random StableLatentMoe model directory (config.json + safetensors) from a preset or a config json.
# Usage: make_random_model.py OUTDIR (--preset NAME | --config FILE) [--seed S] [--shards N]
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from stable_latent_moe import Config, StableLatentMoeForCausalLM  # noqa: E402

BASE = {
    "architectures": ["StableLatentMoeForCausalLM"], "model_type": "stable_latent_moe",
    "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 512,
    "qk_norm": False, "tie_word_embeddings": False,
    "first_k_dense_replace": 0, "intermediate_size": 96,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
    "moe_latent_size": None, "n_shared_experts": 0, "shared_expert_intermediate_size": None,
    "hidden_act": "situ", "scoring_func": "sigmoid", "norm_topk_prob": True,
    "routed_scaling_factor": 1.0, "expert_output_norm": False,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
}

# name -> (config overrides, writer options). Options: shards (file count), router_ties.
PRESETS = {
    "latent_sigmoid_situ_bf16": ({
        "vocab_size": 512, "num_hidden_layers": 3, "first_k_dense_replace": 1,
        "qk_norm": True, "n_routed_experts": 16, "num_experts_per_tok": 4,
        "moe_intermediate_size": 32, "moe_latent_size": 32, "n_shared_experts": 1,
        "routed_scaling_factor": 2.5, "expert_output_norm": True, "torch_dtype": "bfloat16",
    }, {}),
    "plain_softmax_silu_tied_f32": ({
        "num_key_value_heads": 4, "tie_word_embeddings": True, "hidden_act": "silu",
        "scoring_func": "softmax", "norm_topk_prob": False,
    }, {}),
    "latent_softmax_situ_hd12_f16": ({
        "vocab_size": 384, "head_dim": 12, "qk_norm": True, "tie_word_embeddings": True,
        "first_k_dense_replace": 1, "intermediate_size": 80,
        "n_routed_experts": 12, "num_experts_per_tok": 3, "moe_latent_size": 16,
        "n_shared_experts": 2, "scoring_func": "softmax", "routed_scaling_factor": 1.5,
        "eos_token_id": [2, 3], "torch_dtype": "float16",
    }, {}),
    "plain_sigmoid_silu_shared_hd24_bf16_sharded": ({
        "num_hidden_layers": 3, "num_key_value_heads": 1, "head_dim": 24,
        "first_k_dense_replace": 1, "n_routed_experts": 16, "num_experts_per_tok": 4,
        "n_shared_experts": 1, "shared_expert_intermediate_size": 40, "hidden_act": "silu",
        "routed_scaling_factor": 2.0, "torch_dtype": "bfloat16",
    }, {"shards": 3}),
    "latent_sigmoid_silu_norm_f32": ({
        "num_key_value_heads": 4, "n_routed_experts": 12, "num_experts_per_tok": 2,
        "moe_intermediate_size": 40, "moe_latent_size": 24, "hidden_act": "silu",
        "norm_topk_prob": False, "expert_output_norm": True,
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    }, {}),
    "router_ties_sigmoid_f32": ({
        "num_hidden_layers": 3, "n_routed_experts": 8, "num_experts_per_tok": 3,
        "moe_latent_size": 16, "expert_output_norm": True, "n_shared_experts": 1,
    }, {"router_ties": True}),
}

STORAGE_DTYPE = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def random_tensors(cfg: Config, rng, router_ties=False):
    """{name: float32 array} for every tensor the config implies.
    Linear weights ~ N(0, 1/fan_in); norms 1 + N(0, 0.1); router biases small."""
    shapes = {n: tuple(t.shape) for n, t in StableLatentMoeForCausalLM(cfg).state_dict().items()}
    out = {}
    for name, shape in sorted(shapes.items()):
        if name.endswith("e_score_correction_bias"):
            scale = 0.05 if cfg.scoring_func == "sigmoid" else 0.5 / cfg.n_routed_experts
            out[name] = np.zeros(shape) if router_ties else rng.normal(0, scale, shape)
        elif name.endswith("norm.weight"):
            out[name] = 1.0 + rng.normal(0, 0.1, shape)
        elif name == "model.embed_tokens.weight":
            out[name] = rng.normal(0, 1.0, shape)
        else:
            out[name] = rng.normal(0, 1.0 / np.sqrt(shape[1]), shape)
        if router_ties and name.endswith("mlp.gate.weight"):
            out[name] = tie_router(name, out[name], cfg)
    return {n: a.astype(np.float32) for n, a in out.items()}


def tie_router(name, w, cfg: Config):
    """Router rows equal to zero give logits of exactly 0 under any summation order, so those
    experts tie exactly. First MoE layer: every row zero (selection must be 0..K-1). Later MoE
    layers: the upper half of the experts zero, so ties decide the last slots of many tokens."""
    layer = int(name.split(".")[2])
    w = w.copy()
    if layer == cfg.first_k_dense_replace:
        w[:] = 0.0
    else:
        w[cfg.n_routed_experts // 2:] = 0.0
        w *= 0.5  # keep live scores near 0.5 so they interleave with the tied ones
    return w


def write_model(out_dir, config, seed=0, shards=1, router_ties=False):
    cfg = Config.from_dict(config)
    rng = np.random.Generator(np.random.PCG64(seed))
    tensors = random_tensors(cfg, rng, router_ties)
    dtype = STORAGE_DTYPE[config["torch_dtype"]]
    dtypes = {n: ("F32" if n.endswith("e_score_correction_bias") else dtype) for n in tensors}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    safetensors_io.save_model(out_dir, tensors, dtypes, n_shards=shards)


def main():
    p = argparse.ArgumentParser(description="write a random StableLatentMoe model directory")
    p.add_argument("out_dir")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--preset", choices=sorted(PRESETS))
    src.add_argument("--config", help="config.json to use (missing keys from the base preset)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shards", type=int, help="number of safetensors shards (default: preset's, else 1)")
    p.add_argument("--router-ties", action="store_true", help="zero router rows so scores tie exactly")
    a = p.parse_args()
    if a.preset:
        overrides, opts = PRESETS[a.preset]
    else:
        with open(a.config) as f:
            overrides, opts = json.load(f), {}
    config = {**BASE, **overrides}
    write_model(a.out_dir, config, a.seed, a.shards or opts.get("shards", 1),
                a.router_ties or opts.get("router_ties", False))


if __name__ == "__main__":
    main()
