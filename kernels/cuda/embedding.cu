// CUDA embedding lookup: one block per token copies its table row, converted to float32.
// Twin of kernels/cpu/embedding.cc.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/host_uploader.h"

namespace ls::cuda {
namespace {

constexpr int kThreads = 256;

template <typename W>
__global__ void EmbeddingKernel(const int32_t* __restrict__ ids, const W* __restrict__ table, int64_t d,
                                float* __restrict__ out) {
  const W* row = table + static_cast<int64_t>(ids[blockIdx.x]) * d;
  float* o = out + static_cast<int64_t>(blockIdx.x) * d;
  for (int64_t i = threadIdx.x; i < d; i += kThreads) o[i] = ToF32(row[i]);
}

}  // namespace

static void Embedding(const int32_t* ids, int64_t num_tokens, const Tensor& table, float* out, cudaStream_t stream) {
  if (num_tokens == 0) return;
  const dim3 grid(static_cast<unsigned>(num_tokens));
  switch (table.dtype) {
    case DType::kF32:
      EmbeddingKernel<<<grid, kThreads, 0, stream>>>(ids, static_cast<const float*>(table.data), table.cols, out);
      break;
    case DType::kBF16:
      EmbeddingKernel<<<grid, kThreads, 0, stream>>>(ids, static_cast<const __nv_bfloat16*>(table.data), table.cols,
                                                     out);
      break;
    case DType::kF16:
      EmbeddingKernel<<<grid, kThreads, 0, stream>>>(ids, static_cast<const __half*>(table.data), table.cols, out);
      break;
    default:
      LS_CUDA_REQUIRE(false, "Embedding: the table must be F32, BF16 or F16");
  }
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace ls::cuda

// CudaBackend::Embedding: the op on the backend's stream.
namespace ls {

void CudaBackend::Embedding(const int32_t* ids, int64_t num_tokens, const Tensor& table, float* out) {
  if (num_tokens == 0) return;
  Activate();
  const int32_t* d_ids = uploader_->Upload(ids, static_cast<size_t>(num_tokens));
  cuda::Embedding(d_ids, num_tokens, table, out, stream_);
}

}  // namespace ls
