// RopeTable: the inverse frequencies and the cos/sin scaling of one RoPE configuration, computed
// once at load with transformers' formulas (modeling_rope_utils: default, linear, yarn, llama3),
// in float32 as it computes them.
#pragma once

#include <vector>

#include "kernels/ops.h"
#include "models/loader/model_config.h"

namespace ls {

struct RopeTable {
  std::vector<float> inv_freq;    // [rotary_dim / 2]
  float attention_scaling = 1.f;  // cos and sin are multiplied by it (YaRN's attention factor)

  // The op parameters for heads of `head_dim` with this table.
  RopeParams Params(const RopeConfig& c, int32_t num_heads, int32_t head_dim) const;
};

RopeTable ComputeRopeTable(const RopeConfig& c);

// YaRN's magnitude correction 0.1 · m · ln(scale) + 1 (1 for scale <= 1).
float YarnMscale(float scale, float m);

}  // namespace ls
