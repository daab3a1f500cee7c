// GluMlp: a gated MLP down(act(gate(h)) ⊙ up(h)) — the dense FFN of a decoder layer and the
// merged shared experts of a MoE layer. Owns views of its three weights.
#pragma once

#include <cstdint>
#include <string>

#include "models/layers/layer.h"
#include "models/layers/tensor_names.h"
#include "models/loader/weight_binder.h"

namespace ls {

class GluMlp final : public FfnLayer {
 public:
  // Binds `<prefix><gate|up|down>.weight`: [width, in], [width, in], [out, width].
  GluMlp(WeightBinder& b, const std::string& prefix, const GluNames& names, int64_t width, int64_t in, int64_t out,
         GluAct act);

  void Forward(StepContext& ctx, int32_t layer, const float* h, float* x) override;
  // out[T, out] (+)= the MLP of h[T, in].
  void Apply(StepContext& ctx, const float* h, float* out, bool accumulate);
  void ForEachWeight(const WeightFn& fn) override;
  int64_t width() const { return width_; }
  const Tensor& gate() const { return gate_; }
  const Tensor& up() const { return up_; }
  const Tensor& down() const { return down_; }

 private:
  Tensor gate_, up_, down_;
  int64_t width_;
  GluAct act_;
};

}  // namespace ls
