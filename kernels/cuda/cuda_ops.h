// The CUDA backend's ops, twins of the kernels/cpu ops (same parameter meaning, device pointers).
// This header is plain C++ so host code and tests compile without nvcc.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

typedef struct CUstream_st* cudaStream_t;

namespace ls::cuda {

// Number of CUDA devices usable by this process (0 when there is no driver or device).
int DeviceCount();

// out[r] = x[r] / sqrt(mean(x[r]²) + eps) · w, rows of width w.cols; w may be F32/BF16/F16.
// x, out: device float32 [rows, w.cols]; w.data: device memory.
void RmsNorm(const float* x, int64_t rows, const Tensor& w, float eps, float* out, cudaStream_t stream);

}  // namespace ls::cuda
