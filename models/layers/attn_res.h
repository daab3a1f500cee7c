// AttnRes: the attention residuals of K3 (docs/math.md, docs/k3.md). The residual stream restarts every block of
// attn_res_block_size layers, keeping the stream at each block's start; before attention and
// before the FFN, each layer reads not its residual but a learned softmax mix of the block
// residuals and the current one, and the last layer's output is mixed once more. AttnResMixer
// holds one mix's weights (a norm and a projection) and runs it; AttnResStream is the block
// shape, keeping the blocks and running every layer's mixes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device_buffer.h"
#include "models/layers/residual_stream.h"
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

// The recurrence (docs/math.md, "Attention residuals"): per layer l, p = h; the attention reads
// AR(p, blocks) (h itself before any block exists); at a block's first layer p joins the blocks
// and the stream restarts (p = the attention's output alone); the FFN reads
// AR(p + attention, blocks) and h = p + FFN. After the last layer h = AR(h, blocks).
class AttnResStream final : public ResidualStream {
 public:
  // Binds `model.layers.<l>.self_attention_res_*` and `…mlp_res_*` for every layer (layer 0 has
  // no blocks to mix before its attention; its tensors are bound all the same), and
  // `model.output_attn_res_*`.
  AttnResStream(WeightBinder& b, const ModelConfig& config, Backend* backend);

  void Begin(StepContext& ctx) override;
  const float* AttentionInput(StepContext& ctx, int32_t layer, float*& x) override;
  const float* FfnInput(StepContext& ctx, int32_t layer, const float* x) override;
  const float* Output(StepContext& ctx, const float* x) override;
  void ForEachWeight(const WeightFn& fn) override;

 private:
  struct LayerMixes {
    AttnResMixer attention, ffn;
  };
  int32_t block_size_;
  int64_t d_;
  std::vector<LayerMixes> layers_;
  AttnResMixer output_;
  DeviceBuffer blocks_, mix_, other_;  // the blocks, a mix, the stream's second buffer (restarts)
  float* blocks_data_ = nullptr;       // this step's [max blocks, T, d]
  int32_t num_blocks_ = 0;
};

}  // namespace ls
