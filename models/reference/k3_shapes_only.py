# Writes a shapes-only Kimi K3 checkpoint at the released sizes (docs/k3.md): config.json and one
# safetensors file per layer holding only its header (names, dtypes, shapes and offsets as the
# released checkpoint lays them out, MXFP4 experts as compressed-tensors packs them), about 60 MB
# instead of 1.56 TB. For memory plans without the weights:
#   latentserve --model OUT --weight_budget_ranks 16 --tensor_parallel_size 8 --expert_slots 58
# Offline only (imports the fixture writer: torch, compressed-tensors). Usage: python k3_shapes_only.py OUT
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3_fixtures as K  # noqa: E402
import k3_reference as R  # noqa: E402

DTYPE_BYTES = {"BF16": 2, "F32": 4, "U8": 1}


def full_text_config() -> dict:
    tc = K.text_config(K.Fixture("k3_shapes_only", "released sizes", 0, mxfp4=True))
    layers = 93
    full = [l for l in range(4, layers + 1, 4)] + [layers]  # 24 MLA layers (1-based), the rest KDA
    tc.update({"vocab_size": 163840, "hidden_size": 7168, "intermediate_size": 33792, "num_hidden_layers": layers,
               "num_attention_heads": 96, "num_key_value_heads": 96, "attn_res_block_size": 12,
               "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
               "v_head_dim": 128, "num_experts": 896, "num_experts_per_token": 16, "num_shared_experts": 2,
               "moe_intermediate_size": 3072, "routed_expert_hidden_size": 3584, "num_expert_group": 1,
               "topk_group": 1, "bos_token_id": 163584, "eos_token_id": 163586, "pad_token_id": 163839})
    tc["linear_attn_config"].update({"full_attn_layers": full,
                                     "kda_layers": [l for l in range(1, layers + 1) if l not in full],
                                     "num_heads": 96, "head_dim": 128})
    return tc


def entries(tc: dict) -> dict:
    """name -> (dtype, shape) for every text tensor, the experts packed."""
    out = {}
    for name, shape in K.text_shapes(tc).items():
        key = R.TEXT_PREFIX + name
        if ".experts." in name:
            rows, cols = shape
            base = key[: -len(".weight")]
            out[base + ".weight_packed"] = ("U8", [rows, cols // 2])
            out[base + ".weight_scale"] = ("U8", [rows, cols // R.MX_GROUP])
        else:
            out[key] = ("F32" if name.endswith(K.F32_SUFFIXES) else "BF16", shape)
    return out


def write_header_only(path: str, tensors: dict):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape) in tensors.items():
        n = DTYPE_BYTES[dtype]
        for s in shape:
            n *= s
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tc = full_text_config()
    by_file, weight_map = {}, {}
    for name, entry in entries(tc).items():
        part = name.split(".layers.")[1].split(".")[0] if ".layers." in name else "rest"
        by_file.setdefault(part, {})[name] = entry
    files = sorted(by_file, key=lambda p: (p == "rest", int(p) if p.isdigit() else 0))
    for i, part in enumerate(files):
        file = f"model-{i + 1:05d}-of-{len(files):05d}.safetensors"
        write_header_only(os.path.join(out, file), by_file[part])
        weight_map.update({name: file for name in by_file[part]})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    config = {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "text_config": tc,
              "vision_config": K.VISION_CONFIG, "bos_token_id": tc["bos_token_id"],
              "eos_token_id": tc["eos_token_id"], "pad_token_id": tc["pad_token_id"],
              "tie_word_embeddings": False, "dtype": "bfloat16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"{out}: {len(weight_map)} tensors in {len(files)} header-only files")


if __name__ == "__main__":
    main()
