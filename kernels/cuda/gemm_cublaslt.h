// CublasLtGemm: the CUDA backend's dense GEMM, y[M, N] (+)= x[M, K] · w[N, K]ᵀ with BF16 operands
// (float32 x is converted to BF16 first), FP32 accumulation and FP32 output, through cuBLASLt; or,
// for FP8 block-scaled weights (fp8_blocks.h), with e4m3 operands on the FP8 tensor cores.
// Owns the cuBLASLt handle, its workspace, the BF16 or FP8 copy of x and a cache of plans
// (descriptors and the heuristic's algorithm) by kind, shape and alignment. Not thread-safe; one
// per backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/tensor.h"

typedef struct CUstream_st* cudaStream_t;

namespace ls::cuda {

class CublasLtGemm {
 public:
  // nullptr with *error set when cuBLASLt cannot be initialised on the current device.
  static std::unique_ptr<CublasLtGemm> Create(std::string* error);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // x: float32 [M, w.cols]; w: BF16 row-major [N, K]; y: float32 [M, N]; device memory.
  void Run(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate, cudaStream_t stream);
  // As Run, with x already BF16 (raw bits) [M, w.cols].
  void RunBf16(const uint16_t* x, int64_t M, const Tensor& w, float* y, bool accumulate, cudaStream_t stream);
  // As Run for an FP8 block-scaled weight prepared as fp8_blocks.h lays it out (e4m3 codes [N, K],
  // the float32 block scales in cuBLASLt's layout at w.quant.scale): x is rounded to e4m3 per row
  // and 128-column block first.
  void RunFp8(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate, cudaStream_t stream);
  // Whether this device and cuBLASLt run FP8 block-scaled GEMMs (asked of the heuristic once).
  bool SupportsFp8Blocks();

 private:
  struct Impl;
  explicit CublasLtGemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ls::cuda
