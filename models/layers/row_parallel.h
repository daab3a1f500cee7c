// AddRowParallel: the output projection of a tensor-parallel sublayer (attention's o_proj, an
// MLP's down projection). Each rank of the group holds some of the weight's columns and computes
// its part of the product; the group sums the parts, and every rank adds the whole to its copy of
// the residual stream. Alone it is one accumulating GEMM.
#pragma once

#include <cstdint>

#include "models/layers/step_context.h"

namespace ls {

// x[rows, w.rows] += the group's sum of in[rows, w.cols] · wᵀ (w: this rank's columns when
// `split`, else the whole weight and no sum).
inline void AddRowParallel(StepContext& ctx, const float* in, int64_t rows, const Tensor& w, bool split, float* x) {
  if (!split) {
    ctx.backend->Gemm(in, rows, w, x, /*accumulate=*/true);
    return;
  }
  const int64_t n = rows * w.rows;
  float* part = ctx.buf->partial.as<float>(n);
  ctx.backend->Gemm(in, rows, w, part, /*accumulate=*/false);
  ctx.backend->AllReduceSum(part, n);
  ctx.backend->Add(x, part, n);
}

}  // namespace ls
