// CUDA combine of expert outputs: each token's weighted sum over its K expert rows, in k order
// (the un-permute of the MoE layer). Twin of cpu::CombineExpertOutputs.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 256;

// Grid: (T, column chunks of kThreads).
__global__ void CombineKernel(const float* __restrict__ y, const int32_t* __restrict__ rows,
                              const float* __restrict__ weights, int32_t K, int64_t width, float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= width) return;
  float acc = 0.f;
  for (int32_t k = 0; k < K; ++k) {
    const int64_t pair = t * K + k;
    const int64_t row = rows ? rows[pair] : pair;
    acc = fmaf(weights[pair], y[row * width + c], acc);
  }
  out[t * width + c] = acc;
}

}  // namespace

void CombineExpertOutputs(const float* y, const int32_t* rows, const float* weights, int64_t T, int32_t K,
                          int64_t width, float* out, cudaStream_t stream) {
  if (T == 0 || width == 0) return;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>((width + kThreads - 1) / kThreads));
  CombineKernel<<<grid, kThreads, 0, stream>>>(y, rows, weights, K, width, out);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda

// CudaBackend::CombineExpertOutputs: the op on the backend's stream.
namespace ls {

void CudaBackend::CombineExpertOutputs(const float* y, const float* weights, int64_t T, int32_t K, int64_t width,
                                       float* out) {
  Activate();
  cuda::CombineExpertOutputs(y, nullptr, weights, T, K, width, out, stream_);
}

}  // namespace ls
