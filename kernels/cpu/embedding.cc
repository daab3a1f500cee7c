// CPU embedding lookup: rows of the table converted to float32.
#include "kernels/cpu/cpu_ops.h"

namespace ls::cpu {

void Embedding(ThreadPool& pool, const int32_t* ids, int64_t num_tokens, const Tensor& table, float* out) {
  const int64_t d = table.cols;
  pool.ParallelForRanges(num_tokens, d, 16384, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t base = static_cast<int64_t>(ids[t]) * d;
      for (int64_t i = 0; i < d; ++i) out[t * d + i] = LoadAsF32(table.data, table.dtype, base + i);
    }
  });
}

}  // namespace ls::cpu
