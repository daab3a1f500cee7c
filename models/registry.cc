// LoadModel: config, family, weights, model.
#include "models/registry.h"

#include "absl/strings/str_cat.h"
#include "models/decoder_model.h"
#include "models/families/family.h"
#include "models/families/load_config.h"

namespace ls {
namespace {

// What a tensor-parallel group of tp.size ranks splits must divide into equal parts; the layer
// kinds not split yet are refused by name.
absl::Status CheckTensorParallel(const ModelConfig& c, const TensorParallel& tp, const std::string& model_dir) {
  if (tp.size < 1 || tp.rank < 0 || tp.rank >= tp.size)
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-parallel rank ", tp.rank, " of a group of ", tp.size, " is out of range"));
  if (!tp.on()) return absl::OkStatus();
  auto refuse = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(model_dir, ": --tensor_parallel_size ", tp.size, ": ", what));
  };
  auto divides = [&](int64_t value, const char* key) -> absl::Status {
    if (value % tp.size == 0) return absl::OkStatus();
    return refuse(absl::StrCat(key, " ", value, " is not a multiple of the group size"));
  };
  if (c.has_attention(AttentionKind::kGqa)) {
    if (auto s = divides(c.attention.num_heads, "num_attention_heads"); !s.ok()) return s;
    if (c.attention.num_kv_heads % tp.size != 0 && tp.size % c.attention.num_kv_heads != 0)
      return refuse(absl::StrCat("num_key_value_heads ", c.attention.num_kv_heads,
                                 " neither divides nor is a multiple of the group size"));
  }
  if (c.has_attention(AttentionKind::kMla))
    if (auto s = divides(c.mla.num_heads, "the MLA layers' num_attention_heads"); !s.ok()) return s;
  if (c.has_attention(AttentionKind::kKda))
    if (auto s = divides(c.kda.num_heads, "the KDA layers' num_heads"); !s.ok()) return s;
  if (auto s = divides(c.vocab_size, "vocab_size"); !s.ok()) return s;
  bool dense = false;
  for (int32_t l = 0; l < c.num_hidden_layers; ++l) dense |= !c.is_moe_layer(l);
  if (dense)
    if (auto s = divides(c.intermediate_size, "intermediate_size"); !s.ok()) return s;
  if (c.has_moe_layers() && c.moe.shared_ffn > 0)
    if (auto s = divides(c.moe.shared_ffn, "the shared experts' width"); !s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& model_dir, Backend* backend,
                                                 const LoadOptions& options) {
  auto config = LoadModelConfig(model_dir);
  if (!config.ok()) return config.status();
  if (options.quantization != QuantScheme::kNone && config->quantization.quantized())
    return absl::InvalidArgumentError(absl::StrCat(
        model_dir, ": --quantization ", QuantSchemeName(options.quantization),
        " needs a float checkpoint; this one is quantized already (", config->quantization.Describe(), ")"));
  config->online_quantization = options.quantization;
  config->routed_experts_on_host = options.routed_experts_on_host;
  if (options.routed_experts_on_host && options.quantization != QuantScheme::kNone)
    return absl::InvalidArgumentError(absl::StrCat(
        "--quantization ", QuantSchemeName(options.quantization),
        " is not available to a rank group yet (each rank prepares its experts from the checkpoint as saved)"));
  if (options.next_token_layer) {
    if (config->num_nextn_predict_layers < 1)
      return absl::InvalidArgumentError(absl::StrCat(model_dir, ": ", config->family,
                                                     " checkpoint has no multi-token-prediction layers ",
                                                     "(config.json num_nextn_predict_layers is 0 or absent)"));
    if (options.routed_experts_on_host)
      return absl::InvalidArgumentError(
          "a multi-token-prediction layer holds all its experts (it drafts on the leader of a rank group)");
    // Layer 0 of this model is the checkpoint's layer num_hidden_layers: the attention of the
    // layers before it, and routed experts when the model has them.
    LayerPlan plan = config->layers.empty() ? LayerPlan{} : config->layers.back();
    plan.ffn = config->has_moe_layers() ? FfnKind::kMoe : FfnKind::kDense;
    config->next_token_layer = config->num_hidden_layers;
    config->num_hidden_layers = 1;
    config->layers = {plan};
  }
  if (auto s = CheckTensorParallel(*config, options.tensor_parallel, model_dir); !s.ok()) return s;
  if (options.tensor_parallel.on() && options.next_token_layer)
    return absl::InvalidArgumentError("a multi-token-prediction layer loads whole (it drafts on the group's leader)");
  config->tensor_parallel = options.tensor_parallel;
  const Family* family = FindFamily(config->architecture, config->model_type);
  config->shapes_only = options.shapes_only;
  auto store = WeightStore::Open(model_dir, options.shapes_only);
  if (!store.ok()) return store.status();
  if (config->next_token_layer >= 0) {
    // transformers writes num_nextn_predict_layers 1 into checkpoints it saves without the layer.
    const std::string prefix = absl::StrCat(family->names.prefix, "model.layers.", config->next_token_layer, ".");
    bool any = false;
    for (const auto& entry : (*store)->Entries()) any |= entry.first.rfind(prefix, 0) == 0;
    if (!any)
      return absl::InvalidArgumentError(absl::StrCat(
          model_dir, ": ", config->family, " checkpoint has no multi-token-prediction layers (config.json ",
          "num_nextn_predict_layers is ", config->num_nextn_predict_layers, " but no tensor is named ", prefix, "*)"));
  }
  return DecoderModel::Load(*family, std::move(*config), std::move(*store), backend);
}

absl::Status CheckActivationDtype(const Model& model, const std::string& activation_dtype) {
  if (activation_dtype != "int8" || model.int8_activation_weights() > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "--activation_dtype int8: none of this model's GEMM weights are int8 or int4 (load a checkpoint "
      "quantized to int4, or quantize at load with --quantization int8 or int4)");
}

absl::StatusOr<QuantScheme> ParseQuantScheme(const std::string& name) {
  for (QuantScheme s : {QuantScheme::kNone, QuantScheme::kInt8, QuantScheme::kFp8, QuantScheme::kInt4,
                        QuantScheme::kInt8A8, QuantScheme::kInt4A8})
    if (name == QuantSchemeName(s)) return s;
  return absl::InvalidArgumentError(
      absl::StrCat("--quantization '", name, "' is not one of none, int8, fp8, int4, w8a8, w4a8"));
}

const char* QuantSchemeName(QuantScheme scheme) {
  switch (scheme) {
    case QuantScheme::kNone: return "none";
    case QuantScheme::kInt8: return "int8";
    case QuantScheme::kFp8: return "fp8";
    case QuantScheme::kInt4: return "int4";
    case QuantScheme::kInt8A8: return "w8a8";
    case QuantScheme::kInt4A8: return "w4a8";
  }
  return "?";
}

}  // namespace ls
