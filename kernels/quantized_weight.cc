// Quantized weight formats on the host: element values and online quantization.
#include "kernels/quantized_weight.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/dtype.h"
#include "kernels/thread_pool.h"

namespace ls {

float CodeValue(DType codes, const void* data, int64_t i) { return LoadAsF32(data, codes, i); }

int32_t ZeroPoint(const Tensor& w, int64_t br, int64_t bc) {
  if (w.quant.zero) return static_cast<const uint8_t*>(w.quant.zero)[br * w.scale_cols() + bc];
  return w.dtype == DType::kU4 ? 8 : 0;
}

float BlockScale(const Tensor& w, int64_t br, int64_t bc) {
  return LoadAsF32(w.quant.scale, w.quant.scale_dtype, br * w.scale_cols() + bc);
}

float WeightValue(const Tensor& w, int64_t n, int64_t k) {
  assert(w.layout == Layout::kRowMajor);
  const int64_t i = n * w.cols + k;
  if (!w.quantized()) return LoadAsF32(w.data, w.dtype, i);
  const int64_t br = n / w.quant.block_rows, bc = k / w.quant.block_cols;
  float code = CodeValue(w.dtype, w.data, i);
  if (w.dtype == DType::kU4 || w.dtype == DType::kU8 || w.dtype == DType::kI8)
    code = static_cast<float>(static_cast<int32_t>(code) - ZeroPoint(w, br, bc));
  return code * BlockScale(w, br, bc);
}

void DequantizeRow(const Tensor& w, int64_t n, float* out) {
  for (int64_t k = 0; k < w.cols; ++k) out[k] = WeightValue(w, n, k);
}

uint8_t F32ToF8E4M3(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const auto sign = static_cast<uint8_t>(bits >> 24 & 0x80);
  const uint32_t mag = bits & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0x7f;          // NaN
  if (mag >= 0x43e00000u) return sign | 0x7e;  // |f| >= 448 (and infinity) saturates
  // |f| < 2^-6, subnormal: multiples of 2^-9 (8 · 2^-9 is code 0x08, the smallest normal).
  if (mag < 0x3c800000u) {
    float a;
    std::memcpy(&a, &mag, 4);
    return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
  }
  // A normal value: the float's exponent and top three mantissa bits, rounded half to even at
  // bit 20 (a carry moves into the exponent), rebased from bias 127 to bias 7. Below 448 the
  // rounding reaches 0x7e (448) at most, never 0x7f (NaN).
  const uint32_t rounded = mag + 0x7ffffu + (mag >> 20 & 1);
  return sign | static_cast<uint8_t>((rounded >> 20) - ((127 - 7) << 3));
}

namespace {

constexpr int32_t kFp8Block = 128;
constexpr int32_t kInt4Group = 32;
constexpr uint8_t kPlaceholder = 0;  // what QuantizedLayout's views point at

}  // namespace

Tensor QuantizedLayout(const Tensor& w, QuantScheme scheme) {
  if (!Quantizable(w, scheme)) return w;
  if (scheme == QuantScheme::kInt8A8 || scheme == QuantScheme::kInt4A8) {
    Tensor q = QuantizedLayout(w, scheme == QuantScheme::kInt8A8 ? QuantScheme::kInt8 : QuantScheme::kInt4);
    q.quant.int8_activations = true;
    return q;
  }
  Tensor q{&kPlaceholder, w.dtype, w.rows, w.cols};
  q.quant.scale = &kPlaceholder;
  switch (scheme) {
    case QuantScheme::kNone:
    case QuantScheme::kInt8A8:
    case QuantScheme::kInt4A8:
      return w;
    case QuantScheme::kInt8:
      q.dtype = DType::kI8;
      q.quant = QuantScales{&kPlaceholder, nullptr, DType::kF32, 1, static_cast<int32_t>(std::max<int64_t>(1, w.cols))};
      break;
    case QuantScheme::kFp8:
      q.dtype = DType::kF8E4M3;
      q.quant = QuantScales{&kPlaceholder, nullptr, DType::kF32, kFp8Block, kFp8Block};
      break;
    case QuantScheme::kInt4:
      q.dtype = DType::kU4;
      q.quant = QuantScales{&kPlaceholder, nullptr, DType::kBF16, 1, kInt4Group};
      break;
  }
  return q;
}

bool Quantizable(const Tensor& w, QuantScheme scheme) {
  return scheme != QuantScheme::kNone && w.layout == Layout::kRowMajor && !w.quantized() && IsFloatDType(w.dtype) &&
         w.rows > 0 && w.cols > 0 &&
         ((scheme != QuantScheme::kInt4 && scheme != QuantScheme::kInt4A8) || w.cols % 2 == 0);
}

namespace {

// Quantizes grid row g of `w` (rows [g · br, (g + 1) · br)) into q's codes and scales: each grid row
// owns its scales and its rows' code bytes (int4 rows hold an even number of codes), so grid rows
// may be quantized side by side.
void QuantizeGridRow(const Tensor& w, QuantScheme scheme, const Tensor& q, int64_t g) {
  const int64_t N = w.rows, K = w.cols, br = q.quant.block_rows, bc = q.quant.block_cols;
  const int64_t grid_cols = (K + bc - 1) / bc, n0 = g * br, n1 = std::min(N, n0 + br);
  auto* codes = static_cast<uint8_t*>(const_cast<void*>(q.data));
  auto* scales = static_cast<uint8_t*>(const_cast<void*>(q.quant.scale));
  // Plain pointers to the scratch: the code stores (bytes) may alias anything, and the thread_local
  // vectors would be looked up again after each one.
  thread_local std::vector<float> row_buf, amax_buf, scale_buf;
  row_buf.resize(static_cast<size_t>(K));
  amax_buf.assign(static_cast<size_t>(grid_cols), 0.f);
  scale_buf.resize(static_cast<size_t>(grid_cols));
  float *row = row_buf.data(), *amax = amax_buf.data(), *scale = scale_buf.data();
  const auto load_row = [&](int64_t n) {
    for (int64_t k = 0; k < K; ++k) row[k] = LoadAsF32(w.data, w.dtype, n * K + k);
  };
  // The largest magnitude of each block (block by block: no division per element).
  for (int64_t n = n0; n < n1; ++n) {
    load_row(n);
    for (int64_t j = 0; j < grid_cols; ++j) {
      float a = amax[j];
      for (int64_t k = j * bc; k < std::min(K, (j + 1) * bc); ++k) a = std::max(a, std::fabs(row[k]));
      amax[j] = a;
    }
  }
  for (int64_t j = 0; j < grid_cols; ++j) {
    float s = 1.f;
    switch (scheme) {
      case QuantScheme::kInt8:
        s = amax[j] / 127.f;
        break;
      case QuantScheme::kFp8:
        s = amax[j] / 448.f;
        break;
      case QuantScheme::kInt4:
        s = Bf16ToF32(F32ToBf16(amax[j] / 7.5f));
        break;
      default:
        break;
    }
    if (!(s > 0.f) || !std::isfinite(s)) s = 1.f;
    scale[j] = s;
    const int64_t at = g * grid_cols + j;
    if (q.quant.scale_dtype == DType::kBF16) {
      const uint16_t h = F32ToBf16(s);
      std::memcpy(scales + 2 * at, &h, 2);
    } else {
      std::memcpy(scales + 4 * at, &s, 4);
    }
  }
  for (int64_t n = n0; n < n1; ++n) {
    if (n1 - n0 > 1) load_row(n);  // a grid row of one row (int8, int4) is in the buffer already
    for (int64_t j = 0; j < grid_cols; ++j) {
      const float s = scale[j];
      const int64_t k0 = j * bc, k1 = std::min(K, (j + 1) * bc);
      switch (scheme) {
        case QuantScheme::kInt8:
          for (int64_t k = k0; k < k1; ++k)
            codes[n * K + k] =
                static_cast<uint8_t>(static_cast<int8_t>(std::clamp(RoundToEven(row[k] / s), -127.f, 127.f)));
          break;
        case QuantScheme::kFp8:
          for (int64_t k = k0; k < k1; ++k) codes[n * K + k] = F32ToF8E4M3(row[k] / s);
          break;
        case QuantScheme::kInt4:  // groups of an even size, rows of an even length: whole bytes
          for (int64_t k = k0; k < k1; k += 2) {
            const auto code = [&](int64_t c) {
              return static_cast<uint8_t>(std::clamp(RoundToEven(row[c] / s), -8.f, 7.f) + 8.f);
            };
            codes[(n * K + k) >> 1] = static_cast<uint8_t>(code(k) | code(k + 1) << 4);
          }
          break;
        default:
          break;
      }
    }
  }
}

}  // namespace

Tensor Quantize(const Tensor& w, QuantScheme scheme, QuantizedStorage* storage, ThreadPool* pool) {
  if (!Quantizable(w, scheme)) return w;
  if (scheme == QuantScheme::kInt8A8 || scheme == QuantScheme::kInt4A8) {
    Tensor q = Quantize(w, scheme == QuantScheme::kInt8A8 ? QuantScheme::kInt8 : QuantScheme::kInt4, storage, pool);
    q.quant.int8_activations = true;
    return q;
  }
  Tensor q = QuantizedLayout(w, scheme);
  const int64_t N = w.rows, K = w.cols, br = q.quant.block_rows, bc = q.quant.block_cols;
  const int64_t grid_rows = (N + br - 1) / br, grid_cols = (K + bc - 1) / bc;
  storage->codes.assign(DTypeBytes(q.dtype, N * K), 0);
  storage->scales.assign(DTypeBytes(q.quant.scale_dtype, grid_rows * grid_cols), 0);
  q.data = storage->codes.data();
  q.quant.scale = storage->scales.data();
  ThreadPool::ParallelFor(pool, grid_rows, [&](int64_t g) { QuantizeGridRow(w, scheme, q, g); });
  return q;
}

}  // namespace ls
