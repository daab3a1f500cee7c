// CUDA GLU activation: out = act(gate) · up elementwise, act SiTU or SiLU. Twin of
// kernels/cpu/activation.cc.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"

namespace ls::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void GluKernel(const float* __restrict__ gate, const float* __restrict__ up, int64_t n, GluAct act,
                          float* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    out[i] = GluValue(act, gate[i], up[i]);
  }
}

}  // namespace

void GluActivation(const float* gate, const float* up, int64_t rows, int64_t width, GluAct act, float* out,
                   cudaStream_t stream) {
  const int64_t n = rows * width;
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65536);
  GluKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(gate, up, n, act, out);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda

// CudaBackend::GluActivation: the op on the backend's stream.
namespace ls {

void CudaBackend::GluActivation(const float* gate, const float* up, int64_t rows, int64_t width, GluAct act,
                                float* out) {
  Activate();
  cuda::GluActivation(gate, up, rows, width, act, out, stream_);
}

}  // namespace ls
