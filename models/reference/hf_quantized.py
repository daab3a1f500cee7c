# Quantized checkpoints for the published-family fixtures (hf_fixtures.py): a float checkpoint written by
# transformers is re-stored in the layout a quantized release uses, and a float32 copy of the weights as the
# format's own dequantization gives them is written beside it for the goldens.
#   fp8:   FP8 e4m3 `weight` + float32 `weight_scale_inv`, one scale per weight_block_size block (DeepSeek-V3 and
#          the -FP8 releases); scale = block amax / 448, the edge blocks partial (ceil grid), as DeepSeek-V3's
#          weight_dequant reads them.
#   int4:  compressed-tensors `pack-quantized` (Kimi-K2-Thinking): scales from compressed-tensors'
#          calculate_qparams, packed by its PackedQuantizationCompressor, dequantized by its decompress.
#   mxfp4: compressed-tensors `mxfp4-pack-quantized` (Kimi K3's experts), by its MXFP4PackedCompressor.
# Offline only: needs torch, safetensors and compressed-tensors.
import json
import os
import re
from dataclasses import dataclass, field
from typing import Callable

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor
from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme, preset_name_to_scheme
from compressed_tensors.quantization.utils import calculate_qparams

FP8_MAX = 448.0


@dataclass
class QuantSpec:
    kind: str                         # "fp8" | "int4" | "mxfp4"
    select: Callable[[str], bool]     # module weights ("...q_proj.weight") stored quantized
    config: dict                      # the quantization_config written into config.json
    block: tuple = (128, 128)         # fp8: weight_block_size
    group_size: int = 32              # int4
    symmetric: bool = True            # int4
    scale_dtype: torch.dtype | None = None  # int4: the dtype scales are computed and stored in (default: the weight's)
    covers: str = ""


def _read(path):
    out = {}
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
        for k in f.keys():
            out[k] = f.get_tensor(k)
    return out


# ---------------------------------------------------------------------------------------------------------------
# FP8 blocks.


