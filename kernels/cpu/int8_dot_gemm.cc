// Int8-activation GEMM: packing, activation rounding and dispatch (the kernels:
// int8_rows_simd.cc and int8_dot_gemm_simd.cc).
#include "kernels/cpu/int8_dot_gemm.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/simd/kernel_table.h"
#include "kernels/dtype.h"
#include "kernels/quantized_weight.h"
#include "kernels/thread_pool.h"

namespace ls::cpu {
namespace {

constexpr int64_t P = kPanelRows;

Tensor PackedView(const Tensor& w, void* dst) {
  Tensor out = w;
  out.layout = Layout::kPanelsInt8Dot;
  out.data = dst;
  out.quant.block_rows = 1;
  out.quant.scale_dtype = w.dtype == DType::kU4 && w.quant.scale_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  out.quant.scale = static_cast<unsigned char*>(dst) + Align64(out.bytes());
  // U4 zero points after the scales, on the packed scales' grid.
  out.quant.zero =
      w.quant.zero ? static_cast<const unsigned char*>(out.quant.scale) + Align64(out.scale_bytes()) : nullptr;
  return out;
}

// Byte offset of row j's code k within a packed panel (and, for 4-bit codes, whether it is the high
// nibble).
int64_t CodeOffset(DType t, int64_t panel, int64_t kq, int64_t j, int64_t k, bool* high) {
  const int64_t q = k / 4, i = k % 4;
  if (t == DType::kI8) return (panel * kq + q) * 128 + (j / 16) * 64 + (j % 16) * 4 + i;
  *high = j >= 16;
  return (panel * kq + q) * 64 + (j % 16) * 4 + i;
}

}  // namespace

bool UsesInt8Dot(const Tensor& w) { return w.quant.int8_activations && Int8DotReadsCodes(w); }

bool Int8DotReadsCodes(const Tensor& w) {
  if (!w.quantized() || w.layout != Layout::kRowMajor) return false;
  if (w.dtype == DType::kI8)
    return !w.quant.zero && w.quant.block_rows == 1 && w.scale_cols() == 1 && w.quant.scale_dtype == DType::kF32;
  return w.dtype == DType::kU4 && w.quant.block_rows == 1 && w.quant.block_cols % 4 == 0 &&
         (w.quant.scale_dtype == DType::kF32 || w.quant.scale_dtype == DType::kBF16 ||
          w.quant.scale_dtype == DType::kF16);
}

size_t Int8DotPackedBytes(const Tensor& w) {
  const Tensor v = PackedView(w, nullptr);
  return Align64(v.bytes()) + Align64(v.scale_bytes()) + v.zero_bytes();
}

Tensor PackInt8DotWeight(const Tensor& w, void* dst, ThreadPool* pool) {
  assert(UsesInt8Dot(w));
  Tensor out = PackedView(w, dst);
  std::memset(dst, 0, Int8DotPackedBytes(w));
  const int64_t K = w.cols, kq = out.stored_cols() / 4, G = out.scale_cols(), panels = out.stored_rows() / P;
  auto* codes = static_cast<uint8_t*>(dst);
  auto* scales = static_cast<uint8_t*>(const_cast<void*>(out.quant.scale));
  auto* sums = reinterpret_cast<int32_t*>(scales + DTypeBytes(out.quant.scale_dtype, out.stored_rows() * G));
  auto* zeros = static_cast<uint8_t*>(const_cast<void*>(out.quant.zero));
  ThreadPool::ParallelFor(pool, panels, [&](int64_t p) {
    for (int64_t j = 0; j < P && p * P + j < w.rows; ++j) {
      const int64_t row = p * P + j;
      int32_t sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        bool high = false;
        const int64_t at = CodeOffset(w.dtype, p, kq, j, k, &high);
        if (w.dtype == DType::kI8) {
          codes[at] = static_cast<const uint8_t*>(w.data)[row * K + k];
          sum += static_cast<int8_t>(codes[at]);
        } else {
          codes[at] |= high ? LoadNibble(w.data, row * K + k) << 4 : LoadNibble(w.data, row * K + k);
        }
      }
      if (w.dtype == DType::kI8) sums[row] = sum;
      for (int64_t g = 0; g < G; ++g) {
        const int64_t at = (p * G + g) * P + j;
        if (out.quant.scale_dtype == DType::kF32) {
          const float s = BlockScale(w, row, g);
          std::memcpy(scales + 4 * at, &s, 4);
        } else {
          std::memcpy(scales + 2 * at, static_cast<const uint8_t*>(w.quant.scale) + 2 * (row * G + g), 2);
        }
        if (zeros) zeros[at] = static_cast<uint8_t>(ZeroPoint(w, row, g));
      }
    }
  });
  return out;
}

namespace internal {

Int8Rows QuantizeRows(const float* x, int64_t ldx, int64_t M, int64_t K, int64_t group, Int8RowsStorage* st) {
  const KernelTable& k = ActiveKernels();
  Int8Rows r;
  r.rows = M;
  r.kp = (K + 3) / 4 * 4;
  r.group = group;
  r.groups = group > 0 ? (K + group - 1) / group : 0;
  st->q.assign(static_cast<size_t>(M * r.kp), 0);
  st->u.assign(static_cast<size_t>(M * r.kp), 128);
  st->scale.resize(static_cast<size_t>(M));
  st->sums.assign(static_cast<size_t>(M * r.groups), 0);
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    const float amax = k.RowAbsMax(xr, K);
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    st->scale[m] = amax / 127.f;
    int8_t* q = st->q.data() + m * r.kp;
    uint8_t* u = st->u.data() + m * r.kp;
    int32_t* sums = st->sums.data() + m * r.groups;
    if (group % 16 == 0) {  // group sums of whole vectors (or none)
      k.RoundRowInt8(xr, K, inv, group, q, u, sums);
      continue;
    }
    for (int64_t i = 0; i < K; ++i) {
      // A NaN (or an infinite row's 0 · inf) becomes -127, as the vector rounding makes it.
      const float v = std::min(127.f, std::max(-127.f, RoundToEven(xr[i] * inv)));
      q[i] = static_cast<int8_t>(v);
      u[i] = static_cast<uint8_t>(q[i] + 128);
      sums[i / group] += q[i];
    }
  }
  r.q = st->q.data();
  r.u = st->u.data();
  r.scale = st->scale.data();
  r.sums = st->sums.data();
  return r;
}

}  // namespace internal

Int8Rows QuantizeRows(const float* x, int64_t ldx, int64_t M, const Tensor& w, Int8RowsStorage* storage) {
  return internal::QuantizeRows(x, ldx, M, w.cols, internal::RowGroup(w), storage);
}

void Int8DotGemmRange(const Int8Rows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                      bool accumulate) {
  ActiveKernels().Int8DotRange(x, w, n_begin, n_end, y, ldy, accumulate);
}

void Int8DotGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end, float* y,
                      int64_t ldy, bool accumulate) {
  thread_local Int8RowsStorage storage;
  Int8DotGemmRange(QuantizeRows(x, ldx, M, w, &storage), w, n_begin, n_end, y, ldy, accumulate);
}

}  // namespace ls::cpu
