// GluMlp: a gated MLP down(act(gate(h)) ⊙ up(h)) — the dense FFN of a decoder layer and the
// merged shared experts of a MoE layer. Owns views of its three weights. Under tensor parallelism
// a rank holds a share of the width (gate and up split by rows, down by columns), and its output
// is that share's part of the sum.
#pragma once

#include <cstdint>
#include <string>

#include "models/layers/layer.h"
#include "models/layers/tensor_names.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_binder.h"

namespace ls {

class GluMlp final : public FfnLayer {
 public:
  // Binds `<prefix><gate|up|down>.weight`: [width, in], [width, in], [out, width] — part tp.rank
  // of tp.size of the width.
  GluMlp(WeightBinder& b, const std::string& prefix, const GluNames& names, int64_t width, int64_t in, int64_t out,
         GluAct act, const TensorParallel& tp = {});

  // x += the MLP of h (its parts summed over a tensor-parallel group).
  void Forward(StepContext& ctx, int32_t layer, const float* h, float* x) override;
  // out[T, out] (+)= the MLP of h[T, in] (under tensor parallelism: this rank's part of it).
  void Apply(StepContext& ctx, const float* h, float* out, bool accumulate);
  void ForEachWeight(const WeightFn& fn) override;
  int64_t width() const { return width_; }
  const Tensor& gate() const { return gate_; }
  const Tensor& up() const { return up_; }
  const Tensor& down() const { return down_; }

 private:
  // act(gate(h)) ⊙ up(h) in the step's act buffer, [T, width].
  const float* Activation(StepContext& ctx, const float* h);

  Tensor gate_, up_, down_;
  int64_t width_;  // this rank's share
  GluAct act_;
  bool tensor_parallel_;
};

}  // namespace ls
