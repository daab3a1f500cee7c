# Writes tiny random Kimi K3 checkpoints in the released layout (KimiK3ForConditionalGeneration wrapper, text
# tensors under language_model., a small vision tower, K3's tiktoken tokenizer, MXFP4 experts as compressed-tensors
# packs them) with golden logits from k3_reference.py, plus MXFP4 decoding vectors, into tests/data/k3/.
# Offline only (torch, safetensors, numpy, compressed-tensors). Usage: python k3_fixtures.py [--out DIR] [--only N]
import argparse
import json
import os
import shutil
import sys
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3_reference as R  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
TOKENIZER_DIR = os.path.join(REPO, "tests", "data", "tokenizer", "kimi_k3")
TOKENIZER_FILES = ("tiktoken.model", "tokenizer_config.json")
PROMPT_LEN, DECODE_LEN = 32, 16
MIN_MARGIN = 1e-4
MAX_TRIES = 400
A_LOG_LEN = 128  # K3 stores A_log as a 128-vector, zero past the first num_heads values
F32_SUFFIXES = ("_conv1d.weight", ".A_log", ".dt_bias", ".o_norm.weight", ".e_score_correction_bias")


@dataclass
class Fixture:
    name: str
    covers: str
    seed: int
    mxfp4: bool = False
    num_experts: int = 8
    num_expert_group: int = 1
    topk_group: int = 1
    kda_heads: int = 2


FIXTURES = [
    Fixture("k3_tiny_bf16", "BF16 K3 layout: AttnRes blocks of 2 over 6 layers, KDA (bounded gate, full-rank "
            "output gate) and gated MLA without RoPE, dense layer 0, LatentMoE with SiTU, 8 experts top-2", 301),
    Fixture("k3_tiny_mxfp4", "k3_tiny_bf16 with the routed experts' w1/w2/w3 packed as compressed-tensors "
            "mxfp4-pack-quantized (quantization_config inside text_config)", 301, mxfp4=True),
    Fixture("k3_tiny_grouped_bf16", "as k3_tiny_bf16 with 12 experts in 4 groups, topk_group 2 (group-limited "
            "routing that excludes), top-2", 302, num_experts=12, num_expert_group=4, topk_group=2),
    Fixture("k3_tiny_kda4_bf16", "as k3_tiny_bf16 with 4 KDA heads, so that every attention kind splits over "
            "four tensor-parallel ranks", 303, kda_heads=4),
]


def tokenizer_ids():
    with open(os.path.join(TOKENIZER_DIR, "tokenizer_config.json")) as f:
        tc = json.load(f)
    with open(os.path.join(TOKENIZER_DIR, "tiktoken.model")) as f:
        base = sum(1 for line in f if line.strip())
    by_name = {v["content"]: int(k) for k, v in tc["added_tokens_decoder"].items()}
    return base, by_name[tc["bos_token"]], by_name[tc["eos_token"]], by_name[tc["pad_token"]]


def text_config(fx: Fixture) -> dict:
    base, bos, eos, pad = tokenizer_ids()
    tc = {
        "model_type": "kimi_linear", "vocab_size": base + 256, "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 4, "hidden_act": "situ",
        "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0, "rms_norm_eps": 1e-5,
        "initializer_range": 0.02, "tie_word_embeddings": False, "use_cache": True, "bos_token_id": bos,
        "eos_token_id": eos, "pad_token_id": pad, "max_position_embeddings": 4096, "max_length": 20,
        "attn_res_block_size": 2, "attention_bias": False, "q_lora_rank": 32, "kv_lora_rank": 32,
        "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "mla_use_nope": True,
        "mla_use_output_gate": True, "rope_theta": 10000.0, "rope_scaling": None,
        "first_k_dense_replace": 1, "moe_layer_freq": 1, "num_experts": fx.num_experts,
        "num_experts_per_token": 2, "num_shared_experts": 2, "moe_intermediate_size": 64,
        "routed_expert_hidden_size": 32, "latent_moe_use_norm": True, "moe_router_activation_func": "sigmoid",
        "moe_renormalize": True, "routed_scaling_factor": 1.0, "use_grouped_topk": True,
        "num_expert_group": fx.num_expert_group, "topk_group": fx.topk_group, "topk_method": "noaux_tc",
        "num_nextn_predict_layers": 0,
        "linear_attn_config": {"full_attn_layers": [3, 6], "kda_layers": [1, 2, 4, 5], "num_heads": fx.kda_heads,
                               "head_dim": 16, "short_conv_kernel_size": 4, "gate_lower_bound": -5.0,
                               "use_full_rank_gate": True},
        "dtype": "bfloat16",
    }
    if fx.mxfp4:
        tc["quantization_config"] = mxfp4_quantization_config()
    return tc


