// CPU GLU gate functions: SiTU(x) = sigmoid(x)·tanh(x) (bounded, signed), its general form
// β·tanh(g/β)·σ(g)·γ·tanh(u/γ), and SiLU(x) = x·sigmoid(x).
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vector_math.h"

namespace ls::cpu {

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
float SiTU(float x) { return Sigmoid(x) * std::tanh(x); }
float SiLU(float x) { return x * Sigmoid(x); }
float SiTU(float g, float u, float beta, float linear_beta) {
  const float up = linear_beta > 0.f ? linear_beta * std::tanh(u / linear_beta) : u;
  return beta * std::tanh(g / beta) * Sigmoid(g) * up;
}

void GluActivation(ThreadPool& pool, const float* gate, const float* up, int64_t rows, int64_t width,
                   GluAct act, float* out) {
  // About a nanosecond per value (an exponential each): tasks of at least 8K values.
  pool.ParallelForRanges(rows, width, 8192, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) GluRow(act, gate + r * width, up + r * width, out + r * width, width);
  });
}

}  // namespace ls::cpu
