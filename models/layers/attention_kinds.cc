// The attention kinds: registering one is one line in kKinds.
#include "models/layers/attention_kinds.h"

#include <type_traits>

#include "models/layers/gqa_attention.h"
#include "models/layers/kda_attention.h"
#include "models/layers/mla_attention.h"

namespace ls {
namespace {

using MakeFn = std::unique_ptr<AttentionLayer> (*)(WeightBinder&, const std::string&, const ModelConfig&,
                                                   const LayerPlan&);

template <typename Layer>
std::unique_ptr<AttentionLayer> Make(WeightBinder& b, const std::string& prefix, const ModelConfig& config,
                                     const LayerPlan& plan) {
  if constexpr (std::is_constructible_v<Layer, WeightBinder&, const std::string&, const ModelConfig&,
                                        const LayerPlan&>)
    return std::make_unique<Layer>(b, prefix, config, plan);
  else
    return std::make_unique<Layer>(b, prefix, config);
}

struct Kind {
  AttentionKind kind;
  MakeFn make;
};

constexpr Kind kKinds[] = {
    {AttentionKind::kGqa, Make<GqaAttention>},
    {AttentionKind::kMla, Make<MlaAttention>},
    {AttentionKind::kKda, Make<KdaAttention>},
};

}  // namespace

std::unique_ptr<AttentionLayer> NewAttentionLayer(WeightBinder& b, const std::string& prefix,
                                                  const ModelConfig& config, const LayerPlan& plan) {
  for (const Kind& k : kKinds)
    if (k.kind == plan.attention) return k.make(b, prefix, config, plan);
  return nullptr;  // a kind not listed above
}

}  // namespace ls
