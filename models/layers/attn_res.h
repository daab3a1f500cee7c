// AttnRes: the attention residuals of K3 (docs/math.md, docs/k3.md). The residual stream restarts every block of
// attn_res_block_size layers, keeping the stream at each block's start; before attention and
// before the FFN, each layer reads not its residual but a learned softmax mix of the block
// residuals and the current one, and the last layer's output is mixed once more. This unit holds
// one mix's weights (a norm and a projection) and runs it; DecoderModel keeps the blocks.
#pragma once

#include <cstdint>
#include <string>

#include "models/layers/step_context.h"
#include "models/loader/weight_binder.h"

namespace ls {

class AttnResMixer {
 public:
  AttnResMixer() = default;
  // Binds `<prefix>_norm.weight` [d] and `<prefix>_proj.weight` [1, d] (e.g. "…self_attention_res").
  AttnResMixer(WeightBinder& b, const std::string& prefix, int64_t d, float eps);

  // out[T, d] = the mix of blocks[num_blocks, T, d] and last[T, d].
  void Mix(StepContext& ctx, const float* blocks, int32_t num_blocks, const float* last, float* out) const;
  template <typename Fn>
  void ForEachWeight(Fn&& fn) {
    fn(norm_);
    fn(proj_);
  }

 private:
  Tensor norm_, proj_;
  int64_t d_ = 0;
  float eps_ = 1e-6f;
};

}  // namespace ls
