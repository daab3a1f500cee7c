// RoPE frequency tables, following transformers' modeling_rope_utils step by step.
#include "models/layers/rope_table.h"

#include <algorithm>
#include <cmath>

namespace ls {

float YarnMscale(float scale, float m) {
  if (scale <= 1.f) return 1.f;
  return static_cast<float>(0.1 * m * std::log(static_cast<double>(scale)) + 1.0);
}

RopeParams RopeTable::Params(const RopeConfig& c, int32_t num_heads, int32_t head_dim) const {
  RopeParams p;
  p.num_heads = num_heads;
  p.head_dim = head_dim;
  p.rotary_dim = c.rotary_dim;
  p.interleaved = c.interleaved;
  p.inv_freq = inv_freq.data();
  p.attention_scaling = attention_scaling;
  return p;
}

RopeTable ComputeRopeTable(const RopeConfig& c) {
  RopeTable t;
  const int32_t dim = c.rotary_dim, half = dim / 2;
  // base^(2i/dim) in float32, as torch computes it.
  std::vector<float> pos_freq(half);
  for (int32_t i = 0; i < half; ++i)
    pos_freq[i] = std::pow(c.theta, static_cast<float>(2 * i) / static_cast<float>(dim));
  t.inv_freq.resize(half);
  for (int32_t i = 0; i < half; ++i) t.inv_freq[i] = 1.f / pos_freq[i];
  switch (c.scaling) {
    case RopeConfig::Scaling::kNone:
      break;
    case RopeConfig::Scaling::kLinear:
      for (float& f : t.inv_freq) f /= c.factor;
      break;
    case RopeConfig::Scaling::kYarn: {
      // Dimensions rotating fewer than beta_slow times over the original context interpolate
      // (divided by factor), those rotating more than beta_fast times keep their frequency, with
      // a linear ramp between.
      const double base = c.theta, orig = static_cast<double>(c.original_max_position_embeddings);
      auto correction_dim = [&](double rotations) {
        return dim * std::log(orig / (rotations * 2 * M_PI)) / (2 * std::log(base));
      };
      double low = correction_dim(c.beta_fast), high = correction_dim(c.beta_slow);
      if (c.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(dim - 1));
      if (low == high) high += 0.001;  // no singular ramp
      for (int32_t i = 0; i < half; ++i) {
        const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.f, 1.f);
        const float extrapolation = 1.f - ramp;
        const float interp = 1.f / (c.factor * pos_freq[i]), extrap = 1.f / pos_freq[i];
        t.inv_freq[i] = interp * (1.f - extrapolation) + extrap * extrapolation;
      }
      if (c.attention_factor > 0.f) {
        t.attention_scaling = c.attention_factor;
      } else if (c.mscale != 0.f && c.mscale_all_dim != 0.f) {
        t.attention_scaling = YarnMscale(c.factor, c.mscale) / YarnMscale(c.factor, c.mscale_all_dim);
      } else {
        t.attention_scaling = YarnMscale(c.factor, 1.f);
      }
      break;
    }
    case RopeConfig::Scaling::kLlama3: {
      const float old_len = static_cast<float>(c.original_max_position_embeddings);
      const float low_wavelen = old_len / c.low_freq_factor, high_wavelen = old_len / c.high_freq_factor;
      for (float& f : t.inv_freq) {
        const float wavelen = static_cast<float>(2 * M_PI) / f;
        float scaled = wavelen > low_wavelen ? f / c.factor : f;
        const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        if (medium) {
          const float smooth = (old_len / wavelen - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor);
          scaled = (1.f - smooth) * scaled / c.factor + smooth * scaled;
        }
        f = scaled;
      }
      break;
    }
  }
  return t;
}

}  // namespace ls
