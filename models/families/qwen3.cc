// Qwen3ForCausalLM (transformers qwen3, the dense Qwen3 models, e.g. a small drafter): GQA with
// per-head q/k RMSNorm and a dense SiLU MLP on every layer; with use_sliding_window, a window on
// the layers layer_types names, by default those from max_window_layers on.
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadQwen3Config(ConfigReader& r, ModelConfig* c) {
  ReadQwen3AttentionKeys(r, c);
  c->intermediate_size = r.Int("intermediate_size", true);
  PlanLayers(c, c->num_hidden_layers);  // every layer dense
  ReadQwenLayerTypes(r, c, QwenWindowLayers::kFromMax);
}

}  // namespace

const Family kQwen3 = {
    .name = "Qwen3",
    .architectures = {"Qwen3ForCausalLM"},
    .model_types = {"qwen3"},
    .read_config = ReadQwen3Config,
    .tool_call_format = "hermes",
};

}  // namespace ls
