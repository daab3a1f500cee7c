// Expert placements for the rank-group tests: each MoE layer's experts over `devices` devices of
// `slots` slots, planned from skewed loads (one very hot expert), so that spare slots hold replicas.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "engine/expert_planner.h"
#include "engine/rank_group.h"
#include "models/loader/model_config.h"

namespace ls::testing {

inline LayerPlacements SkewedPlacements(const ModelConfig& c, int32_t devices, int32_t slots, uint32_t seed) {
  LayerPlacements out;
  std::mt19937 rng(seed);
  for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;
    std::vector<double> loads(c.moe.num_experts);
    for (auto& v : loads) v = 1 + rng() % 5;
    loads[rng() % loads.size()] = 50;
    auto p = PlanPlacement(loads, devices, slots);
    EXPECT_TRUE(p.ok()) << p.status();
    out.emplace_back(l, std::move(*p));
  }
  return out;
}

}  // namespace ls::testing
