// The attention layer of each AttentionKind. A kind is listed once, in attention_kinds.cc, with
// how its layer is built; the decoder asks for a layer by its plan and knows no kind.
#pragma once

#include <memory>
#include <string>

#include "models/layers/layer.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_binder.h"

namespace ls {

// The attention of the layer `plan` describes, binding its tensors under `prefix`.
std::unique_ptr<AttentionLayer> NewAttentionLayer(WeightBinder& b, const std::string& prefix,
                                                  const ModelConfig& config, const LayerPlan& plan);

}  // namespace ls
