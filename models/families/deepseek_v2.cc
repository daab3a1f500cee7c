// DeepseekV2ForCausalLM (transformers deepseek_v2): DeepSeek-V3's MLA layers with a softmax
// router without correction biases — greedy top-k, or group-limited with groups ranked by their
// best score — whose weights are scaled but never renormalised.
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {
namespace {

void ReadDeepseekV2Config(ConfigReader& r, ModelConfig* c) {
  ReadDecoderKeys(r, c, DecoderDefaults{.max_position_embeddings = 2048});
  ReadActivation(r, c, /*allow_situ=*/false);
  ReadDeepseekMoeKeys(r, c, MoeDefaults{.n_shared_experts = 2, .first_k_dense_replace = 0});
  ReadMlaKeys(r, c, MlaDefaults{.q_lora_rank = 1536});
  for (LayerPlan& l : c->layers) l.attention = AttentionKind::kMla;
  // transformers' DeepSeek-V2 rotates interleaved pairs whatever rope_interleave says.
  if (!c->mla.rope.interleaved) r.Unsupported("rope_interleave", "true: DeepSeek-V2 rotates interleaved pairs");
  MoeConfig& m = c->moe;
  m.scoring = ScoringFunc::kSoftmax;
  m.norm_topk_prob = false;  // transformers' DeepSeek-V2 router never renormalises, whatever the key says
  m.group_score = GroupScore::kMax;
  const std::string method = r.String("topk_method", "greedy");
  if (method == "greedy") {
    m.n_group = m.topk_group = 1;
  } else if (method != "group_limited_greedy") {
    r.Unsupported("topk_method", "\"greedy\" or \"group_limited_greedy\"");
  }
  if (r.String("scoring_func", "softmax") != "softmax") r.Unsupported("scoring_func", "\"softmax\"");
  if (r.Int("moe_layer_freq", false, 1) != 1) r.Unsupported("moe_layer_freq", "1: every layer after the dense ones");
  r.Ignore({"num_nextn_predict_layers", "ep_size", "aux_loss_alpha", "seq_aux"});
}

}  // namespace

const Family kDeepseekV2 = {
    .name = "DeepSeek-V2",
    .architectures = {"DeepseekV2ForCausalLM"},
    .model_types = {"deepseek_v2"},
    .read_config = ReadDeepseekV2Config,
    .unused_ok = IsMtpLayerTensor,
    .tool_call_format = "deepseek_v3",
};

}  // namespace ls