VISION_CONFIG = {
    "model_type": "kimi_k3_vision", "patch_size": 2, "init_pos_emb_height": 4, "init_pos_emb_width": 4,
    "init_pos_emb_time": 4, "pos_emb_type": "divided_fixed", "vt_num_attention_heads": 2, "vt_num_hidden_layers": 1,
    "vt_hidden_size": 32, "vt_intermediate_size": 64, "merge_kernel_size": [2, 2],
    "video_attn_type": "spatial_temporal", "merge_type": "sd2_tpool", "mm_projector_type": "patchmergerv2",
    "mm_hidden_size": 32, "projector_hidden_act": "gelu", "projector_ln_eps": 1e-5, "text_hidden_size": 64,
}


def wrapper_config(fx: Fixture) -> dict:
    tc = text_config(fx)
    base = tc["vocab_size"] - 256
    return {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "text_config": tc,
            "vision_config": VISION_CONFIG, "ignore_index": -100, "media_placeholder_token_id": base + 21,
            "bos_token_id": tc["bos_token_id"], "eos_token_id": tc["eos_token_id"],
            "pad_token_id": tc["pad_token_id"], "tie_word_embeddings": False, "dtype": "bfloat16"}


# ---------------------------------------------------------------------------------------------------- tensors


def text_shapes(tc: dict) -> dict:
    """Every text tensor name (without the language_model. prefix) -> shape, as K3 lays them out."""
    cfg = R.K3Config.from_text_config(tc)
    d, V = cfg.hidden_size, cfg.vocab_size
    H, dk = cfg.kda_heads, cfg.kda_head_dim
    Hm = cfg.num_attention_heads
    s = {"model.embed_tokens.weight": [V, d], "model.norm.weight": [d], "lm_head.weight": [V, d],
         "model.output_attn_res_norm.weight": [d], "model.output_attn_res_proj.weight": [1, d]}
    for l in range(cfg.num_hidden_layers):
        p = f"model.layers.{l}."
        for n in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"):
            s[p + n + ".weight"] = [d]
        s[p + "self_attention_res_proj.weight"] = [1, d]
        s[p + "mlp_res_proj.weight"] = [1, d]
        a = p + "self_attn."
        if cfg.is_kda(l):
            for n in "qkv":
                s[a + f"{n}_proj.weight"] = [H * dk, d]
                s[a + f"{n}_conv1d.weight"] = [H * dk, 1, cfg.conv_kernel]
            s.update({a + "f_a_proj.weight": [dk, d], a + "f_b_proj.weight": [H * dk, dk], a + "b_proj.weight": [H, d],
                      a + "A_log": [A_LOG_LEN], a + "dt_bias": [H * dk], a + "o_norm.weight": [dk],
                      a + "g_proj.weight": [H * dk, d], a + "o_proj.weight": [d, H * dk]})
        else:
            qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
            r = cfg.kv_lora_rank
            s.update({a + "q_a_proj.weight": [cfg.q_lora_rank, d], a + "q_a_layernorm.weight": [cfg.q_lora_rank],
                      a + "q_b_proj.weight": [Hm * qk, cfg.q_lora_rank],
                      a + "kv_a_proj_with_mqa.weight": [r + cfg.qk_rope_head_dim, d],
                      a + "kv_a_layernorm.weight": [r],
                      a + "kv_b_proj.weight": [Hm * (cfg.qk_nope_head_dim + cfg.v_head_dim), r],
                      a + "g_proj.weight": [Hm * cfg.v_head_dim, d], a + "o_proj.weight": [d, Hm * cfg.v_head_dim]})
        if cfg.is_moe(l):
            m = p + "block_sparse_moe."
            f, lat, sh = cfg.moe_intermediate_size, cfg.latent_size, cfg.num_shared_experts * cfg.moe_intermediate_size
            s.update({m + "gate.weight": [cfg.num_experts, d], m + "gate.e_score_correction_bias": [cfg.num_experts],
                      m + "routed_expert_down_proj.weight": [lat, d], m + "routed_expert_norm.weight": [lat],
                      m + "routed_expert_up_proj.weight": [d, lat], m + "shared_experts.gate_proj.weight": [sh, d],
                      m + "shared_experts.up_proj.weight": [sh, d], m + "shared_experts.down_proj.weight": [d, sh]})
            for e in range(cfg.num_experts):
                s.update({m + f"experts.{e}.w1.weight": [f, lat], m + f"experts.{e}.w3.weight": [f, lat],
                          m + f"experts.{e}.w2.weight": [lat, f]})
        else:
            s.update({p + "mlp.gate_proj.weight": [cfg.intermediate_size, d],
                      p + "mlp.up_proj.weight": [cfg.intermediate_size, d],
                      p + "mlp.down_proj.weight": [d, cfg.intermediate_size]})
    return s


