// Weight packing and the packed-GEMM dispatch (the kernel: packed_gemm_simd.cc).
#include "kernels/cpu/packed_gemm.h"

#include <cassert>
#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/int8_dot_gemm.h"
#include "kernels/cpu/quantized_gemm.h"
#include "kernels/cpu/simd/kernel_table.h"
#include "kernels/thread_pool.h"

namespace ls::cpu {
namespace {

constexpr int64_t P = kPanelRows;

// Position of panel row j within a packed k step.
inline int64_t PackedPosition(DType t, int64_t j) {
  if (t != DType::kBF16) return j;
  return j < P / 2 ? 2 * j : 2 * (j - P / 2) + 1;
}

}  // namespace

size_t PackedWeightBytes(const Tensor& w) {
  if (UsesInt8Dot(w)) return Int8DotPackedBytes(w);
  if (w.quantized()) return QuantizedPackedBytes(w);
  Tensor packed = w;
  packed.layout = Layout::kPanels;
  return packed.bytes();
}

Tensor PackWeight(const Tensor& w, void* dst, ThreadPool* pool) {
  assert(w.layout == Layout::kRowMajor);
  if (UsesInt8Dot(w)) return PackInt8DotWeight(w, dst, pool);
  if (w.quantized()) return PackQuantizedWeight(w, dst);
  Tensor out = w;
  out.data = dst;
  out.layout = Layout::kPanels;
  const size_t es = DTypeSize(w.dtype);
  const int64_t K = w.cols, panels = out.stored_rows() / P;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(w.data);
  std::memset(d, 0, out.bytes());
  auto pack = [&](auto* dst, const auto* src) {
    ThreadPool::ParallelFor(pool, panels, [&](int64_t p) {
      for (int64_t j = 0; j < P && p * P + j < w.rows; ++j) {
        const int64_t row = p * P + j, pos = PackedPosition(w.dtype, j);
        for (int64_t k = 0; k < K; ++k) dst[(p * K + k) * P + pos] = src[row * K + k];
      }
    });
  };
  if (es == 4) {
    pack(reinterpret_cast<uint32_t*>(d), reinterpret_cast<const uint32_t*>(s));
  } else {
    pack(reinterpret_cast<uint16_t*>(d), reinterpret_cast<const uint16_t*>(s));
  }
  return out;
}

void PackedGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin,
                     int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  if (w.quantized()) return QuantizedGemmRange(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
  ActiveKernels().PackedGemmRange(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
}

}  // namespace ls::cpu
