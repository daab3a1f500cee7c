// CpuBackend: the Backend on host memory, running the kernels/cpu ops on its own thread pool.
// The embedded default and the numerical reference for other backends. (Benchmarks derive from
// it to swap one op for a baseline.)
#pragma once

#include <memory>

#include "kernels/backend.h"
#include "kernels/thread_pool.h"

namespace ls {

class CpuBackend : public Backend {
 public:
  // num_threads <= 0: one per hardware thread. activation_dtype kBF16: BF16 GEMM weights are packed
  // for the BF16-activation GEMM (kernels/cpu/bf16_dot_gemm.h), which rounds their input rows to
  // BF16. kI8: integer-quantized GEMM weights that the int8-activation GEMM reads (int8 with a scale
  // per row, int4 in groups: kernels/cpu/int8_dot_gemm.h) are packed for it, which rounds
  // their input rows to int8, one scale per row. Other weights, and kF32 (the default), keep
  // float32 activations.
  explicit CpuBackend(int num_threads = 0, DType activation_dtype = DType::kF32);

  std::string_view name() const override { return "cpu"; }
  ThreadPool& pool() { return pool_; }
  DType activation_dtype() const { return activation_dtype_; }

  void* Allocate(size_t bytes) override;
  void Free(void* p) override;
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  // GEMM weights are packed (kernels/cpu/packed_gemm.h); other weights are read in place.
  size_t PreparedWeightBytes(const Tensor& w, WeightUse use) const override;
  Tensor PrepareWeight(const Tensor& w, WeightUse use, void* dst) override;
  ThreadPool* HostThreads() override { return &pool_; }

  void BeginStep() override { pool_.Wake(); }
  bool SupportsKvCacheDType(DType dtype) const override { return dtype == DType::kF32 || dtype == DType::kBF16; }
  // The compute ops of kernels/ops.def, each the kernels/cpu function of its name.
#define LS_OP(name, params, args) void name params override;
#include "kernels/ops.def"
#undef LS_OP
  void GemmMany(const float* x, int64_t M, const GemmOutput* outs, int32_t n) override;
  // Copies alone; in a rank group, moves the rows over the group's transport (MPI all-to-all-v).
  void ExchangeRows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                    const std::vector<int64_t>& recv_rows, int64_t width) override;
  bool JoinRankGroup(RankTransport* group, std::string* error) override;
  // Over the tensor-parallel group's transport (MPI all-reduce and all-gather).
  bool JoinTensorGroup(RankTransport* group, std::string* error) override;
  void AllReduceSum(float* x, int64_t n) override;
  void AllGather(const float* send, int64_t n, float* recv) override;

 private:
  ThreadPool pool_;
  DType activation_dtype_;
  RankTransport* group_ = nullptr;  // the rank group joined, or null (this process alone)
  RankTransport* tensor_group_ = nullptr;  // the tensor-parallel group joined, or null
};

}  // namespace ls
