# Writes tiny random Hugging Face MoE checkpoints (transformers save_pretrained) with float32 golden logits
# computed by transformers itself, into tests/data/hf/<fixture>/. Offline only: needs torch + transformers 5.
# Usage: python models/reference/hf_fixtures.py [--out tests/data/hf] [--only NAME ...] [--list]
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

import transformers as T
from safetensors import safe_open
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_quantized as Q  # noqa: E402

PROMPT_LEN, DECODE_LEN = 32, 16
MIN_MARGIN = 1e-4
MAX_TRIES = 400
SIZE_LIMIT = 1_000_000  # bytes per fixture directory
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

COMMON = dict(vocab_size=256, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
              rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2, pad_token_id=None, tie_word_embeddings=False)


@dataclass
class Fixture:
    name: str
    covers: str
    config_cls: type
    model_cls: type
    config: dict
    seed: int
    dtype: str = "float32"  # float32 | bfloat16
    publish: Callable[[dict], dict] | None = None  # rewrites config.json to a published spelling
    rename: Callable[[str, dict], str] | None = None  # rewrites tensor names (name, config.json) -> name
    embed_std: float = 1.0  # a tied head reads the input embedding back: keep it small or greedy repeats the input
    quant: Q.QuantSpec | None = None  # re-stored quantized; goldens from the format's own dequantization


# ---------------------------------------------------------------------------------------------------------------
# Published key spellings. Each takes the config.json transformers 5 wrote and returns the spelling the
# corresponding published checkpoint uses (transformers 4 era: rope_theta / rope_scaling / torch_dtype).


def _legacy_rope(cfg, rope_scaling=None, partial_rotary_top_level=False):
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    prf = rope.pop("partial_rotary_factor", None)
    if prf is not None and partial_rotary_top_level:
        cfg["partial_rotary_factor"] = prf
    cfg["rope_scaling"] = rope_scaling
    cfg["torch_dtype"] = cfg.pop("dtype")
    return cfg


def publish_qwen3(rope_scaling=None):
    def edit(cfg):
        cfg = _legacy_rope(cfg, rope_scaling)
        cfg["num_experts"] = cfg.pop("num_local_experts")
        cfg["max_window_layers"] = cfg["num_hidden_layers"]
        return cfg
    return edit


def publish_qwen3_dense(cfg):
    # Qwen3-0.6B's spelling: rope_theta, rope_scaling null, torch_dtype, sliding_window null, no layer_types.
    cfg = _legacy_rope(cfg)
    del cfg["layer_types"]
    cfg["max_window_layers"] = cfg["num_hidden_layers"]
    return cfg


def publish_qwen2(cfg):
    cfg = _legacy_rope(cfg)
    del cfg["layer_types"], cfg["qkv_bias"]  # published Qwen1.5-MoE has neither (qkv_bias defaults to true)
    assert not cfg["use_sliding_window"]
    cfg["sliding_window"] = 16  # published configs carry a window (32768) beside use_sliding_window false
    return cfg


def publish_mixtral(cfg):
    cfg = _legacy_rope(cfg)
    del cfg["head_dim"]  # Mixtral configs have no head_dim: hidden_size / num_attention_heads
    return cfg


def publish_glm4(cfg):
    return _legacy_rope(cfg, None, partial_rotary_top_level=True)


def publish_deepseek_v3(cfg):
    rope = cfg["rope_parameters"]
    scaling = {k: v for k, v in rope.items() if k not in ("rope_theta", "rope_type")}
    scaling = dict(scaling, type=rope["rope_type"]) if rope["rope_type"] != "default" else None
    cfg = _legacy_rope(cfg, scaling)
    for computed in ("head_dim", "qk_head_dim", "rope_interleave"):
        del cfg[computed]  # derived by transformers; DeepSeek-V3's config.json has none of them
    cfg.update(scoring_func="sigmoid", topk_method="noaux_tc", moe_layer_freq=1, ep_size=1, seq_aux=True,
               aux_loss_alpha=0.001)
    return cfg


def publish_kimi_linear(cfg):
    for derived in ("layer_types", "mlp_layer_types", "linear_conv_kernel_dim", "linear_head_dim",
                    "linear_num_heads", "head_dim", "qk_head_dim"):
        del cfg[derived]
    cfg["torch_dtype"] = cfg.pop("dtype")
    cfg.update(mla_use_nope=True, moe_router_activation_func="sigmoid", moe_layer_freq=1, use_grouped_topk=True,
               num_nextn_predict_layers=0, rope_theta=10000.0, rope_scaling=None)
    return cfg


