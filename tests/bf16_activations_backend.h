// Bf16ActivationsBackend: the CPU backend with the CUDA backend's rounding. The CUDA backend
// reads every GEMM weight as BF16 (quantized routed experts widened to exactly the BF16 of their
// load-time dequantization) and rounds a GEMM's (or the routed experts') float32 input to
// BF16 before multiplying; this subclass of CpuBackend does the same, so that a model on it
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

enum class Bf16Rounding { kNearestEven, kTowardZero };

class Bf16ActivationsBackend final : public CpuBackend {
 public:
  explicit Bf16ActivationsBackend(int num_threads = 2, Bf16Rounding rounding = Bf16Rounding::kNearestEven)
      : CpuBackend(num_threads), rounding_(rounding) {}

  std::string_view name() const override { return "cpu-bf16-activations"; }

  // GEMM weights as the CUDA backend keeps them: BF16, quantized ones dequantized first.
  size_t PreparedWeightBytes(const Tensor& w, WeightUse use) const override {
    if (!IsMatmul(use)) return CpuBackend::PreparedWeightBytes(w, use);
    return CpuBackend::PreparedWeightBytes(Tensor{w.data, DType::kBF16, w.rows, w.cols}, use);
  }
  Tensor PrepareWeight(const Tensor& w, WeightUse use, void* dst) override {
    if (!IsMatmul(use) || (w.dtype == DType::kBF16 && !w.quantized())) return CpuBackend::PrepareWeight(w, use, dst);
    std::vector<uint16_t> bf16(static_cast<size_t>(w.numel()));
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = 0; r < w.rows; ++r) {
      DequantizeRow(w, r, row.data());
      for (int64_t c = 0; c < w.cols; ++c) bf16[static_cast<size_t>(r * w.cols + c)] = F32ToBf16(row[c]);
    }
    return CpuBackend::PrepareWeight(Tensor{bf16.data(), DType::kBF16, w.rows, w.cols}, use, dst);
  }

  // The ops that multiply by weights round their input first; every other op is the CPU's.
  void Gemm(const float* x, int64_t M, const Tensor& w, float* y, bool accumulate) override {
    CpuBackend::Gemm(Rounded(x, M * w.cols), M, w, y, accumulate);
  }
  void GemmMany(const float* x, int64_t M, const GemmOutput* outs, int32_t n) override {
    Backend::GemmMany(x, M, outs, n);  // one rounded Gemm per output
  }
  void HeadGemm(const float* x, RowStrides xs, int64_t num_tokens, int32_t heads, const Tensor* w, float* y,
                RowStrides ys) override {
    // The GPU rounds GEMM inputs to BF16: the span of x the heads read.
    const int64_t span = (num_tokens - 1) * xs.token + (heads - 1) * xs.head + w[0].cols;
    CpuBackend::HeadGemm(Rounded(x, span), xs, num_tokens, heads, w, y, ys);
  }
  void MoeExperts(const MoeParams& p) override {
    MoeParams q = p;
    q.z = Rounded(p.z, p.num_tokens * p.in_width);
    CpuBackend::MoeExperts(q);
  }

 private:
  // x rounded to BF16, element by element, in a buffer of this backend.
  const float* Rounded(const float* x, int64_t n) {
    rounded_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) rounded_[static_cast<size_t>(i)] = ToBf16(x[i]);
    return rounded_.data();
  }
  float ToBf16(float f) const {
    if (rounding_ == Bf16Rounding::kNearestEven) return Bf16ToF32(F32ToBf16(f));
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u &= 0xffff0000u;  // the low 16 bits of the mantissa dropped
    std::memcpy(&f, &u, 4);
    return f;
  }

  Bf16Rounding rounding_;
  std::vector<float> rounded_;
};

}  // namespace ls::testing
