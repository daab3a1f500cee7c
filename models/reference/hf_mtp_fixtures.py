# Writes tiny DeepSeek-V3 and GLM-4-MoE checkpoints that carry a multi-token-prediction (MTP) layer, as the
# published checkpoints do (model.layers.{num_hidden_layers}.*, config num_nextn_predict_layers 1), with goldens:
# the target's logits from transformers (as hf_fixtures.py writes them) and the MTP layer's logits from the
# reference below, into tests/data/hf/<fixture>/.
#
# transformers loads such checkpoints but skips the MTP layer, so the reference is ours, built from transformers'
# own modules: the decoder block is transformers' decoder layer of the family (index num_hidden_layers), the norms
# its RMSNorm. Row p of the MTP layer reads the target's final hidden row h_p (after the final norm) and the next
# token t_{p+1}:
#   x_p = eh_proj([enorm(embed(t_{p+1})), hnorm(h_p)]);  y = block(x) (causal over the rows, RoPE position p);
#   logits_p = shared_head.head(shared_head.norm(y_p)), the prediction of token t_{p+2}.
# The embedding of position 0 is kept (SGLang and TensorRT-LLM keep it; vLLM zeroes it).
# Offline only: needs torch + transformers 5.
# Usage: python models/reference/hf_mtp_fixtures.py [--out tests/data/hf] [--only NAME ...]
import argparse
import json
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import torch
from torch import nn

import transformers as T
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_fixtures as H  # noqa: E402


class MtpLayer(nn.Module):
    """The next-token layer under its checkpoint names (relative to model.layers.{N}.)."""

    def __init__(self, config, block, norm_cls):
        super().__init__()
        d = config.hidden_size
        self.embed_tokens = nn.Embedding(config.vocab_size, d)
        self.enorm = norm_cls(d, eps=config.rms_norm_eps)
        self.hnorm = norm_cls(d, eps=config.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * d, d, bias=False)
        self.block = block
        self.shared_head = nn.Module()
        self.shared_head.norm = norm_cls(d, eps=config.rms_norm_eps)
        self.shared_head.head = nn.Linear(d, config.vocab_size, bias=False)

    def own_tensors(self, index):
        """Its tensors outside the block (the block's come from save_pretrained, in per-expert names)."""
        return {f"model.layers.{index}.{name}": t.detach().clone().contiguous()
                for name, t in self.named_parameters() if not name.startswith("block.")}

    def forward(self, model, hidden, next_ids):
        """Rows p = 0..L-1 over the target's final hidden rows hidden[L, d] and the next tokens next_ids[L]."""
        emb = self.enorm(self.embed_tokens(next_ids[None]))
        x = self.eh_proj(torch.cat([emb, self.hnorm(hidden[None])], dim=-1))
        L = x.shape[1]
        pos = torch.arange(L)[None]
        mask = torch.full((L, L), float("-inf")).triu(1)[None, None]
        y = self.block(x, attention_mask=mask, position_ids=pos, position_embeddings=model.model.rotary_emb(x, pos))
        y = y[0] if isinstance(y, tuple) else y
        return self.shared_head.head(self.shared_head.norm(y))[0]


NORMS = {"deepseek_v3": T.models.deepseek_v3.modeling_deepseek_v3.DeepseekV3RMSNorm,
         "glm4_moe": T.models.glm4_moe.modeling_glm4_moe.Glm4MoeRMSNorm}

FIXTURES = [
    (H.Fixture("deepseek_v3_mtp_f32", "DeepSeek-V3 (as deepseek_v3_f32 with 2 layers, published spelling) with one MTP layer: "
               "model.layers.2.{embed_tokens,enorm,hnorm,eh_proj,shared_head.*} and an MLA + MoE block",
               T.DeepseekV3Config, T.DeepseekV3ForCausalLM, dict(H.DSV3, num_hidden_layers=2), 131, publish=H.publish_deepseek_v3),
     "deepseek_v3"),
    (H.Fixture("glm4_moe_mtp_f32", "GLM-4-MoE (as glm4_moe_f32 with 2 layers, published spelling) with one MTP layer: "
               "model.layers.2.*, a GQA (partial RoPE, qk-norm, bias) + MoE block",
               T.Glm4MoeConfig, T.Glm4MoeForCausalLM, dict(H.GLM, num_hidden_layers=2), 132, publish=H.publish_glm4),
     "glm4_moe"),
]


def mtp_goldens(model, mtp, golden, out):
    """The MTP layer over the golden sequence (prompt + greedy decode): logits [L - 1, V] of rows 0..L-2."""
    ids = torch.tensor(golden["prompt_ids"] + golden["decode_ids"])
    with torch.no_grad():
        hidden = model.model(input_ids=ids[None]).last_hidden_state[0]
        logits = mtp(model, hidden[:-1], ids[1:]).float()
    np.save(os.path.join(out, "mtp_logits.npy"), logits.numpy().astype(np.float32))
    top2 = logits.double().topk(2, dim=-1).values
    return {"mtp_argmax": logits.argmax(-1).tolist(), "mtp_greedy_margin": float(f"{float((top2[:, 0] - top2[:, 1]).min()):.6g}")}


def write(fx, family, root):
    out = os.path.join(root, fx.name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    model = H.write_checkpoint(fx, H.build_model(fx), out)
    H.verify_reload(fx, model, out)
    N = model.config.num_hidden_layers
    # The block: layer N of the same model one layer deeper (transformers' own decoder layer at that index),
    # saved by save_pretrained so that its experts carry the published per-expert names.
    deeper = H.build_model(H.Fixture(fx.name, "", fx.config_cls, fx.model_cls,
                                     dict(fx.config, num_hidden_layers=N + 1), fx.seed + 1000))
    mtp = MtpLayer(model.config, deeper.model.layers[N], NORMS[family]).eval()
    H.randomize(mtp, fx.seed + 2000)
    with torch.no_grad():  # the published checkpoints repeat the embedding in the MTP layer
        mtp.embed_tokens.weight.copy_(model.model.embed_tokens.weight)
    tensors = H.read_tensors(out)
    with tempfile.TemporaryDirectory() as tmp:
        deeper.save_pretrained(tmp)
        prefix = f"model.layers.{N}."
        tensors.update((k, v) for k, v in H.read_tensors(tmp).items() if k.startswith(prefix))
    tensors.update(mtp.own_tensors(N))
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    cfg_path = os.path.join(out, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["num_nextn_predict_layers"] = 1
    with open(cfg_path, "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    golden = H.make_goldens(fx, out)  # transformers skips the MTP tensors: the target alone
    golden.update(mtp_goldens(H.load(out, fx.dtype), mtp, golden, out))
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(golden, f)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    if size > H.SIZE_LIMIT:
        raise RuntimeError(f"{fx.name}: {size} bytes, over the {H.SIZE_LIMIT} limit")
    return size, golden


def main():
    p = argparse.ArgumentParser(description="write tiny MoE checkpoints with an MTP layer and its golden logits")
    p.add_argument("--out", default=os.path.join(H.REPO, "tests", "data", "hf"))
    p.add_argument("--only", nargs="*", help="fixture names (default: all)")
    a = p.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=FutureWarning)
    T.logging.set_verbosity_error()
    T.utils.logging.disable_progress_bar()
    for fx, family in FIXTURES:
        if a.only and fx.name not in a.only:
            continue
        size, g = write(fx, family, a.out)
        print(f"{fx.name}: {size} bytes, greedy margin {g['greedy_margin']:.3g}, "
              f"MTP greedy margin {g['mtp_greedy_margin']:.3g}")


if __name__ == "__main__":
    main()