def vision_shapes() -> dict:
    """A one-block vision tower and projector, named as the Kimi K2.5/K3 checkpoints name them."""
    v, ff, mrg = VISION_CONFIG["vt_hidden_size"], VISION_CONFIG["vt_intermediate_size"], 4 * 32
    b = "vision_tower.encoder.blocks.0."
    s = {"vision_tower.patch_embed.proj.weight": [v, 3, 2, 2], "vision_tower.patch_embed.proj.bias": [v],
         "vision_tower.patch_embed.pos_emb.weight": [4, 4, v],
         b + "norm0.weight": [v], b + "norm0.bias": [v], b + "norm1.weight": [v], b + "norm1.bias": [v],
         b + "wqkv.weight": [3 * v, v], b + "wqkv.bias": [3 * v], b + "wo.weight": [v, v], b + "wo.bias": [v],
         b + "mlp.fc0.weight": [ff, v], b + "mlp.fc0.bias": [ff], b + "mlp.fc1.weight": [v, ff],
         b + "mlp.fc1.bias": [v],
         "vision_tower.encoder.final_layernorm.weight": [v], "vision_tower.encoder.final_layernorm.bias": [v],
         "mm_projector.pre_norm.weight": [v], "mm_projector.pre_norm.bias": [v],
         "mm_projector.proj.0.weight": [mrg, mrg], "mm_projector.proj.0.bias": [mrg],
         "mm_projector.proj.2.weight": [64, mrg], "mm_projector.proj.2.bias": [64]}
    return s


