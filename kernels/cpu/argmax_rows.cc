// CPU ArgmaxRows: greedy decoding's reduction of logits rows, row by row over the pool, with the
// sampler's own row functions (base/logits_row.h).
#include <limits>

#include "base/logits_row.h"
#include "kernels/cpu/cpu_ops.h"

namespace ls::cpu {

void ArgmaxRows(ThreadPool& pool, const float* x, int64_t rows, int64_t cols, int32_t* ids, float* logprob) {
  pool.ParallelFor(rows, [&](int64_t r) {
    const float* row = x + r * cols;
    ids[r] = ArgmaxRow(row, cols);
    if (logprob)
      logprob[r] = ids[r] < 0 ? std::numeric_limits<float>::quiet_NaN() : row[ids[r]] - LogSumExpRow(row, cols);
  });
}

}  // namespace ls::cpu
