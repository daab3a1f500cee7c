// BF16-activation GEMM: packing, activation rounding, dispatch and the portable kernel (the
// instruction's arithmetic, the reference for the AVX512-BF16 one).
#include "kernels/cpu/bf16_dot_gemm.h"

#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/dtype.h"

namespace ls::cpu {
namespace {

constexpr int64_t P = kPanelRows;

Tensor PackedView(const Tensor& w, void* dst) {
  Tensor out = w;
  out.layout = Layout::kPanelsBf16Dot;
  out.data = dst;
  return out;
}

// Index of row j's value k within a packed weight of kp columns.
int64_t ValueIndex(int64_t panel, int64_t kp, int64_t j, int64_t k) {
  return (panel * (kp / 2) + k / 2) * (2 * P) + (j / 16) * 32 + (j % 16) * 2 + k % 2;
}

// The instruction reads subnormal inputs as zero and flushes subnormal sums to zero.
inline float Flushed(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.f, v) : v; }

const bool kUseAvx512 = internal::CpuHasAvx512Bf16();

}  // namespace

size_t Bf16DotPackedBytes(const Tensor& w) { return PackedView(w, nullptr).bytes(); }

Tensor PackBf16DotWeight(const Tensor& w, void* dst) {
  assert(w.dtype == DType::kBF16 && !w.quantized() && w.layout == Layout::kRowMajor);
  Tensor out = PackedView(w, dst);
  std::memset(dst, 0, out.bytes());
  const int64_t K = w.cols, kp = out.stored_cols();
  const auto* src = static_cast<const uint16_t*>(w.data);
  auto* d = static_cast<uint16_t*>(dst);
  for (int64_t row = 0; row < w.rows; ++row)
    for (int64_t k = 0; k < K; ++k) d[ValueIndex(row / P, kp, row % P, k)] = src[row * K + k];
  return out;
}

Bf16Rows RoundRowsToBf16(const float* x, int64_t ldx, int64_t M, int64_t K, std::vector<uint16_t>* storage) {
  Bf16Rows r{M, (K + 1) / 2 * 2, nullptr};
  storage->resize(static_cast<size_t>(M * r.kp));
  for (int64_t m = 0; m < M; ++m) {
    uint16_t* out = storage->data() + m * r.kp;
    for (int64_t k = 0; k < K; ++k) out[k] = F32ToBf16(x[m * ldx + k]);
    if (K < r.kp) out[K] = 0;
  }
  r.v = storage->data();
  return r;
}

bool Bf16DotUsesAvx512() { return kUseAvx512; }

namespace internal {

void Bf16DotRangeScalar(const Bf16Rows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                        bool accumulate) {
  assert(w.layout == Layout::kPanelsBf16Dot && n_begin % P == 0 && x.kp == w.stored_cols());
  const auto* wv = static_cast<const uint16_t*>(w.data);
  auto value = [](uint16_t h) { return Flushed(Bf16ToF32(h)); };
  for (int64_t n = n_begin; n < n_end; ++n) {
    const int64_t p = n / P, j = n % P;
    for (int64_t m = 0; m < x.rows; ++m) {
      const uint16_t* xr = x.v + m * x.kp;
      float acc = 0.f;
      for (int64_t k = 0; k < x.kp; k += 2) {
        const float odd = value(xr[k + 1]) * value(wv[ValueIndex(p, x.kp, j, k + 1)]);
        const float even = value(xr[k]) * value(wv[ValueIndex(p, x.kp, j, k)]);
        acc = Flushed(Flushed(acc + odd) + even);
      }
      float& o = y[m * ldy + (n - n_begin)];
      o = accumulate ? o + acc : acc;
    }
  }
}

}  // namespace internal

void Bf16DotGemmRange(const Bf16Rows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                      bool accumulate) {
  if (!internal::Bf16DotRangeAvx512(x, w, n_begin, n_end, y, ldy, accumulate))
    internal::Bf16DotRangeScalar(x, w, n_begin, n_end, y, ldy, accumulate);
}

}  // namespace ls::cpu
