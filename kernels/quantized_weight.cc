// Quantized weight formats on the host: element values and online quantization.
#include "kernels/quantized_weight.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

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
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= 448.f) return sign | 0x7e;
  if (a < 0x1p-6f) {  // subnormal: multiples of 2^-9 (8 · 2^-9 is the smallest normal, code 0x08)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 0x1p9f));
  }
  int e;
  const float mant = std::frexp(a, &e) * 2.f;  // a = mant · 2^(e − 1), mant in [1, 2)
  int m = static_cast<int>(std::nearbyint((mant - 1.f) * 8.f));
  int biased = e - 1 + 7;
  if (m == 8) {
    m = 0;
    ++biased;
  }
  if (biased > 15 || (biased == 15 && m == 7)) return sign | 0x7e;
  return sign | static_cast<uint8_t>(biased << 3 | m);
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

Tensor Quantize(const Tensor& w, QuantScheme scheme, QuantizedStorage* storage) {
  if (!Quantizable(w, scheme)) return w;
  if (scheme == QuantScheme::kInt8A8 || scheme == QuantScheme::kInt4A8) {
    Tensor q = Quantize(w, scheme == QuantScheme::kInt8A8 ? QuantScheme::kInt8 : QuantScheme::kInt4, storage);
    q.quant.int8_activations = true;
    return q;
  }
  Tensor q = QuantizedLayout(w, scheme);
  const int64_t N = w.rows, K = w.cols, br = q.quant.block_rows, bc = q.quant.block_cols;
  const int64_t grid_rows = (N + br - 1) / br, grid_cols = (K + bc - 1) / bc;
  storage->codes.assign(DTypeBytes(q.dtype, N * K), 0);
  storage->scales.assign(DTypeBytes(q.quant.scale_dtype, grid_rows * grid_cols), 0);
  auto* codes = storage->codes.data();
  // The largest magnitude of each block.
  std::vector<float> amax(static_cast<size_t>(grid_rows * grid_cols), 0.f);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      float& a = amax[(n / br) * grid_cols + k / bc];
      a = std::max(a, std::fabs(LoadAsF32(w.data, w.dtype, n * K + k)));
    }
  }
  std::vector<float> scale(amax.size());
  for (size_t i = 0; i < amax.size(); ++i) {
    float s = 1.f;
    switch (scheme) {
      case QuantScheme::kInt8:
        s = amax[i] / 127.f;
        break;
      case QuantScheme::kFp8:
        s = amax[i] / 448.f;
        break;
      case QuantScheme::kInt4:
        s = Bf16ToF32(F32ToBf16(amax[i] / 7.5f));
        break;
      default:
        break;
    }
    if (!(s > 0.f) || !std::isfinite(s)) s = 1.f;
    scale[i] = s;
    if (q.quant.scale_dtype == DType::kBF16) {
      const uint16_t h = F32ToBf16(s);
      std::memcpy(storage->scales.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(storage->scales.data() + 4 * i, &s, 4);
    }
  }
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t i = n * K + k;
      const float v = LoadAsF32(w.data, w.dtype, i) / scale[(n / br) * grid_cols + k / bc];
      switch (scheme) {
        case QuantScheme::kInt8:
          codes[i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::nearbyint(v), -127.f, 127.f)));
          break;
        case QuantScheme::kFp8:
          codes[i] = F32ToF8E4M3(v);
          break;
        case QuantScheme::kInt4: {
          const uint8_t u = static_cast<uint8_t>(std::clamp(std::nearbyint(v), -8.f, 7.f) + 8.f);
          codes[i >> 1] |= (i & 1) ? u << 4 : u;
          break;
        }
        default:
          break;
      }
    }
  }
  q.data = storage->codes.data();
  q.quant.scale = storage->scales.data();
  return q;
}

}  // namespace ls
