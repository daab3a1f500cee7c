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
  // BF16; other weights, and kF32 (the default), keep float32 activations.
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

  void Embedding(const int32_t* ids, int64_t num_tokens, const Tensor& table, float* out) override;
  void RmsNorm(const float* x, int64_t rows, const Tensor& w, float eps, float* out) override;
  void BeginStep() override { pool_.Wake(); }
  void Gemm(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate) override;
  void GemmMany(const float* x, int64_t M, const GemmOutput* outs, int32_t n) override;
  void Rope(float* x, int64_t num_tokens, const int32_t* positions, const RopeParams& p) override;
  void AddBias(float* y, int64_t rows, const Tensor& bias) override;
  void MulSigmoid(float* x, int64_t rows, int64_t width, const float* gate, int64_t gate_width) override;
  bool SupportsKvCacheDType(DType dtype) const override { return dtype == DType::kF32 || dtype == DType::kBF16; }
  void PagedAttention(const AttentionParams& p) override;
  void PagedLatentAttention(const LatentAttentionParams& p) override;
  void StoreLatentRows(const LatentAttentionParams& p) override;
  void LoadLatentRows(const KvLayer& cache, int32_t width, const AttentionSeq& seq, int32_t first, int32_t count,
                      float* out) override;
  void ExpandedLatentAttention(const ExpandedLatentAttentionParams& p) override;
  void ShortConv(const ShortConvParams& p) override;
  void KdaAttention(const KdaParams& p) override;
  void HeadGemm(const float* x, RowStrides xs, int64_t num_tokens, int32_t heads, const Tensor* w, float* y,
                RowStrides ys) override;
  void GluActivation(const float* gate, const float* up, int64_t rows, int64_t width, GluAct act,
                     float* out) override;
  void Router(const RouterParams& p) override;
  void MoeExperts(const MoeParams& p) override;
  void CombineExpertOutputs(const float* y, const float* weights, int64_t T, int32_t K, int64_t width,
                            float* out) override;
  void Add(float* x, const float* y, int64_t n) override;
  void Copy(float* dst, const float* src, int64_t n) override;
  void SetZero(float* x, int64_t n) override;
  void AttnResMix(const AttnResParams& p) override;
  void GatherRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) override;
  void ScatterRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) override;
  // Copies alone; in a rank group, moves the rows over the group's transport (MPI all-to-all-v).
  void ExchangeRows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                    const std::vector<int64_t>& recv_rows, int64_t width) override;
  bool JoinRankGroup(RankTransport* group, std::string* error) override;

 private:
  ThreadPool pool_;
  DType activation_dtype_;
  RankTransport* group_ = nullptr;  // the rank group joined, or null (this process alone)
};

}  // namespace ls