def draw(shapes: dict, seed: int, kda_heads: int) -> dict:
    """Random float32 tensors, drawn in name order from one seeded generator, scaled so activations stay O(1),
    routing is decisive, KDA decays sit mostly in (0.4, 1) and AttnRes mixes its sources unevenly."""
    g = torch.Generator().manual_seed(seed)

    def randn(shape, std=1.0, mean=0.0):
        return torch.randn(shape, generator=g, dtype=torch.float32) * std + mean

    out = {}
    for name in sorted(shapes):
        shape = shapes[name]
        if name.endswith("embed_tokens.weight"):
            v = randn(shape)
        elif name.endswith("_res_proj.weight"):
            v = randn(shape, 1.5 / shape[-1] ** 0.5)
        elif name.endswith("norm.weight") or name.endswith("layernorm.weight") or name.endswith("norm0.weight") \
                or name.endswith("norm1.weight"):
            v = randn(shape, 0.1, 1.0)
        elif name.endswith(".bias") and not name.endswith("correction_bias"):
            v = randn(shape, 0.1)
        elif name.endswith("e_score_correction_bias"):
            v = randn(shape, 0.1)
        elif name.endswith("block_sparse_moe.gate.weight"):
            v = randn(shape, 2.0 / shape[-1] ** 0.5)
        elif name.endswith("A_log"):
            v = torch.zeros(shape)
            v[:kda_heads] = torch.empty(kda_heads).uniform_(np.log(0.5), np.log(2.0), generator=g)
        elif name.endswith("dt_bias"):
            v = randn(shape, 1.0, -2.0)
        elif name.endswith("conv1d.weight"):
            v = randn(shape, 0.5)
        elif name.endswith("f_b_proj.weight"):
            v = randn(shape, 0.5 / shape[-1] ** 0.5)
        elif name.endswith("pos_emb.weight"):
            v = randn(shape, 0.02)
        elif len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            v = randn(shape, 1.0 / fan_in ** 0.5)
        else:
            raise ValueError(f"no init rule for {name} {shape}")
        out[name] = v
    return out


# ---------------------------------------------------------------------------------------------------- MXFP4


def mxfp4_scheme():
    from compressed_tensors.quantization import preset_name_to_scheme
    scheme = preset_name_to_scheme("MXFP4A16", targets=["Linear"])
    scheme.format = "mxfp4-pack-quantized"
    return scheme


def mxfp4_quantization_config() -> dict:
    """quantization_config as compressed-tensors' ModelCompressor.update_config writes it: targets Linear, ignore
    only the shared experts, as the released config does, so attention, router, latent projections, dense MLP and
    lm_head stay BF16 without being named: a loader must go by the presence of weight_packed."""
    import compressed_tensors
    from compressed_tensors.quantization import QuantizationConfig, QuantizationStatus
    qc = QuantizationConfig(config_groups={"group_0": mxfp4_scheme()}, format="mxfp4-pack-quantized",
                            quantization_status=QuantizationStatus.COMPRESSED, ignore=["re:.*shared_experts.*"])
    data = qc.model_dump(exclude=["quant_method"])
    data = json.loads(json.dumps(data, default=str))  # torch dtypes as compressed-tensors prints them
    return {"version": compressed_tensors.__version__, "quant_method": "compressed-tensors", "sparsity_config": {},
            "transform_config": {}, **data}


