// Qwen3ForCausalLM (transformers qwen3, the dense Qwen3 models, e.g. a small drafter): GQA with
// per-head q/k RMSNorm and a dense SiLU MLP on every layer; with use_sliding_window, a window on
// the layers layer_types names, by default those from max_window_layers on.
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadConfig(ConfigReader& r, ModelConfig* c) {
  ReadDecoderKeys(r, c, DecoderDefaults{.max_position_embeddings = 32768});
  ReadGqaKeys(r, c);
  GqaConfig& a = c->attention;
  a.qkv_bias = a.o_bias = r.Bool("attention_bias", false);
  a.qk_norm = true;
  ReadRopeKeys(r, c, RopeDefaults{}, a.head_dim, &a.rope);
  ReadActivation(r, c, /*allow_situ=*/false);
  c->intermediate_size = r.Int("intermediate_size", true);
  PlanLayers(c, c->num_hidden_layers);  // every layer dense
  const bool sliding = r.Bool("use_sliding_window", false);
  const int64_t window = r.Int("sliding_window", false, 4096);
  const int64_t max_window_layers = r.Int("max_window_layers", false, 28);
  std::vector<bool> slides(c->num_hidden_layers);
  if (r.Has("layer_types")) {
    const std::optional<std::vector<std::string>> types = r.StringList("layer_types");
    if (!types || static_cast<int64_t>(types->size()) != c->num_hidden_layers) {
      r.Fail("key 'layer_types' must list \"full_attention\" or \"sliding_attention\" per layer");
      return;
    }
    for (int32_t l = 0; l < c->num_hidden_layers; ++l) {
      slides[l] = (*types)[l] == "sliding_attention";
      if (!slides[l] && (*types)[l] != "full_attention")
        r.Fail("key 'layer_types' must list \"full_attention\" or \"sliding_attention\" per layer");
    }
  } else {
    for (int32_t l = 0; l < c->num_hidden_layers; ++l) slides[l] = l >= max_window_layers;
  }
  if (!sliding) return;  // transformers drops the window without use_sliding_window
  if (window <= 0) r.Fail("key 'sliding_window' must be positive with use_sliding_window");
  for (int32_t l = 0; l < c->num_hidden_layers; ++l)
    if (slides[l]) c->layers[l].sliding_window = static_cast<int32_t>(window);
}

}  // namespace

const Family kQwen3 = {
    .name = "Qwen3",
    .architectures = {"Qwen3ForCausalLM"},
    .model_types = {"qwen3"},
    .read_config = ReadConfig,
    .tool_call_format = "hermes",
};

}  // namespace ls