def kimi_dense_mlp_names(name, cfg):
    """transformers 5 saves a dense Kimi-Linear layer's MLP under block_sparse_moe. (its load-time rename of
    block_sparse_moe -> mlp run backwards); the published checkpoint names dense layers mlp."""
    m = re.match(r"model\.layers\.(\d+)\.block_sparse_moe\.((gate|up|down)_proj\.weight)$", name)
    if m and cfg["mlp_layer_types"][int(m.group(1))] == "dense":
        return f"model.layers.{m.group(1)}.mlp.{m.group(2)}"
    return name


# ---------------------------------------------------------------------------------------------------------------
# The fixtures. Seeds are fixed; every value below is what transformers receives.

Q3 = dict(COMMON, head_dim=24, intermediate_size=64, num_hidden_layers=3, moe_intermediate_size=16, num_experts=8,
          num_experts_per_tok=2, norm_topk_prob=True, max_position_embeddings=128,
          rope_parameters={"rope_theta": 10000.0, "rope_type": "default"})
QD = dict(COMMON, head_dim=24, intermediate_size=64, num_hidden_layers=3, max_position_embeddings=128,
          rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"})
Q2 = dict(COMMON, intermediate_size=64, num_hidden_layers=3, moe_intermediate_size=16,
          shared_expert_intermediate_size=40, num_experts=8, num_experts_per_tok=2, norm_topk_prob=False,
          max_position_embeddings=128, rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"})
MIX = dict(COMMON, intermediate_size=16, num_hidden_layers=3, num_local_experts=8, num_experts_per_tok=2,
           rms_norm_eps=1e-5, max_position_embeddings=128, sliding_window=None,
           rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"})
GLM = dict(COMMON, head_dim=16, intermediate_size=64, num_hidden_layers=3, moe_intermediate_size=16,
           n_routed_experts=12, num_experts_per_tok=2, n_shared_experts=1, n_group=4, topk_group=2,
           first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, use_qk_norm=True,
           attention_bias=True, rms_norm_eps=1e-5, max_position_embeddings=128,
           rope_parameters={"rope_theta": 10000.0, "rope_type": "default", "partial_rotary_factor": 0.5})
DSV3 = dict(COMMON, num_key_value_heads=4, intermediate_size=64, num_hidden_layers=3, moe_intermediate_size=16,
            n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, n_group=1, topk_group=1,
            first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, q_lora_rank=32,
            kv_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, max_position_embeddings=128,
            rope_parameters={"rope_theta": 10000.0, "rope_type": "default"})
KIMI = dict(COMMON, num_key_value_heads=4, pad_token_id=0, intermediate_size=64, num_hidden_layers=4,
            moe_intermediate_size=16, num_experts=8, num_experts_per_tok=2, n_shared_experts=1,
            routed_scaling_factor=2.446, norm_topk_prob=True, q_lora_rank=None, kv_lora_rank=32, qk_rope_head_dim=8,
            qk_nope_head_dim=16, v_head_dim=16, rms_norm_eps=1e-5, max_position_embeddings=4096,
            first_k_dense_replace=1, linear_attn_config={"kda_layers": [1, 2, 3], "full_attn_layers": [4],
                                                         "head_dim": 16, "num_heads": 2, "short_conv_kernel_size": 4})


def _q3(**kw):
    return dict(Q3, **kw)


FIXTURES = [
    Fixture("qwen3_moe_f32", "Qwen3-MoE in the published Qwen3-30B-A3B key spelling (num_experts, rope_theta, "
            "rope_scaling null, torch_dtype, max_window_layers); head_dim 24 != hidden/heads; qk-norm; "
            "norm_topk_prob", T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM, _q3(), 101, publish=publish_qwen3()),
    Fixture("qwen3_moe_mlp_only_bf16", "Qwen3-MoE BF16 as transformers 5 saves it (rope_parameters, "
            "num_local_experts, dtype); 4 layers, mlp_only_layers [1] + decoder_sparse_step 2: only layer 3 is "
            "MoE, layers 0-2 dense (intermediate_size 64); eos_token_id [2, 3]",
            T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM,
            _q3(num_hidden_layers=4, mlp_only_layers=[1], decoder_sparse_step=2, eos_token_id=[2, 3]), 102,
            dtype="bfloat16"),
    Fixture("qwen3_moe_yarn_f32", "YaRN in transformers-5 rope_parameters: factor 4, original_max_position_"
            "embeddings 16 (positions run to 47, 3x past it), rope_theta 1000, beta_fast/slow absent (32/1), "
            "attention_factor from factor (0.1 ln 4 + 1)", T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM,
            _q3(max_position_embeddings=64, rope_parameters={"rope_type": "yarn", "rope_theta": 1000.0,
                                                              "factor": 4.0, "original_max_position_embeddings": 16}),
            103),
    Fixture("qwen3_moe_linear_rope_f32", "legacy rope_scaling {\"type\": \"linear\", \"factor\": 2.0} with "
            "top-level rope_theta 5e5", T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM,
            _q3(rope_parameters={"rope_type": "linear", "rope_theta": 500000.0, "factor": 2.0}), 104,
            publish=publish_qwen3({"type": "linear", "factor": 2.0})),
    Fixture("qwen3_moe_llama3_rope_f32", "legacy rope_scaling {\"rope_type\": \"llama3\"}: factor 8, low 1, high 4, "
            "original_max_position_embeddings 64 (rotary pairs 0 kept, 1-2 smoothed, 3+ divided), "
            "max_position_embeddings 512", T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM,
            _q3(head_dim=16, max_position_embeddings=512, rope_parameters={
                "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 64}), 105,
            publish=publish_qwen3({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 64})),
    Fixture("qwen3_moe_dynamic_rope_f32", "legacy rope_scaling {\"type\": \"dynamic\", \"factor\": 2.0} with "
            "max_position_embeddings 24: the 32-token prefill and every decode step run past it, so the base "
            "is recomputed per forward from seq_len = last position + 1", T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM,
            _q3(head_dim=16, max_position_embeddings=24,
                rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}), 106,
            publish=publish_qwen3({"type": "dynamic", "factor": 2.0})),
    Fixture("qwen3_moe_sliding_f32", "use_sliding_window true, sliding_window 8, max_window_layers 1 of 3: "
            "transformers 5.24 Qwen3-MoE slides EVERY layer (it has no max_window_layers rule); a token "
            "attends to itself and the 7 positions before it", T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM,
            _q3(use_sliding_window=True, sliding_window=8, max_window_layers=1), 107),
    Fixture("qwen3_f32", "dense Qwen3 in the published Qwen3-0.6B spelling (rope_theta, rope_scaling null, "
            "torch_dtype, sliding_window null, no layer_types); tied embeddings; head_dim 24 != hidden/heads; "
            "qk-norm; a SiLU MLP on every layer", T.Qwen3Config, T.Qwen3ForCausalLM,
            dict(QD, tie_word_embeddings=True), 131, publish=publish_qwen3_dense, embed_std=0.05),
    Fixture("qwen3_sliding_bf16", "dense Qwen3 BF16 as transformers 5 saves it (rope_parameters, layer_types): "
            "use_sliding_window true, sliding_window 8, max_window_layers 1 of 3, so layers 1 and 2 slide and "
            "layer 0 attends to everything", T.Qwen3Config, T.Qwen3ForCausalLM,
            dict(QD, use_sliding_window=True, sliding_window=8, max_window_layers=1), 132, dtype="bfloat16"),
    Fixture("qwen2_moe_f32", "Qwen2-MoE in the published Qwen1.5-MoE-A2.7B spelling (no qkv_bias key: q/k/v "
            "biases on by default, o_proj none); shared_expert width 40 with sigmoid shared_expert_gate; softmax "
            "top-2 without renormalisation; use_sliding_window false with sliding_window 16 present (must not "
            "slide)", T.Qwen2MoeConfig, T.Qwen2MoeForCausalLM,
            dict(Q2, max_window_layers=3), 108, publish=publish_qwen2),
    Fixture("qwen2_moe_bf16", "Qwen2-MoE BF16 as transformers 5 saves it (rope_parameters, qkv_bias, "
            "layer_types, sliding_window 0)", T.Qwen2MoeConfig, T.Qwen2MoeForCausalLM, dict(Q2), 109,
            dtype="bfloat16"),
    Fixture("mixtral_f32", "Mixtral in the published Mixtral-8x7B spelling (rope_theta 1e6, sliding_window null, "
            "no head_dim, torch_dtype); block_sparse_moe.experts.E.w1/w2/w3; untied lm_head",
            T.MixtralConfig, T.MixtralForCausalLM, dict(MIX), 110, publish=publish_mixtral),
    Fixture("mixtral_bf16", "Mixtral BF16 as transformers 5 saves it, sliding_window 8 (every layer slides)",
            T.MixtralConfig, T.MixtralForCausalLM, dict(MIX, sliding_window=8), 111, dtype="bfloat16"),
    Fixture("mixtral_tied_f32", "Mixtral with tie_word_embeddings true: no lm_head.weight in the file",
            T.MixtralConfig, T.MixtralForCausalLM, dict(MIX, tie_word_embeddings=True), 112, embed_std=0.05),
    Fixture("glm4_moe_f32", "GLM-4-MoE in the published GLM-4.5 spelling (top-level partial_rotary_factor 0.5, "
            "rope_theta, head_dim 16): q/k/v biases, qk-norm, first layer dense, 12 experts in 4 groups, "
            "topk_group 2, top-2, routed_scaling_factor 2.5, 1 shared expert, random e_score_correction_bias, "
            "eos_token_id list", T.Glm4MoeConfig, T.Glm4MoeForCausalLM, dict(GLM, eos_token_id=[2, 3]), 113,
            publish=publish_glm4),
    Fixture("glm4_moe_noqknorm_bf16", "GLM-4-MoE BF16 as transformers 5 saves it, use_qk_norm false "
            "(gate.weight and e_score_correction_bias stay F32)", T.Glm4MoeConfig, T.Glm4MoeForCausalLM,
            dict(GLM, use_qk_norm=False), 114, dtype="bfloat16"),
    Fixture("deepseek_v3_f32", "DeepSeek-V3 MLA with q_lora_rank 32 (q_a_proj/q_a_layernorm/q_b_proj), interleaved "
            "RoPE on 8 dims, first layer dense, sigmoid router with bias, n_group 1 (Kimi-K2 style), scale 2.5",
            T.DeepseekV3Config, T.DeepseekV3ForCausalLM, dict(DSV3), 115),
    Fixture("deepseek_v3_noqlora_f32", "DeepSeek-V3 MLA with q_lora_rank null (plain q_proj)",
            T.DeepseekV3Config, T.DeepseekV3ForCausalLM, dict(DSV3, q_lora_rank=None), 116),
    Fixture("deepseek_v3_yarn_f32", "DeepSeek-V3 in the published spelling (rope_scaling type yarn, factor 4, "
            "original_max_position_embeddings 16, mscale 1, mscale_all_dim 1, beta_fast 32, beta_slow 1; "
            "scoring_func/topk_method keys): softmax scale multiplied by (0.1 ln 4 + 1)^2; n_group 4 topk_group 2",
            T.DeepseekV3Config, T.DeepseekV3ForCausalLM,
            dict(DSV3, n_group=4, topk_group=2, max_position_embeddings=64, rope_parameters={
                "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 16,
                "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}), 117,
            publish=publish_deepseek_v3),
    Fixture("deepseek_v3_grouped_bf16", "DeepSeek-V3 BF16 as transformers 5 saves it: 12 experts in 4 groups, "
            "topk_group 2, top-2 (groups that are excluded really exclude)", T.DeepseekV3Config,
            T.DeepseekV3ForCausalLM, dict(DSV3, n_routed_experts=12, n_group=4, topk_group=2), 118, dtype="bfloat16"),
    Fixture("kimi_linear_f32", "Kimi-Linear in the published Kimi-Linear-48B-A3B spelling and tensor names: "
            "kda_layers [1, 2, 3] / full_attn_layers [4] are 1-based: layers 0-2 KDA, layer 3 MLA (no RoPE); "
            "layer 0 dense (mlp.*), "
            "block_sparse_moe.experts.E.w1/w2/w3 + shared_experts, sigmoid router with bias",
            T.KimiLinearConfig, T.KimiLinearForCausalLM, dict(KIMI), 119, publish=publish_kimi_linear,
            rename=kimi_dense_mlp_names),
    Fixture("kimi_linear_bf16", "Kimi-Linear BF16 exactly as transformers 5 saves it (the dense layer 0 MLP under "
            "block_sparse_moe.{gate,up,down}_proj; gate.weight, e_score_correction_bias, dt_bias F32)",
            T.KimiLinearConfig, T.KimiLinearForCausalLM, dict(KIMI), 120, dtype="bfloat16"),
    # Quantized checkpoints (hf_quantized.py): the float model above re-stored as a quantized release stores it;
    # goldens are transformers' float32 forward of the weights as the format's own dequantization gives them.
    Fixture("qwen3_moe_fp8", "Qwen3-MoE FP8 as the -FP8 releases store it: every Linear but lm_head and the "
            "routers (modules_to_not_convert) F8_E4M3 with float32 weight_scale_inv, weight_block_size [128, 128] "
            "(every block a partial edge block); checked against transformers' own FP8 dequantization",
            T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM, _q3(), 121, dtype="bfloat16",
            quant=Q.QuantSpec("fp8", Q.is_linear_not_router, Q.fp8_config((128, 128), ["lm_head", "mlp.gate"]),
                              block=(128, 128))),
    Fixture("glm4_moe_fp8_block32", "GLM-4-MoE FP8 with weight_block_size [32, 32] and moe_intermediate_size 48: "
            "experts [48, 64] / [64, 48] end in partial edge blocks (a 2 x 2 scale grid over 48 rows or columns), "
            "dense layer 0 and shared experts FP8 too; goldens by DeepSeek-V3's ceil-grid rule (transformers derives "
            "the block from the grid, which differs here)", T.Glm4MoeConfig, T.Glm4MoeForCausalLM,
            dict(GLM, moe_intermediate_size=48), 122, dtype="bfloat16",
            quant=Q.QuantSpec("fp8", Q.is_linear_not_router, Q.fp8_config((32, 32), ["lm_head", "mlp.gate"]),
                              block=(32, 32))),
    Fixture("deepseek_v3_fp8", "DeepSeek-V3 as released in FP8: every Linear but lm_head and the routers F8_E4M3 "
            "with float32 weight_scale_inv, including the MLA projections (kv_a_proj_with_mqa split at a block "
            "boundary into latent and rope rows, kv_b_proj read per head), config without modules_to_not_convert; "
            "weight_block_size [16, 16]", T.DeepseekV3Config, T.DeepseekV3ForCausalLM, dict(DSV3), 126,
            dtype="bfloat16", publish=publish_deepseek_v3,
            quant=Q.QuantSpec("fp8", Q.is_linear_not_router, Q.fp8_config((16, 16), None), block=(16, 16))),
    Fixture("glm4_moe_int4", "Kimi-K2-Thinking-shaped: compressed-tensors pack-quantized INT4, group 32, symmetric, "
            "BF16 scales, targets Linear, Kimi-K2-Thinking's ignore list: only the routed experts are INT4 "
            "(attention, dense layer 0, shared experts BF16); moe_intermediate_size 32", T.Glm4MoeConfig,
            T.Glm4MoeForCausalLM, dict(GLM, moe_intermediate_size=32), 123, dtype="bfloat16",
            quant=Q.QuantSpec("int4", Q.is_expert,
                              Q.compressed_config("pack-quantized", Q.int4_weights(32, True), Q.KIMI_K2_IGNORE),
                              group_size=32, symmetric=True)),
    Fixture("qwen3_moe_int4_asym_f32", "compressed-tensors pack-quantized INT4, group 16, asymmetric (packed "
            "weight_zero_point), float32 scales, every Linear but lm_head and the routers (ignore: lm_head and a "
            "re: pattern for mlp.gate)", T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM, _q3(), 124,
            quant=Q.QuantSpec("int4", Q.is_linear_not_router,
                              Q.compressed_config("pack-quantized", Q.int4_weights(16, False),
                                                  ["lm_head", r"re:.*mlp\.gate$"]),
                              group_size=16, symmetric=False)),
    Fixture("qwen3_moe_mxfp4", "compressed-tensors mxfp4-pack-quantized (Kimi K3's experts): routed experts E2M1 "
            "with E8M0 scales per 32, targeted by a re: pattern; the rest BF16; moe_intermediate_size 32",
            T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM, _q3(moe_intermediate_size=32), 125, dtype="bfloat16",
            quant=Q.QuantSpec("mxfp4", Q.is_expert,
                              Q.compressed_config("mxfp4-pack-quantized", Q.MXFP4_WEIGHTS, ["lm_head"],
                                                  targets=[r"re:.*mlp\.experts\..*"]))),
]


# ---------------------------------------------------------------------------------------------------------------
# Random weights: every tensor drawn from one seeded generator in name order, with scales that keep activations
# O(1) through the layers and routing far from uniform.


def randomize(model, seed, embed_std=1.0):
    g = torch.Generator().manual_seed(seed)

    def randn(shape, std=1.0, mean=0.0):
        return torch.randn(shape, generator=g, dtype=torch.float32) * std + mean

    tensors = dict(model.named_parameters())
    tensors.update((n, b) for n, b in model.named_buffers() if n.endswith("e_score_correction_bias"))
    with torch.no_grad():
        for name in sorted(tensors):
            t = tensors[name]
            shape = t.shape
            if name.endswith("e_score_correction_bias"):
                v = randn(shape, 0.1)
            elif re.search(r"(norm|layernorm)\.weight$", name):
                v = randn(shape, 0.1, 1.0)
            elif name.endswith(".bias"):
                v = randn(shape, 0.2)
            elif name.endswith("mlp.gate.weight"):  # router: logits with std ~2 so routing is decisive
                v = randn(shape, 2.0 / shape[-1] ** 0.5)
            elif name.endswith("A_log"):
                v = torch.empty(shape).uniform_(1.0, 16.0, generator=g).log()
            elif name.endswith("dt_bias"):
                dt = torch.empty(shape).uniform_(np.log(1e-3), np.log(1e-1), generator=g).exp().clamp_min(1e-4)
                v = dt + torch.log(-torch.expm1(-dt))  # inverse softplus, as the KDA reference initialises it
            elif name.endswith("conv1d.weight"):
                v = randn(shape, 0.5)
            elif name.endswith("embed_tokens.weight"):
                v = randn(shape, embed_std)
            elif name.endswith("f_b_proj.weight"):  # small forget-gate input: decays exp(g) mostly in (0.4, 1)
                v = randn(shape, 0.5 / shape[-1] ** 0.5)
            elif t.dim() >= 2:  # Linear [out, in] and the fused experts [N, out, in]
                v = randn(shape, 1.0 / shape[-1] ** 0.5)
            else:
                raise ValueError(f"no init rule for {name} {tuple(shape)}")
            t.copy_(v.to(t.dtype))


# ---------------------------------------------------------------------------------------------------------------
# Writing and checking a directory.


def build_model(fx):
    torch.manual_seed(fx.seed)
    cfg = fx.config_cls(**fx.config)
    model = fx.model_cls(cfg).eval()
    randomize(model, fx.seed, fx.embed_std)
    return model


def load(path, dtype):
    kw = dict(attn_implementation="eager")
    model = T.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32 if dtype == "float32" else "auto", **kw)
    return model.float().eval()


def read_tensors(path):
    out = {}
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
        for k in f.keys():
            out[k] = f.get_tensor(k)
    return out


def write_checkpoint(fx, model, out):
    """save_pretrained (through a float32 -> BF16 reload for BF16 fixtures, so transformers decides which tensors
    stay F32), then the published config spelling and tensor names where the fixture asks for them.
    Returns the model the file holds."""
    if fx.dtype == "bfloat16":
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            model = T.AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.bfloat16).eval()
    model.save_pretrained(out)
    cfg_path = os.path.join(out, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    if fx.rename is not None:
        tensors = read_tensors(out)
        renamed = {fx.rename(k, cfg): v for k, v in tensors.items()}
        assert len(renamed) == len(tensors)
        save_file(renamed, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    if fx.publish is not None:
        with open(cfg_path, "w") as f:
            f.write(json.dumps(fx.publish(cfg), indent=2, sort_keys=True) + "\n")
    return model


def check_names(out):
    """Every expert tensor is per expert (published names), none is transformers' fused runtime parameter."""
    names = read_tensors(out).keys()
    fused = [n for n in names if re.search(r"gate_up_proj|experts\.down_proj$|\.conv1d\.weight$", n)]
    if fused:
        raise RuntimeError(f"{out}: fused runtime tensor names in the file: {fused[:4]}")
    return names


IGNORED_CONFIG_KEYS = {"transformers_version", "_name_or_path", "dtype", "torch_dtype", "architectures",
                       "_attn_implementation_autoset", "max_window_layers", "scoring_func", "topk_method",
                       "moe_layer_freq", "ep_size", "seq_aux", "aux_loss_alpha", "mla_use_nope",
                       "moe_router_activation_func", "use_grouped_topk", "rope_theta", "rope_scaling",
                       "partial_rotary_factor"}


def _resolved(config):
    d = config.to_dict()
    if isinstance(d.get("rope_parameters"), dict):  # the legacy "type" spelling is kept beside "rope_type"
        d["rope_parameters"] = {k: v for k, v in d["rope_parameters"].items() if k != "type"}
    return d


def verify_reload(fx, reference, out):
    """The directory as written reloads to exactly the reference model: same tensors, same resolved config."""
    loaded = load(out, fx.dtype)
    want = {k: v.float() for k, v in reference.state_dict().items()}
    got = loaded.state_dict()
    if set(want) != set(got):
        raise RuntimeError(f"{out}: reload has different tensors: {sorted(set(want) ^ set(got))[:6]}")
    for k in want:
        if not torch.equal(want[k], got[k]):
            raise RuntimeError(f"{out}: tensor {k} differs after reload")
    a, b = _resolved(reference.config), _resolved(loaded.config)
    diff = {k for k in set(a) | set(b) if k not in IGNORED_CONFIG_KEYS and a.get(k) != b.get(k)}
    if fx.publish is not None:  # a published spelling may add keys transformers ignores; the rest must agree
        diff = {k for k in diff if k in a}
    if diff:
        raise RuntimeError(f"{out}: reloaded config differs in {sorted(diff)}: "
                           f"{ {k: (a.get(k), b.get(k)) for k in sorted(diff)} }")
    return loaded


# ---------------------------------------------------------------------------------------------------------------
# Goldens.


def _gap_at(values, k):
    """Smallest gap, over rows, between the k-th and (k+1)-th largest value (inf where fewer than k+1 are finite)."""
    if values.shape[-1] <= k:
        return float("inf")
    s = values.double().sort(dim=-1, descending=True).values
    gap = s[:, k - 1] - s[:, k]
    gap = gap[torch.isfinite(gap)]
    return float(gap.min()) if gap.numel() else float("inf")


class RoutingProbe:
    """Forward hooks on every router: records the smallest selection gap (top-k boundary, and the group boundary
    for grouped routing) over all tokens, layers and forward calls, computed from the router's own float32
    scores exactly as transformers selects on them."""

    def __init__(self, model):
        self.margin = float("inf")
        self.handles = []
        for name, mod in model.named_modules():
            if type(mod).__name__.lower().endswith("topkrouter"):
                self.handles.append(mod.register_forward_hook(self._hook))

    def _hook(self, mod, args, output):
        logits = output[0].float()
        k = mod.top_k
        if hasattr(mod, "e_score_correction_bias"):
            s = logits.sigmoid() + mod.e_score_correction_bias
            groups, per = mod.num_group, mod.num_experts // mod.num_group
            group_scores = s.view(-1, groups, per).topk(2, dim=-1)[0].sum(dim=-1)
            self.margin = min(self.margin, _gap_at(group_scores, mod.topk_group))
            chosen = group_scores.topk(mod.topk_group, dim=-1, sorted=False)[1]
            mask = torch.zeros_like(group_scores).scatter_(1, chosen, 1).bool()
            s = s.masked_fill(~mask.repeat_interleave(per, dim=1), float("-inf"))
            self.margin = min(self.margin, _gap_at(s, k))
        else:
            self.margin = min(self.margin, _gap_at(F.softmax(logits, dim=-1), k))

    def close(self):
        for h in self.handles:
            h.remove()


def run_golden(model, prompt):
    """One forward over the prompt, then DECODE_LEN greedy steps through transformers' cache.
    Returns logits [PROMPT_LEN + DECODE_LEN, V] and the greedy decode ids."""
    rows, decode = [], []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt]), use_cache=True)
        cache = out.cache
        rows.append(out.logits[0])
        for _ in range(DECODE_LEN):
            nxt = int(out.logits[0, -1].argmax())
            decode.append(nxt)
            out = model(input_ids=torch.tensor([[nxt]]), cache=cache, use_cache=True)
            cache = out.cache
            rows.append(out.logits[0])
    return torch.cat(rows).float(), decode


def greedy_margin(logits):
    top2 = logits[PROMPT_LEN - 1:-1].double().topk(2, dim=-1).values
    return float((top2[:, 0] - top2[:, 1]).min())


def make_goldens(fx, out, model_dir=None, dtype=None):
    """Draw prompt ids from seed, seed+1, ... until every routing choice (and every greedy pick) is at least
    MIN_MARGIN away from a tie; a fresh load per draw, since dynamic RoPE keeps state across forwards. The model
    is read from model_dir (default: out)."""
    vocab = fx.config["vocab_size"]
    for attempt in range(MAX_TRIES):
        rng = np.random.Generator(np.random.PCG64(fx.seed * 1000 + attempt))
        prompt = rng.integers(0, vocab, PROMPT_LEN).tolist()
        model = load(model_dir or out, dtype or fx.dtype)
        probe = RoutingProbe(model)
        logits, decode = run_golden(model, prompt)
        probe.close()
        if probe.margin >= MIN_MARGIN and greedy_margin(logits) >= MIN_MARGIN:
            break
    else:
        raise RuntimeError(f"{fx.name}: no prompt with routing margin >= {MIN_MARGIN} in {MAX_TRIES} draws")
    # A dense model has no router: its margin is null.
    routing_margin = None if probe.margin == float("inf") else float(f"{probe.margin:.6g}")
    golden = {"prompt_ids": prompt, "decode_ids": decode, "routing_margin": routing_margin,
              "greedy_margin": float(f"{greedy_margin(logits):.6g}"), "prompt_seed_offset": attempt}
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(golden, f)
        f.write("\n")
    np.save(os.path.join(out, "golden_logits.npy"), logits.numpy().astype(np.float32))
    return golden


def write_quantized_fixture(fx, out):
    """The float checkpoint in a scratch directory, re-stored quantized into `out`; goldens from the dequantized
    float32 copy."""
    with tempfile.TemporaryDirectory() as tmp:
        src, deq = os.path.join(tmp, "src"), os.path.join(tmp, "deq")
        model = write_checkpoint(fx, build_model(fx), src)
        check_names(src)
        verify_reload(fx, model, src)
        Q.quantize_checkpoint(fx.quant, src, out, deq)
        if fx.quant.kind == "fp8" and all(b >= 128 for b in fx.quant.block):
            Q.check_transformers_fp8_dequant(fx.quant, out, deq, lambda d: load(d, "float32"))
        golden = make_goldens(fx, out, model_dir=deq, dtype="float32")
    return read_tensors(out).keys(), golden


def write_fixture(fx, root):
    out = os.path.join(root, fx.name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    if fx.quant is not None:
        names, golden = write_quantized_fixture(fx, out)
    else:
        model = write_checkpoint(fx, build_model(fx), out)
        names = check_names(out)
        verify_reload(fx, model, out)
        golden = make_goldens(fx, out)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    if size > SIZE_LIMIT:
        raise RuntimeError(f"{fx.name}: {size} bytes, over the {SIZE_LIMIT} limit")
    return size, len(names), golden


def main():
    p = argparse.ArgumentParser(description="write tiny transformers MoE checkpoints with golden logits")
    p.add_argument("--out", default=os.path.join(REPO, "tests", "data", "hf"))
    p.add_argument("--only", nargs="*", help="fixture names (default: all)")
    p.add_argument("--list", action="store_true", help="print the fixture names and what each pins")
    a = p.parse_args()
    if a.list:
        for fx in FIXTURES:
            print(f"{fx.name}: {fx.covers}")
        return
    torch.set_num_threads(1)  # same summation order on every machine
    warnings.filterwarnings("ignore", category=FutureWarning)  # the legacy rope_scaling spellings, on purpose
    T.logging.set_verbosity_error()
    T.utils.logging.disable_progress_bar()
    known = {fx.name for fx in FIXTURES}
    unknown = set(a.only or []) - known
    if unknown:
        sys.exit(f"unknown fixture(s): {sorted(unknown)}")
    for fx in FIXTURES:
        if a.only and fx.name not in a.only:
            continue
        size, count, g = write_fixture(fx, a.out)
        print(f"{fx.name}: {size} bytes, {count} tensors, routing margin {g['routing_margin'] or float('inf'):.3g}, "
              f"greedy margin {g['greedy_margin']:.3g}, prompt draw {g['prompt_seed_offset']}")


if __name__ == "__main__":
    main()
