// CPU row moves of expert-parallel dispatch and combine: gathers and scatters of whole rows.
#include <cstring>

#include "kernels/cpu/cpu_ops.h"

namespace ls::cpu {

void GatherRows(ThreadPool&, const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * width, src + rows[i] * width, width * sizeof(float));
}
void ScatterRows(ThreadPool&, const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + rows[i] * width, src + i * width, width * sizeof(float));
}

}  // namespace ls::cpu
