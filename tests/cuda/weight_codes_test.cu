// The widening of quantized codes that the grouped GEMMs run (kernels/cuda/weight_codes.cuh),
// evaluated on the host, against the host definition F32ToBf16(WeightValue(...)) of
// kernels/quantized_weight.h: every E2M1 code under every finite E8M0 scale, every U4 code with
// every zero point under F32, BF16 and F16 scales, and every non-NaN FP8 e4m3 code under float
// scales (not powers of two, subnormal, overflowing). Runs without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/weight_codes.cuh"
#include "kernels/quantized_weight.h"

namespace ls {
namespace {

// Element 0 of a one-block weight holding `code`, under `scale` (its bytes) and an optional zero.
uint16_t HostBf16(DType codes, uint8_t code, DType scale_dtype, const void* scale, const uint8_t* zero) {
  Tensor w{&code, codes, 1, codes == DType::kF8E4M3 ? 1 : 2};
  w.quant = QuantScales{scale, zero, scale_dtype, 1, 32};
  return F32ToBf16(WeightValue(w, 0, 0));
}

// Scales of each float type: random ones over many octaves, powers of two, the float32
// subnormal range and values whose products overflow.
std::vector<float> Scales(std::mt19937& rng) {
  std::vector<float> s = {1.f, 0.5f, 0x1p-126f, 0x1p-140f, 3e-40f, 1e30f, 3e38f, 0.0078125f};
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> octave(-30, 20);
  for (int i = 0; i < 300; ++i) s.push_back(std::ldexp(mant(rng), octave(rng)));
  return s;
}

// The scale's bytes in `dtype` (F32, BF16 or F16).
std::vector<uint8_t> ScaleBytes(float s, DType dtype) {
  std::vector<uint8_t> b(4);
  if (dtype == DType::kF32) {
    std::memcpy(b.data(), &s, 4);
  } else {
    const uint16_t h = dtype == DType::kBF16 ? F32ToBf16(s) : F32ToF16(s);
    std::memcpy(b.data(), &h, 2);
  }
  return b;
}

TEST(WeightCodes, E2M1UnderEveryE8M0ScaleIsTheHostDequantizedBf16) {
  for (int e = 0; e < 255; ++e) {
    const uint8_t scale = static_cast<uint8_t>(e);
    for (uint8_t code = 0; code < 16; ++code) {
      const uint32_t got = cuda::WeightBf16<DType::kE2M1>(code, 0, cuda::ScaleValue(&scale, DType::kE8M0, 0));
      ASSERT_EQ(got, HostBf16(DType::kE2M1, code, DType::kE8M0, &scale, nullptr)) << "code " << int{code} << " e " << e;
    }
  }
}

TEST(WeightCodes, U4WithEveryZeroPointUnderFloatScalesIsTheHostDequantizedBf16) {
  std::mt19937 rng(7);
  const std::vector<float> scales = Scales(rng);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (float s : scales) {
      const std::vector<uint8_t> bytes = ScaleBytes(s, dtype);
      const float scale = cuda::ScaleValue(bytes.data(), dtype, 0);
      for (uint8_t code = 0; code < 16; ++code) {
        ASSERT_EQ(cuda::WeightBf16<DType::kU4>(code, 8, scale),
                  HostBf16(DType::kU4, code, dtype, bytes.data(), nullptr))
            << "no zero point, code " << int{code} << " scale " << s;
        for (uint8_t zero = 0; zero < 16; ++zero) {
          ASSERT_EQ(cuda::WeightBf16<DType::kU4>(code, zero, scale),
                    HostBf16(DType::kU4, code, dtype, bytes.data(), &zero))
              << "code " << int{code} << " zero " << int{zero} << " scale " << s << " as " << DTypeName(dtype);
        }
      }
    }
  }
}

TEST(WeightCodes, Fp8E4M3UnderFloatScalesIsTheHostDequantizedBf16) {
  std::mt19937 rng(8);
  const std::vector<float> scales = Scales(rng);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (float s : scales) {
      const std::vector<uint8_t> bytes = ScaleBytes(s, dtype);
      const float scale = cuda::ScaleValue(bytes.data(), dtype, 0);
      for (int c = 0; c < 256; ++c) {
        if ((c & 0x7f) == 0x7f) continue;  // NaN codes: refused by the loader
        const uint8_t code = static_cast<uint8_t>(c);
        ASSERT_EQ(cuda::WeightBf16<DType::kF8E4M3>(code, 0, scale),
                  HostBf16(DType::kF8E4M3, code, dtype, bytes.data(), nullptr))
            << "code " << c << " scale " << s << " as " << DTypeName(dtype);
      }
    }
  }
}

}  // namespace
}  // namespace ls
