// AttnResMixer: binding and the mix through Backend::AttnResMix.
#include "models/layers/attn_res.h"

namespace ls {

AttnResMixer::AttnResMixer(WeightBinder& b, const std::string& prefix, int64_t d, float eps)
    : norm_(b.Get(prefix + "_norm.weight", 0, d)), proj_(b.Get(prefix + "_proj.weight", 1, d)), d_(d), eps_(eps) {}

void AttnResMixer::Mix(StepContext& ctx, const float* blocks, int32_t num_blocks, const float* last,
                       float* out) const {
  AttnResParams p;
  p.blocks = blocks;
  p.num_blocks = num_blocks;
  p.last = last;
  p.num_tokens = ctx.num_tokens;
  p.width = d_;
  p.norm_weight = norm_;
  p.proj_weight = proj_;
  p.eps = eps_;
  p.out = out;
  ctx.backend->AttnResMix(p);
}

}  // namespace ls
