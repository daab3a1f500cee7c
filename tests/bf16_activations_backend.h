// Bf16ActivationsBackend: the CPU backend with the CUDA backend's rounding. The CUDA backend
// reads every GEMM weight as BF16 (quantized routed experts widened to exactly the BF16 of their
// load-time dequantization) and rounds a GEMM's (or the routed experts') float32 input to
// BF16 before multiplying; this wrapper does the same around a CpuBackend, so that a model on it
// follows the GPU's numerics while every op is still the CPU reference. Tests compare the GPU
// with it at a tolerance fit for accumulation order alone, where a comparison with the plain CPU
// backend would also see rounding's effects amplified (a router choice or a sharp attention
// softmax flipping).
#pragma once

#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/dtype.h"
#include "kernels/quantized_weight.h"

namespace ls::testing {

class Bf16ActivationsBackend final : public Backend {
 public:
  explicit Bf16ActivationsBackend(int num_threads = 2) : cpu_(num_threads) {}

  std::string_view name() const override { return "cpu-bf16-activations"; }
  void* Allocate(size_t bytes) override { return cpu_.Allocate(bytes); }
  void Free(void* p) override { cpu_.Free(p); }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override { cpu_.CopyToDevice(dst, src, bytes); }
  void CopyToHost(void* dst, const void* src, size_t bytes) override { cpu_.CopyToHost(dst, src, bytes); }

  // GEMM weights as the CUDA backend keeps them: BF16, quantized ones dequantized first.
  size_t PreparedWeightBytes(const Tensor& w, WeightUse use) const override {
    if (!IsMatmul(use)) return cpu_.PreparedWeightBytes(w, use);
    return cpu_.PreparedWeightBytes(Tensor{w.data, DType::kBF16, w.rows, w.cols}, use);
  }
  Tensor PrepareWeight(const Tensor& w, WeightUse use, void* dst) override {
    if (!IsMatmul(use) || (w.dtype == DType::kBF16 && !w.quantized())) return cpu_.PrepareWeight(w, use, dst);
    std::vector<uint16_t> bf16(static_cast<size_t>(w.numel()));
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
      DequantizeRow(w, r, row.data());
      for (int64_t c = 0; c < w.cols; ++c) bf16[static_cast<size_t>(r * w.cols + c)] = F32ToBf16(row[c]);
    }
    return cpu_.PrepareWeight(Tensor{bf16.data(), DType::kBF16, w.rows, w.cols}, use, dst);
  }

  void Embedding(const int32_t* ids, int64_t num_tokens, const Tensor& table, float* out) override {
    cpu_.Embedding(ids, num_tokens, table, out);
  }
  void RmsNorm(const float* x, int64_t rows, const Tensor& w, float eps, float* out) override {
    cpu_.RmsNorm(x, rows, w, eps, out);
  }
  void Gemm(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate) override {
    cpu_.Gemm(Rounded(x, M * w.cols), M, w, y, accumulate);
  }
  void Rope(float* x, int64_t num_tokens, const int32_t* positions, const RopeParams& p) override {
    cpu_.Rope(x, num_tokens, positions, p);
  }
  void AddBias(float* y, int64_t rows, const Tensor& bias) override { cpu_.AddBias(y, rows, bias); }
  void MulSigmoid(float* x, int64_t rows, int64_t width, const float* gate, int64_t gate_width) override {
    cpu_.MulSigmoid(x, rows, width, gate, gate_width);
  }
  bool SupportsKvCacheDType(DType dtype) const override { return cpu_.SupportsKvCacheDType(dtype); }
  void PagedAttention(const AttentionParams& p) override { cpu_.PagedAttention(p); }
  void PagedLatentAttention(const LatentAttentionParams& p) override { cpu_.PagedLatentAttention(p); }
  void StoreLatentRows(const LatentAttentionParams& p) override { cpu_.StoreLatentRows(p); }
  void LoadLatentRows(const KvLayer& cache, int32_t width, const AttentionSeq& seq, int32_t first, int32_t count,
                      float* out) override {
    cpu_.LoadLatentRows(cache, width, seq, first, count, out);
  }
  void ExpandedLatentAttention(const ExpandedLatentAttentionParams& p) override { cpu_.ExpandedLatentAttention(p); }
  void ShortConv(const ShortConvParams& p) override { cpu_.ShortConv(p); }
  void KdaAttention(const KdaParams& p) override { cpu_.KdaAttention(p); }
  void HeadGemm(const float* x, RowStrides xs, int64_t num_tokens, int32_t heads, const Tensor* w, float* y,
                RowStrides ys) override {
    // The GPU rounds GEMM inputs to BF16: the span of x the heads read.
    const int64_t span = (num_tokens - 1) * xs.token + (heads - 1) * xs.head + w[0].cols;
    cpu_.HeadGemm(Rounded(x, span), xs, num_tokens, heads, w, y, ys);
  }
  void GluActivation(const float* gate, const float* up, int64_t rows, int64_t width, GluAct act,
                     float* out) override {
    cpu_.GluActivation(gate, up, rows, width, act, out);
  }
  void Router(const RouterParams& p) override { cpu_.Router(p); }
  void MoeExperts(const MoeParams& p) override {
    MoeParams q = p;
    q.z = Rounded(p.z, p.num_tokens * p.in_width);
    cpu_.MoeExperts(q);
  }
  void CombineExpertOutputs(const float* y, const float* weights, int64_t T, int32_t K, int64_t width,
                            float* out) override {
    cpu_.CombineExpertOutputs(y, weights, T, K, width, out);
  }
  void Add(float* x, const float* y, int64_t n) override { cpu_.Add(x, y, n); }
  void Copy(float* dst, const float* src, int64_t n) override { cpu_.Copy(dst, src, n); }
  void SetZero(float* x, int64_t n) override { cpu_.SetZero(x, n); }
  void AttnResMix(const AttnResParams& p) override { cpu_.AttnResMix(p); }
  void GatherRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) override {
    cpu_.GatherRows(src, rows, n, width, dst);
  }
  void ScatterRows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) override {
    cpu_.ScatterRows(src, rows, n, width, dst);
  }
  void ExchangeRows(const float* send, const std::vector<int64_t>& send_rows, float* recv,
                    const std::vector<int64_t>& recv_rows, int64_t width) override {
    cpu_.ExchangeRows(send, send_rows, recv, recv_rows, width);
  }
  bool JoinRankGroup(RankTransport* group, std::string* error) override { return cpu_.JoinRankGroup(group, error); }

 private:
  // x rounded to the nearest BF16 value, element by element, in a buffer of this backend.
  const float* Rounded(const float* x, int64_t n) {
    rounded_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) rounded_[static_cast<size_t>(i)] = Bf16ToF32(F32ToBf16(x[i]));
    return rounded_.data();
  }

  CpuBackend cpu_;
  std::vector<float> rounded_;
};

}  // namespace ls::testing
