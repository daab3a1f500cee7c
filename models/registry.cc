// LoadModel: config, family, weights, model.
#include "models/registry.h"

#include "models/decoder_model.h"
#include "models/families/family.h"

namespace ls {

absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& model_dir, Backend* backend,
                                                 const LoadOptions& options) {
  auto config = LoadModelConfig(model_dir);
  if (!config.ok()) return config.status();
  config->routed_experts_on_host = options.routed_experts_on_host;
  const Family* family = FindFamily(config->architecture, config->model_type);
  auto store = WeightStore::Open(model_dir);
  if (!store.ok()) return store.status();
  return DecoderModel::Load(*family, std::move(*config), std::move(*store), backend);
}

}  // namespace ls
