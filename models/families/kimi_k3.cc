// KimiK3ForConditionalGeneration (Kimi K3, docs/k3.md): the text model of a vision-language
// wrapper. Its config sits in text_config and its tensors under "language_model."; the vision
// tower and projector are left unread (text serving). Kimi-Linear's layer layout (KDA layers with
// K3's bounded forget gate and full-rank output gate, MLA layers without RoPE and with an output
// gate) with AttnRes block residuals, SiTU with its bounds, and LatentMoE experts: the router on the
// full width, the experts in the routed_expert_hidden_size latent, RMSNorm on their sum; the
// routed experts in MXFP4 (compressed-tensors, quantization_config inside text_config).
#include "absl/strings/str_cat.h"
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadTextConfig(ConfigReader& r, ModelConfig* c) {
  ReadKimiKeys(r, c, MoeDefaults{.routed_scaling_factor = 1.0});
  ReadActivation(r, c, /*allow_situ=*/true);
  MoeConfig& m = c->moe;
  m.latent_size = r.Int("routed_expert_hidden_size", false, 0);
  m.expert_output_norm = r.Bool("latent_moe_use_norm", true);
  if (m.latent_size <= 0 && m.expert_output_norm)
    r.Fail("key 'latent_moe_use_norm' needs a latent space (routed_expert_hidden_size)");
  if (r.String("topk_method", "noaux_tc") != "noaux_tc") r.Unsupported("topk_method", "\"noaux_tc\"");
  // Without grouped top-k the groups are one: a grouped config then says nothing.
  if (!r.Bool("use_grouped_topk", true) && (m.n_group != 1 || m.topk_group != 1))
    r.Unsupported("use_grouped_topk", "true when num_expert_group is not 1");
  c->mla.output_gate = r.Bool("mla_use_output_gate", false);
  const int64_t block = r.Int("attn_res_block_size", false, 0);
  if (block < 0 || block > c->num_hidden_layers)
    r.Fail(absl::StrCat("key 'attn_res_block_size' must be within [0, num_hidden_layers], got ", block));
  c->attn_res_block_size = static_cast<int32_t>(block);
}

void ReadKimiK3Config(ConfigReader& r, ModelConfig* c) {
  std::optional<ConfigReader> text = r.Object("text_config");
  if (!text) {
    r.Fail("key 'text_config' is missing: a KimiK3ForConditionalGeneration config nests its language model there");
    return;
  }
  ReadTextConfig(*text, c);
  // K3 keeps its quantization_config inside text_config; a wrapper-level one (read by the loader
  // for every family) alongside it would leave open which applies.
  ReadQuantizationConfig(*text, &c->quantization);
  if (c->quantization.quantized() && r.Has("quantization_config"))
    r.Fail("key 'quantization_config' is given both here and in text_config");
  // The wrapper repeats some text keys; one that disagrees leaves the meaning open.
  if (r.Has("tie_word_embeddings") && r.Bool("tie_word_embeddings", false) != c->tie_word_embeddings)
    r.Fail("key 'tie_word_embeddings' disagrees with text_config.tie_word_embeddings");
  if (r.Has("bos_token_id") && r.Int("bos_token_id", false) != c->bos_token_id)
    r.Fail("key 'bos_token_id' disagrees with text_config.bos_token_id");
  if (r.Has("eos_token_id")) {
    std::vector<int32_t> eos;
    for (int64_t id : r.IntList("eos_token_id")) eos.push_back(static_cast<int32_t>(id));
    if (eos != c->eos_token_ids) r.Fail("key 'eos_token_id' disagrees with text_config.eos_token_id");
  }
  // The vision side, and bookkeeping of the wrapper.
  r.Ignore({"vision_config", "ignore_index", "media_placeholder_token_id", "pad_token_id", "dtype", "torch_dtype",
            "transformers_version", "auto_map", "use_cache"});
}

bool IsVisionTensor(const std::string& tensor, const ModelConfig&) {
  return tensor.rfind("vision_tower.", 0) == 0 || tensor.rfind("mm_projector.", 0) == 0;
}

}  // namespace

const Family kKimiK3 = {
    .name = "Kimi-K3",
    .architectures = {"KimiK3ForConditionalGeneration"},
    .model_types = {"kimi_k3"},
    .read_config = ReadKimiK3Config,
    .names = {.prefix = "language_model.",
              .moe = {.block = "block_sparse_moe.",
                      .expert = {.gate = "w1", .up = "w3", .down = "w2"},
                      .latent_down = "routed_expert_down_proj.weight",
                      .latent_norm = "routed_expert_norm.weight",
                      .latent_up = "routed_expert_up_proj.weight"}},
    .unused_ok = IsVisionTensor,
    .tool_call_format = "xtml",
    .reasoning_format = "xtml",
};

}  // namespace ls
