// WeightBudget: one shapes-only load per tensor-parallel rank, and the experts' slots beside it.
#include "server/weight_budget.h"

#include "absl/strings/str_cat.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"

namespace ls::server {

absl::StatusOr<std::string> WeightBudgetJson(const std::string& model_dir, Backend* backend, int32_t ranks,
                                             int32_t tensor_parallel, int32_t expert_slots) {
  if (ranks < 1 || tensor_parallel < 1 || ranks % tensor_parallel != 0)
    return absl::InvalidArgumentError(absl::StrCat("--weight_budget_ranks ", ranks, " must be a positive multiple of ",
                                                   "--tensor_parallel_size ", tensor_parallel));
  constexpr double kGb = 1e9;
  nlohmann::json gpus = nlohmann::json::array();
  nlohmann::json out;
  for (int32_t r = 0; r < tensor_parallel; ++r) {
    LoadOptions options;
    options.shapes_only = true;
    options.routed_experts_on_host = ranks > 1;
    options.tensor_parallel = {r, tensor_parallel};
    auto model = LoadModel(model_dir, backend, options);
    if (!model.ok()) return model.status();
    const ModelConfig& c = (*model)->config();
    int32_t moe_layers = 0;
    for (int32_t l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.is_moe_layer(l);
    const int64_t N = c.moe.num_experts, experts = (*model)->routed_expert_bytes();
    const int64_t slots = expert_slots > 0 ? expert_slots : (N + ranks - 1) / ranks;
    if (moe_layers > 0 && slots * ranks < N)
      return absl::InvalidArgumentError(absl::StrCat("--expert_slots ", slots, " over ", ranks, " ranks hold ",
                                                     slots * ranks, " of the ", N, " experts of a layer"));
    const double one_expert = moe_layers > 0 ? static_cast<double>(experts) / (moe_layers * N) : 0;
    const double held = one_expert * moe_layers * slots;
    const double rest = static_cast<double>((*model)->checkpoint_bytes_bound() - experts);
    gpus.push_back({{"tensor_parallel_rank", r},
                    {"non_expert_gb", rest / kGb},
                    {"expert_gb", held / kGb},
                    {"total_gb", (rest + held) / kGb}});
    if (r == 0)
      out = {{"event", "weight_budget"},
             {"model", model_dir},
             {"family", c.family},
             {"ranks", ranks},
             {"tensor_parallel_size", tensor_parallel},
             {"expert_slots", moe_layers > 0 ? slots : 0},
             {"checkpoint_gb", static_cast<double>((*model)->weight_store().total_bytes()) / kGb},
             {"routed_experts_gb", static_cast<double>(experts) / kGb},
             {"one_expert_mb", one_expert / 1e6}};
  }
  out["gpus"] = std::move(gpus);
  return out.dump();
}

}  // namespace ls::server
