// CUDA RMSNorm: one block per row, float32 sum of squares reduced with CUB, weights read in their
// stored dtype. Twin of kernels/cpu/rms_norm.cc.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace ls::cuda {
namespace {

constexpr int kThreads = 256;

// x and out may be the same rows (in place), so neither is __restrict__.
template <typename W>
__global__ void RmsNormKernel(const float* x, const W* __restrict__ w, int64_t width, float eps, float* out) {
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ float inv;
  const float* xr = x + blockIdx.x * width;
  float* o = out + blockIdx.x * width;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) ss += xr[i] * xr[i];
  const float total = Reduce(tmp).Sum(ss);
  if (threadIdx.x == 0) inv = rsqrtf(total / static_cast<float>(width) + eps);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < width; i += kThreads) o[i] = xr[i] * inv * ToF32(w[i]);
}

}  // namespace

void RmsNorm(const float* x, int64_t rows, const Tensor& w, float eps, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  const dim3 grid(static_cast<unsigned>(rows));
  switch (w.dtype) {
    case DType::kF32:
      RmsNormKernel<<<grid, kThreads, 0, stream>>>(x, static_cast<const float*>(w.data), w.cols, eps, out);
      break;
    case DType::kBF16:
      RmsNormKernel<<<grid, kThreads, 0, stream>>>(x, static_cast<const __nv_bfloat16*>(w.data), w.cols, eps, out);
      break;
    case DType::kF16:
      RmsNormKernel<<<grid, kThreads, 0, stream>>>(x, static_cast<const __half*>(w.data), w.cols, eps, out);
      break;
    default:
      LS_CUDA_REQUIRE(false, "RmsNorm: norm weights must be F32, BF16 or F16");
  }
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda

// CudaBackend::RmsNorm: the op on the backend's stream.
namespace ls {

void CudaBackend::RmsNorm(const float* x, int64_t rows, const Tensor& w, float eps, float* out) {
  Activate();
  cuda::RmsNorm(x, rows, w, eps, out, stream_);
}

}  // namespace ls
