// Twins of kernels/quantized_weight.h's element values for the CUDA kernels: a quantized
// weight's codes and scales as float32, w = (code − zero) · scale rounded once to float32, then to
// BF16 bits exactly as the host's F32ToBf16 (round to nearest even, the same NaN form). Host and
// device functions, so that a host test can check them against the host definitions. Included by
// the CUDA sources that read quantized weights (the grouped GEMMs, bench/moe_kernels).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"

namespace ls::cuda {

__host__ __device__ inline float BitsToF32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
__host__ __device__ inline uint32_t F32Bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
// a · b rounded to nearest even (never contracted into a fused multiply-add).
__host__ __device__ inline float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
// Element i of an array, through the read-only cache on the device.
template <typename T>
__host__ __device__ inline T LoadRo(const T* p, int64_t i) {
#if defined(__CUDA_ARCH__)
  return __ldg(p + i);
#else
  return p[i];
#endif
}

// FP4 e2m1 code (low four bits of c) as float32: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives
// (code 8 is −0, as kE2M1Values).
__host__ __device__ inline float E2M1ToF32(uint32_t c) {
  const uint32_t sign = (c & 8u) << 28, e = (c >> 1) & 3u, m = c & 1u;
  // e > 0: (1 + m/2) · 2^(e − 1); e == 0: m · 0.5.
  const uint32_t mag = e ? (e + 126u) << 23 | m << 22 : (m ? 126u << 23 : 0u);
  return BitsToF32(sign | mag);
}

// FP8 e4m3fn code as float32 (exact; 0x7f and 0xff are NaN, which the loader refuses).
__host__ __device__ inline float E4M3ToF32(uint32_t b) {
  b &= 0xffu;
  if ((b & 0x7fu) == 0x7fu) return BitsToF32(0x7fc00000u);
  const uint32_t sign = (b & 0x80u) << 24, e = (b >> 3) & 0xfu, m = b & 7u;
  if (e == 0) return BitsToF32(sign | F32Bits(static_cast<float>(m) * 0x1p-9f));
  return BitsToF32(sign | (e + 120u) << 23 | m << 20);
}

// Element i of a scale array of F32, BF16, F16 or E8M0 (2^(e − 127); 0 is 2^-127, 255 NaN).
__host__ __device__ inline float ScaleValue(const void* scales, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kF32:
      return LoadRo(static_cast<const float*>(scales), i);
    case DType::kBF16:
      return BitsToF32(static_cast<uint32_t>(LoadRo(static_cast<const unsigned short*>(scales), i)) << 16);
    case DType::kF16: {
      const unsigned short h = LoadRo(static_cast<const unsigned short*>(scales), i);
#if defined(__CUDA_ARCH__)
      return __half2float(__ushort_as_half(h));
#else
      return F16ToF32(h);
#endif
    }
    default: {  // E8M0
      const uint32_t e = LoadRo(static_cast<const unsigned char*>(scales), i);
      return BitsToF32(e == 255u ? 0x7fc00000u : (e == 0u ? 0x00400000u : e << 23));
    }
  }
}

// The value of code c of a weight stored as kCodes (E2M1, U4 or F8E4M3) before scaling: the
// small float, or the integer less its zero point.
template <DType kCodes>
__host__ __device__ inline float CodeToF32(uint32_t c, int32_t zero) {
  if constexpr (kCodes == DType::kE2M1) {
    return E2M1ToF32(c);
  } else if constexpr (kCodes == DType::kU4) {
    return static_cast<float>(static_cast<int32_t>(c & 15u) - zero);
  } else {
    static_assert(kCodes == DType::kF8E4M3, "codes: E2M1, U4 or F8E4M3");
    return E4M3ToF32(c);
  }
}

// float32 to BF16 bits, bit for bit the host's F32ToBf16.
__host__ __device__ inline uint32_t F32ToBf16Bits(float f) {
  uint32_t u = F32Bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}

// One weight: (code − zero) · scale, one float32 rounding, then BF16.
template <DType kCodes>
__host__ __device__ inline uint32_t WeightBf16(uint32_t code, int32_t zero, float scale) {
  return F32ToBf16Bits(MulRn(CodeToF32<kCodes>(code, zero), scale));
}

}  // namespace ls::cuda