def mxfp4_pack(w: torch.Tensor):
    """float32 [out, in] -> (weight_packed uint8 [out, in/2], weight_scale uint8 [out, in/32]) by compressed-tensors'
    own MXFP4 scale rule and compressor; checks our dequantization against its decompression."""
    from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor
    from compressed_tensors.quantization.utils.mxfp_utils import generate_mx_scales
    rows, cols = w.shape
    amax = w.abs().reshape(rows, cols // R.MX_GROUP, R.MX_GROUP).amax(-1)
    scale = torch.pow(2.0, generate_mx_scales(amax) - 127.0)
    packed = MXFP4PackedCompressor.compress({"weight": w, "weight_scale": scale}, mxfp4_scheme())
    pk, sc = packed["weight_packed"], packed["weight_scale"]
    theirs = ct_decompress(pk, sc)
    ours = R.mxfp4_dequantize(pk, sc)
    if not torch.equal(theirs, ours):
        raise RuntimeError("mxfp4: our dequantization differs from compressed-tensors'")
    return pk.contiguous(), sc.contiguous()


def ct_decompress(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor
    return MXFP4PackedCompressor.decompress({"weight_packed": packed, "weight_scale": scale},
                                            mxfp4_scheme())["weight"].float()


def json_value(x: float):
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def mxfp4_vectors(path: str):
    """Small packed matrices and compressed-tensors' decompression of them (float32 exact; non-finite values as
    the strings "nan", "inf", "-inf")."""
    g = torch.Generator().manual_seed(4242)
    every_code = torch.tensor([lo | (hi << 4) for hi in range(16) for lo in range(16)], dtype=torch.uint8)
    cases = [
        ("every_code_pair", "all 256 bytes (every low/high nibble pair) at scale 127", every_code.reshape(16, 16),
         torch.full((16, 1), 127, dtype=torch.uint8)),
        ("special_scales", "E8M0 0 (2^-127, subnormal), 1, 126, 127, 128, 253, 254 (2^127: codes of magnitude "
         ">= 2 overflow float32 to inf), 255 (compressed-tensors: 2^128 = inf, so code 0 and 8 give NaN)",
         every_code[:16].repeat(8, 1),
         torch.tensor([[0], [1], [126], [127], [128], [253], [254], [255]], dtype=torch.uint8)),
        ("odd_rows_two_groups", "3 rows x 64 columns, random bytes, scales 120..134",
         torch.randint(0, 256, (3, 32), generator=g, dtype=torch.uint8),
         torch.randint(120, 135, (3, 2), generator=g, dtype=torch.uint8)),
        ("five_by_96", "5 rows x 96 columns, random bytes and scales including 0 and 255",
         torch.randint(0, 256, (5, 48), generator=g, dtype=torch.uint8),
         torch.tensor([[0, 127, 130], [255, 100, 127], [126, 128, 254], [1, 127, 0], [140, 255, 115]],
                      dtype=torch.uint8)),
    ]
    out = []
    for name, what, packed, scale in cases:
        theirs = ct_decompress(packed, scale)
        ours = R.mxfp4_dequantize(packed, scale)
        same = torch.equal(torch.nan_to_num(theirs, nan=7.0), torch.nan_to_num(ours, nan=7.0)) and torch.equal(
            theirs.isnan(), ours.isnan())
        if not same:
            raise RuntimeError(f"mxfp4 vector {name}: our dequantization differs from compressed-tensors'")
        out.append({"name": name, "what": what, "rows": packed.shape[0], "cols": 2 * packed.shape[1],
                    "weight_packed": packed.tolist(), "weight_scale": scale.tolist(),
                    "values": [[json_value(v) for v in row] for row in theirs.double().tolist()]})
    import compressed_tensors
    doc = {"format": "compressed-tensors mxfp4-pack-quantized: weight_packed uint8 [rows, cols/2], element 2i in "
                     "the low nibble, 2i+1 in the high nibble; E2M1 codes 0-7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6 and 8-15 "
                     "their negatives; weight_scale uint8 [rows, cols/32], value = e2m1 * 2^(scale - 127)",
           "oracle": f"compressed-tensors {compressed_tensors.__version__} MXFP4PackedCompressor.decompress (BF16 "
                     "output, exact here), as float32",
           "scale_255": "compressed-tensors computes 2^128 = +inf (the OCP MX spec calls 0xFF NaN): nonzero codes "
                        "give +-inf, codes 0 and 8 give NaN",
           "cases": out}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


# ---------------------------------------------------------------------------------------------------- writing


def write_checkpoint(fx: Fixture, out: str):
    tc = text_config(fx)
    shapes = text_shapes(tc)
    values = draw(shapes, fx.seed, tc["linear_attn_config"]["num_heads"])
    tensors = {}
    for name, v in values.items():
        dtype = torch.float32 if name.endswith(F32_SUFFIXES) else torch.bfloat16
        key = R.TEXT_PREFIX + name
        if fx.mxfp4 and ".experts." in name:
            pk, sc = mxfp4_pack(v.to(torch.bfloat16).float())
            tensors[key[: -len(".weight")] + ".weight_packed"] = pk
            tensors[key[: -len(".weight")] + ".weight_scale"] = sc
        else:
            tensors[key] = v.to(dtype).contiguous()
    for name, v in draw(vision_shapes(), fx.seed + 7, 0).items():
        tensors[name] = v.to(torch.bfloat16).contiguous()
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(json.dumps(wrapper_config(fx), indent=2) + "\n")
    for name in TOKENIZER_FILES:
        shutil.copyfile(os.path.join(TOKENIZER_DIR, name), os.path.join(out, name))


def greedy_margin(logits):
    top2 = logits[PROMPT_LEN - 1:-1].double().topk(2, dim=-1).values
    return float((top2[:, 0] - top2[:, 1]).min())


def make_goldens(fx: Fixture, out: str):
    """Draw prompts (base-rank ids) from seed*1000 + attempt until every routing choice (top-k and group) is
    >= MIN_MARGIN from a tie over the prefill and all decode steps, every greedy pick is >= MIN_MARGIN ahead, and
    the greedy continuation stays among the base ranks (no control id such as <|end_of_msg|>)."""
    model = R.load(out)
    base = model.cfg.vocab_size - 256
    for attempt in range(MAX_TRIES):
        rng = np.random.Generator(np.random.PCG64(fx.seed * 1000 + attempt))
        prompt = rng.integers(0, base, PROMPT_LEN).tolist()
        model.probe = R.RoutingProbe()
        logits, decode = R.run_golden(model, prompt, DECODE_LEN)
        margin = model.probe.margin
        model.probe = None
        if margin >= MIN_MARGIN and greedy_margin(logits) >= MIN_MARGIN and max(decode) < base:
            break
    else:
        raise RuntimeError(f"{fx.name}: no prompt met the margins in {MAX_TRIES} draws")
    unused = model.W.unused()
    if unused:
        raise RuntimeError(f"{fx.name}: tensors the reference never read: {unused[:5]}")
    full, _ = model.forward(prompt + decode)                  # teacher forcing: one prefill over all 48 tokens
    m64 = R.load(out, torch.float64)
    l64, d64 = R.run_golden(m64, prompt, DECODE_LEN)
    if d64 != decode:
        raise RuntimeError(f"{fx.name}: float64 greedy continuation differs")
    golden = {"prompt_ids": prompt, "decode_ids": decode, "routing_margin": float(f"{margin:.6g}"),
              "greedy_margin": float(f"{greedy_margin(logits):.6g}"), "prompt_seed_offset": attempt,
              "teacher_forced_max_abs_diff": float(f"{(full - logits).abs().max():.3g}"),
              "float64_max_abs_diff": float(f"{(l64 - logits.double()).abs().max():.3g}")}
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(golden, f)
        f.write("\n")
    np.save(os.path.join(out, "golden_logits.npy"), logits.numpy().astype(np.float32))
    return golden


def write_fixture(fx: Fixture, root: str):
    out = os.path.join(root, fx.name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    write_checkpoint(fx, out)
    golden = make_goldens(fx, out)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    return size, golden


def main():
    p = argparse.ArgumentParser(description="write tiny Kimi K3 checkpoints with golden logits")
    p.add_argument("--out", default=os.path.join(REPO, "tests", "data", "k3"))
    p.add_argument("--only", nargs="*", help="fixture names (default: all, plus mxfp4_vectors.json)")
    p.add_argument("--list", action="store_true")
    a = p.parse_args()
    if a.list:
        for fx in FIXTURES:
            print(f"{fx.name}: {fx.covers}")
        return
    torch.set_num_threads(1)  # one summation order on every machine
    warnings.filterwarnings("ignore")
    known = {fx.name for fx in FIXTURES}
    if set(a.only or []) - known:
        sys.exit(f"unknown fixture(s): {sorted(set(a.only) - known)}")
    os.makedirs(a.out, exist_ok=True)
    for fx in FIXTURES:
        if a.only and fx.name not in a.only:
            continue
        size, g = write_fixture(fx, a.out)
        print(f"{fx.name}: {size} bytes, routing margin {g['routing_margin']:.3g}, greedy margin "
              f"{g['greedy_margin']:.3g}, prompt draw {g['prompt_seed_offset']}, teacher-forced diff "
              f"{g['teacher_forced_max_abs_diff']:.2g}, float64 diff {g['float64_max_abs_diff']:.2g}")
    if not a.only:
        mxfp4_vectors(os.path.join(a.out, "mxfp4_vectors.json"))
        print("mxfp4_vectors.json written")


if __name__ == "__main__":
    main()
