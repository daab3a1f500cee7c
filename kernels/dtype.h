// Element types of weights and activations (F32, BF16, F16), of quantized weights and their scales
// (FP8 e4m3, E8M0 exponents, 8-bit integers, 4-bit integer and e2m1 codes) and of checkpoint
// metadata (I32, I64), with scalar conversions. Float conversions round to nearest even, as PyTorch
// and safetensors writers do; code conversions are exact.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

namespace ls {

enum class DType : uint8_t {
  kF32,
  kBF16,
  kF16,
  kF8E4M3,  // FP8 e4m3fn: bias 7, subnormals, no infinities; 0x7f and 0xff are NaN
  kE8M0,    // a power-of-two scale 2^(e − 127); 255 is NaN
  kU8,
  kI8,
  kI32,
  kI64,
  // 4-bit codes, two per byte: element 2i in the low nibble of byte i, 2i + 1 in the high one (so
  // an int32 word of eight codes, read little-endian, holds element 8j + i in bits 4i..4i+3).
  kU4,    // unsigned integers 0..15: the integer weight is (u − zero point)
  kE2M1,  // FP4 e2m1: codes 0–7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and 8–15 their negatives
};

inline constexpr int DTypeBits(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kI32:
      return 32;
    case DType::kBF16:
    case DType::kF16:
      return 16;
    case DType::kF8E4M3:
    case DType::kE8M0:
    case DType::kU8:
    case DType::kI8:
      return 8;
    case DType::kI64:
      return 64;
    case DType::kU4:
    case DType::kE2M1:
      return 4;
  }
  return 0;
}
// Bytes per element; 0 for the 4-bit codes (use DTypeBits).
inline constexpr size_t DTypeSize(DType t) { return static_cast<size_t>(DTypeBits(t) / 8); }
// Bytes of n elements (n even for the 4-bit codes).
inline constexpr size_t DTypeBytes(DType t, int64_t n) { return static_cast<size_t>(n) * DTypeBits(t) / 8; }

inline constexpr std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF8E4M3:
      return "F8_E4M3";
    case DType::kE8M0:
      return "F8_E8M0";
    case DType::kU8:
      return "U8";
    case DType::kI8:
      return "I8";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kU4:
      return "U4";
    case DType::kE2M1:
      return "E2M1";
  }
  return "?";
}

// Parses a safetensors dtype string; nullopt for anything this engine does not load. (The 4-bit
// codes are never a file's dtype: they are stored as U8 or I32 and reinterpreted by the loader.)
inline std::optional<DType> ParseDType(std::string_view s) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kE8M0, DType::kU8, DType::kI8,
                  DType::kI32, DType::kI64})
    if (s == DTypeName(t)) return t;
  return std::nullopt;
}
// Whether values of this type are floating-point numbers that the float ops read (F32, BF16, F16).
inline constexpr bool IsFloatDType(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// A float rounded to an integer, ties to even (std::nearbyint in the default rounding mode), without a
// libm call: for |v| < 2^22 adding and subtracting 1.5 · 2^23 leaves v rounded; larger values are
// integers already, and infinities and NaN come back as they are.
inline float RoundToEven(float v) { return std::fabs(v) < 0x1p22f ? (v + 0x1.8p23f) - 0x1.8p23f : v; }

inline float Bf16ToF32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t F32ToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absu < 0x38800000u) {  // subnormal or zero in f16
    float af;
    std::memcpy(&af, &absu, 4);
    // Scale so that the f16 subnormal unit (2^-24) becomes 1, then round to nearest even.
    float scaled = af * 16777216.0f;
    uint32_t m = static_cast<uint32_t>(scaled);
    float rem = scaled - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t exp = ((absu >> 23) - 127 + 15) << 10;
  uint32_t man = (absu >> 13) & 0x3ffu;
  uint32_t rest = absu & 0x1fffu;
  uint32_t h = exp | man;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// FP8 e4m3fn code to float (exact; NaN codes give NaN).
inline float F8E4M3ToF32(uint8_t b) {
  if ((b & 0x7fu) == 0x7fu) return std::numeric_limits<float>::quiet_NaN();
  const uint32_t e = (b >> 3) & 0xfu, m = b & 7u;
  const float mag =
      e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(static_cast<float>(8 + m), static_cast<int>(e) - 10);
  return (b & 0x80u) ? -mag : mag;
}
// E8M0 exponent to float: 2^(e − 127); 0 is 2^-127 (a float32 subnormal), 255 NaN.
inline float E8M0ToF32(uint8_t e) {
  if (e == 255) return std::numeric_limits<float>::quiet_NaN();
  const uint32_t u = e == 0 ? 0x00400000u : static_cast<uint32_t>(e) << 23;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline constexpr float kE2M1Values[16] = {0.f,  0.5f,  1.f,  1.5f,  2.f,  3.f,  4.f,  6.f,
                                          -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};
// The 4-bit code of element i of a packed buffer.
inline uint8_t LoadNibble(const void* base, int64_t i) {
  const uint8_t b = static_cast<const uint8_t*>(base)[i >> 1];
  return (i & 1) ? b >> 4 : b & 0xfu;
}

// Reads element i of a buffer of the given type as float (unaligned-safe). Codes read as their
// plain value: e2m1 and e4m3 as numbers, integers (U4 included) as integers, E8M0 as 2^(e − 127).
inline float LoadAsF32(const void* base, DType t, int64_t i) {
  const auto* p = static_cast<const unsigned char*>(base);
  switch (t) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      return f;
    }
    case DType::kBF16:
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return t == DType::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
    }
    case DType::kF8E4M3:
      return F8E4M3ToF32(p[i]);
    case DType::kE8M0:
      return E8M0ToF32(p[i]);
    case DType::kU8:
      return static_cast<float>(p[i]);
    case DType::kI8:
      return static_cast<float>(static_cast<int8_t>(p[i]));
    case DType::kI32: {
      int32_t v;
      std::memcpy(&v, p + i * 4, 4);
      return static_cast<float>(v);
    }
    case DType::kI64: {
      int64_t v;
      std::memcpy(&v, p + i * 8, 8);
      return static_cast<float>(v);
    }
    case DType::kU4:
      return static_cast<float>(LoadNibble(base, i));
    case DType::kE2M1:
      return kE2M1Values[LoadNibble(base, i)];
  }
  return 0.f;
}

}  // namespace ls
