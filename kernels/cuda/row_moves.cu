// Row gathers and scatters on the GPU, the dispatch and combine moves of expert parallelism:
// one block per row, threads striding over its floats.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/host_uploader.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void GatherRowsKernel(const float* __restrict__ src, const int64_t* __restrict__ rows, int64_t width,
                                 float* __restrict__ dst) {
  const float* from = src + rows[blockIdx.x] * width;
  float* to = dst + static_cast<int64_t>(blockIdx.x) * width;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) to[i] = from[i];
}

__global__ void ScatterRowsKernel(const float* __restrict__ src, const int64_t* __restrict__ rows, int64_t width,
                                  float* __restrict__ dst) {
  const float* from = src + static_cast<int64_t>(blockIdx.x) * width;
  float* to = dst + rows[blockIdx.x] * width;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) to[i] = from[i];
}

}  // namespace

static void GatherRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst,
                       cudaStream_t stream) {
  for (int64_t first = 0; first < n; first += 65535) {  // grid x limit per launch in this layout
    const int64_t count = std::min<int64_t>(65535, n - first);
    GatherRowsKernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(src, rows + first, width,
                                                                              dst + first * width);
    LS_CUDA_CHECK_LAUNCH();
  }
}

static void ScatterRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst,
                        cudaStream_t stream) {
  for (int64_t first = 0; first < n; first += 65535) {
    const int64_t count = std::min<int64_t>(65535, n - first);
    ScatterRowsKernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(src + first * width, rows + first,
                                                                               width, dst);
    LS_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace ls::cuda

// CudaBackend::GatherRows, ScatterRows: the op on the backend's stream.
namespace ls {

void CudaBackend::GatherRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  if (n == 0) return;
  Activate();
  cuda::GatherRows(src, uploader_->Upload(rows, static_cast<size_t>(n)), n, width, dst, stream_);
}

void CudaBackend::ScatterRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  if (n == 0) return;
  Activate();
  cuda::ScatterRows(src, uploader_->Upload(rows, static_cast<size_t>(n)), n, width, dst, stream_);
}

}  // namespace ls