def fp8_quantize(w, block):
    """w [N, K] -> (e4m3 codes [N, K], float32 scale_inv [ceil(N/br), ceil(K/bc)])."""
    br, bc = block
    n, k = w.shape
    gr, gc = -(-n // br), -(-k // bc)
    wf = w.float()
    padded = torch.zeros(gr * br, gc * bc)
    padded[:n, :k] = wf.abs()
    amax = padded.view(gr, br, gc, bc).amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    full = scale.repeat_interleave(br, 0).repeat_interleave(bc, 1)[:n, :k]
    codes = (wf / full).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return codes, scale


def fp8_dequantize(codes, scale, block):
    """DeepSeek-V3's rule: element (i, j) takes scale[i // br, j // bc]."""
    br, bc = block
    n, k = codes.shape
    return codes.float() * scale.float().repeat_interleave(br, 0).repeat_interleave(bc, 1)[:n, :k]


# ---------------------------------------------------------------------------------------------------------------
# compressed-tensors.


def _group_qparams(w, args):
    g = w.view(w.shape[0], -1, args.group_size)
    return calculate_qparams(g.amin(-1), g.amax(-1), args)


def int4_compress(w, spec):
    args = QuantizationArgs(num_bits=4, type="int", symmetric=spec.symmetric, strategy="group",
                            group_size=spec.group_size)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    dtype = spec.scale_dtype or w.dtype
    w = w.to(dtype)
    scale, zp = _group_qparams(w, args)
    packed = PackedQuantizationCompressor.compress({"weight": w, "weight_scale": scale, "weight_zero_point": zp},
                                                   scheme)
    # compressed-tensors' own dequantization, its scales widened to float32 first so that (q - zp) * scale is
    # exact (in the scales' own dtype the product would round).
    wide = {k: (v.float() if k == "weight_scale" else v) for k, v in packed.items()}
    dense = PackedQuantizationCompressor.decompress(wide, scheme)["weight"].float()
    return packed, dense


def mxfp4_compress(w):
    scheme = preset_name_to_scheme("MXFP4A16", ["Linear"])
    scale, zp = _group_qparams(w.float(), scheme.weights)
    packed = MXFP4PackedCompressor.compress({"weight": w.float(), "weight_scale": scale, "weight_zero_point": zp},
                                            scheme)
    dense = MXFP4PackedCompressor.decompress(dict(packed), scheme)["weight"].float()  # e2m1 * 2^k: exact
    return packed, dense


# ---------------------------------------------------------------------------------------------------------------
# A quantized directory from a float one.


def quantize_checkpoint(spec, src, out, deq):
    """src: a float checkpoint written by transformers. Writes the quantized checkpoint into `out` and the
    dequantized float32 one (no quantization_config) into `deq`. Returns the names stored quantized."""
    tensors = _read(src)
    quantized, dense = {}, {}
    names = []
    for name, t in tensors.items():
        if not (name.endswith(".weight") and t.dim() == 2 and spec.select(name)):
            quantized[name] = t
            dense[name] = t.float()
            continue
        names.append(name)
        module = name[: -len(".weight")]
        if spec.kind == "fp8":
            codes, scale = fp8_quantize(t, spec.block)
            quantized[name] = codes
            quantized[name + "_scale_inv"] = scale
            dense[name] = fp8_dequantize(codes, scale, spec.block)
        elif spec.kind == "int4":
            packed, d = int4_compress(t, spec)
            for k, v in packed.items():
                quantized[f"{module}.{k}"] = v.contiguous()
            dense[name] = d
        elif spec.kind == "mxfp4":
            packed, d = mxfp4_compress(t)
            for k, v in packed.items():
                quantized[f"{module}.{k}"] = v.contiguous()
            dense[name] = d
        else:
            raise ValueError(spec.kind)
    for d, ts, qc in ((out, quantized, spec.config), (deq, dense, None)):
        os.makedirs(d, exist_ok=True)
        save_file(ts, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        if qc is not None:
            cfg["quantization_config"] = qc
        else:
            cfg.pop("quantization_config", None)
            for key in ("dtype", "torch_dtype"):
                if key in cfg:
                    cfg[key] = "float32"
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        gen = os.path.join(src, "generation_config.json")
        if os.path.exists(gen):
            with open(gen) as f, open(os.path.join(d, "generation_config.json"), "w") as g:
                g.write(f.read())
    return names


def check_transformers_fp8_dequant(spec, out, deq, load):
    """transformers' own FP8 dequantization (FineGrainedFP8 with dequantize, the default on a CPU) reads the
    checkpoint to the same float32 weights as DeepSeek-V3's rule, where its rule applies (it derives the block from
    the scale grid, so blocks must divide the weight; with tiny weights every block is the whole, partial block)."""
    theirs = load(out).state_dict()
    ours = load(deq).state_dict()
    assert set(theirs) == set(ours), sorted(set(theirs) ^ set(ours))[:4]
    for k in ours:
        if not torch.equal(theirs[k].float(), ours[k].float()):
            raise RuntimeError(f"{out}: transformers' FP8 dequantization of {k} differs from the block rule")


# ---------------------------------------------------------------------------------------------------------------
# Configs as the releases write them.


def fp8_config(block, not_converted):
    """not_converted None: no modules_to_not_convert key at all, as DeepSeek-V3's own config.json."""
    cfg = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": list(block)}
    if not_converted is not None:
        cfg["modules_to_not_convert"] = not_converted
    return cfg


def compressed_config(fmt, weights, ignore, targets=("Linear",)):
    return {
        "config_groups": {"group_0": {"input_activations": None, "output_activations": None, "targets": list(targets),
                                      "weights": weights, "format": None}},
        "format": fmt, "global_compression_ratio": None, "ignore": ignore, "kv_cache_scheme": None,
        "quant_method": "compressed-tensors", "quantization_status": "compressed", "sparsity_config": {},
        "transform_config": {}, "version": "0.20.1",
    }


def int4_weights(group_size, symmetric):
    """As Kimi-K2-Thinking's config writes them."""
    return {"actorder": None, "block_structure": None, "dynamic": False, "group_size": group_size, "num_bits": 4,
            "observer": "minmax", "observer_kwargs": {}, "strategy": "group", "symmetric": symmetric, "type": "int"}


MXFP4_WEIGHTS = {"actorder": None, "block_structure": None, "dynamic": False, "group_size": 32, "num_bits": 4,
                 "observer": None, "observer_kwargs": {}, "scale_dtype": "torch.uint8", "strategy": "group",
                 "symmetric": True, "type": "float", "zp_dtype": "torch.uint8"}

# Kimi-K2-Thinking's ignore list: attention, shared experts and dense MLPs stay BF16; only routed experts are INT4.
KIMI_K2_IGNORE = ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"]


def is_expert(name):
    return re.search(r"\.experts\.\d+\.", name) is not None


def is_linear_not_router(name):
    """Every nn.Linear weight but the head and the routers (mlp.gate, shared_expert_gate)."""
    return not re.search(r"(lm_head|embed_tokens|mlp\.gate|shared_expert_gate)\.weight$", name) and "norm" not in name
