// GluMlp: gate and up projections in one GemmMany, the GLU activation, the down projection.
#include "models/layers/glu_mlp.h"

#include "models/layers/row_parallel.h"

namespace ls {

GluMlp::GluMlp(WeightBinder& b, const std::string& prefix, const GluNames& names, int64_t width, int64_t in,
               int64_t out, GluAct act, const TensorParallel& tp)
    : gate_(b.GetPart(prefix + names.gate + ".weight", width, in, Split::kRows, tp.size, tp.rank)),
      up_(b.GetPart(prefix + names.up + ".weight", width, in, Split::kRows, tp.size, tp.rank)),
      down_(b.GetPart(prefix + names.down + ".weight", out, width, Split::kCols, tp.size, tp.rank)),
      width_(width / tp.size),
      act_(act),
      tensor_parallel_(tp.on()) {}

void GluMlp::Forward(StepContext& ctx, int32_t /*layer*/, const float* h, float* x) {
  PartTimer t(ctx.profile, StepPart::kSharedOrDense);
  AddRowParallel(ctx, Activation(ctx, h), ctx.num_tokens, down_, tensor_parallel_, x);
}

void GluMlp::Apply(StepContext& ctx, const float* h, float* out, bool accumulate) {
  ctx.backend->Gemm(Activation(ctx, h), ctx.num_tokens, down_, out, accumulate);
}

const float* GluMlp::Activation(StepContext& ctx, const float* h) {
  const int64_t T = ctx.num_tokens;
  float* g = ctx.buf->gate.as<float>(T * width_);
  float* u = ctx.buf->up.as<float>(T * width_);
  float* a = ctx.buf->act.as<float>(T * width_);
  const GemmOutput gate_up[] = {{&gate_, g}, {&up_, u}};
  ctx.backend->GemmMany(h, T, gate_up, 2);
  ctx.backend->GluActivation(g, u, T, width_, act_, a);
  return a;
}

void GluMlp::ForEachWeight(const WeightFn& fn) {
  fn(gate_, WeightUse::kMatmul);
  fn(up_, WeightUse::kMatmul);
  fn(down_, WeightUse::kMatmul);
}

}  // namespace ls
