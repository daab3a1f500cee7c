// The packing rules of the quantized formats, element by element: FP8 e4m3 codes (subnormals,
// the largest value, NaN, rounding of the encoder), E8M0 scales (0 is 2^-127, 255 NaN), E2M1 codes
// (negative codes), the nibble order within a byte and an int32 word, the scale grid with partial
// edge blocks, zero points, and online quantization's round trip. Expected values are the formats'
// definitions (OCP FP8/MX, compressed-tensors' pack_to_int32), not the code under test.
#include "kernels/quantized_weight.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/thread_pool.h"

namespace ls {
namespace {

TEST(Fp8E4M3, CodesDecodeToTheirValues) {
  EXPECT_EQ(F8E4M3ToF32(0x00), 0.f);
  EXPECT_TRUE(std::signbit(F8E4M3ToF32(0x80)));
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.f);   // exponent 7 (bias 7), mantissa 0
  EXPECT_EQ(F8E4M3ToF32(0x3c), 1.5f);  // mantissa 4/8
  EXPECT_EQ(F8E4M3ToF32(0xc0), -2.f);
  EXPECT_EQ(F8E4M3ToF32(0x7e), 448.f);    // largest finite: 1.75 · 2^8
  EXPECT_EQ(F8E4M3ToF32(0x01), 0x1p-9f);  // smallest subnormal: 1/8 · 2^-6
  EXPECT_EQ(F8E4M3ToF32(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(F8E4M3ToF32(0x08), 0x1p-6f);  // smallest normal
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0x7f)));
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0xff)));
}

TEST(Fp8E4M3, EncoderRoundsToNearestEvenAndSaturates) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(F32ToF8E4M3(F8E4M3ToF32(static_cast<uint8_t>(c))), c == 0x80 ? 0x80 : c) << c;
  }
  EXPECT_EQ(F32ToF8E4M3(1.0625f), 0x38);  // halfway between 1 (even) and 1.125
  EXPECT_EQ(F32ToF8E4M3(1.1875f), 0x3a);  // halfway between 1.125 and 1.25 (even)
  EXPECT_EQ(F32ToF8E4M3(1.07f), 0x39);
  EXPECT_EQ(F32ToF8E4M3(1000.f), 0x7e);
  EXPECT_EQ(F32ToF8E4M3(-1000.f), 0xfe);
  EXPECT_EQ(F32ToF8E4M3(0x1p-10f), 0x00);      // halfway between 0 (even) and 2^-9
  EXPECT_EQ(F32ToF8E4M3(3 * 0x1p-10f), 0x02);  // halfway between 2^-9 and 2 · 2^-9 (even)
}

// The encoder against the format's definition by search: the nearest finite code, ties to the code
// with an even mantissa, |f| beyond 448 saturating, over values at every scale and at every
// midpoint between neighbouring codes (and one float either side of it).
TEST(Fp8E4M3, EncoderPicksTheNearestCodeEverywhere) {
  const auto nearest = [](float f) -> uint8_t {
    const uint8_t sign = std::signbit(f) ? 0x80 : 0;
    const double a = std::fabs(static_cast<double>(f));
    int best = 0;
    for (int c = 1; c <= 0x7e; ++c) {
      const double d = std::fabs(F8E4M3ToF32(static_cast<uint8_t>(c)) - a);
      const double b = std::fabs(F8E4M3ToF32(static_cast<uint8_t>(best)) - a);
      if (d < b || (d == b && c % 2 == 0)) best = c;
    }
    return sign | static_cast<uint8_t>(best);
  };
  std::vector<float> values;
  for (int c = 0; c < 0x7e; ++c) {
    const float mid = (F8E4M3ToF32(static_cast<uint8_t>(c)) + F8E4M3ToF32(static_cast<uint8_t>(c + 1))) / 2;
    for (float v : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1000.f)}) values.insert(values.end(), {v, -v});
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-12.f, 9.5f), mantissa(1.f, 2.f);
  for (int i = 0; i < 20000; ++i) values.push_back((i % 2 ? -1.f : 1.f) * mantissa(rng) * std::exp2(exponent(rng)));
  for (float v : values) ASSERT_EQ(F32ToF8E4M3(v), nearest(v)) << v;
  EXPECT_EQ(F32ToF8E4M3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(F32ToF8E4M3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(F32ToF8E4M3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(F32ToF8E4M3(-0.f), 0x80);
}

TEST(E8M0, ExponentsDecodeToPowersOfTwo) {
  EXPECT_EQ(E8M0ToF32(127), 1.f);
  EXPECT_EQ(E8M0ToF32(128), 2.f);
  EXPECT_EQ(E8M0ToF32(120), 0x1p-7f);
  EXPECT_EQ(E8M0ToF32(254), 0x1p127f);
  EXPECT_EQ(E8M0ToF32(1), 0x1p-126f);
  EXPECT_EQ(E8M0ToF32(0), 0x1p-127f);  // a float32 subnormal, not zero
  EXPECT_GT(E8M0ToF32(0), 0.f);
  EXPECT_TRUE(std::isnan(E8M0ToF32(255)));
}

TEST(E2M1, CodesIncludingNegativeOnesDecode) {
  const float want[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0f, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (uint8_t c = 0; c < 16; ++c) {
    const uint8_t byte = static_cast<uint8_t>(c | (15 - c) << 4);
    EXPECT_EQ(LoadAsF32(&byte, DType::kE2M1, 0), want[c]) << int(c);
    EXPECT_EQ(LoadAsF32(&byte, DType::kE2M1, 1), want[15 - c]) << int(c);
  }
  const uint8_t neg_zero = 8;
  EXPECT_TRUE(std::signbit(LoadAsF32(&neg_zero, DType::kE2M1, 0)));
}

TEST(Nibbles, LowNibbleFirstInABytesAndInAnInt32Word) {
  const uint8_t byte = 0x21;  // element 0 in the low nibble
  EXPECT_EQ(LoadNibble(&byte, 0), 1);
  EXPECT_EQ(LoadNibble(&byte, 1), 2);
  // compressed-tensors pack_to_int32: element i of a word at bits 4i..4i+3 (little-endian words).
  const int32_t word = static_cast<int32_t>(0xfedc4321u);
  const uint8_t want[8] = {1, 2, 3, 4, 0xc, 0xd, 0xe, 0xf};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(LoadNibble(&word, i), want[i]) << i;
}

// A [rows, cols] weight of random codes of `codes` with a random scale grid.
struct Quantized {
  std::vector<uint8_t> codes, scales, zeros;
  Tensor t;
};
Quantized Random(DType codes, DType scale_dtype, int64_t rows, int64_t cols, int32_t br, int32_t bc, bool zero,
                 uint32_t seed) {
  std::mt19937 rng(seed);
  Quantized q;
  q.codes.resize(DTypeBytes(codes, rows * cols));
  for (auto& c : q.codes) {
    c = static_cast<uint8_t>(rng());
    if (codes == DType::kF8E4M3 && (c & 0x7f) == 0x7f) c = 0x3f;
  }
  const int64_t gr = (rows + br - 1) / br, gc = (cols + bc - 1) / bc;
  q.scales.resize(DTypeBytes(scale_dtype, gr * gc));
  std::uniform_real_distribution<float> u(0.01f, 0.2f);
  for (int64_t i = 0; i < gr * gc; ++i) {
    if (scale_dtype == DType::kE8M0) {
      q.scales[i] = static_cast<uint8_t>(120 + rng() % 8);
    } else if (scale_dtype == DType::kBF16) {
      const uint16_t h = F32ToBf16(u(rng));
      std::memcpy(&q.scales[2 * i], &h, 2);
    } else {
      const float f = u(rng);
      std::memcpy(&q.scales[4 * i], &f, 4);
    }
  }
  if (zero) {
    q.zeros.resize(gr * gc);
    for (auto& z : q.zeros) z = static_cast<uint8_t>(rng() % 16);
  }
  q.t = Tensor{q.codes.data(),
               codes,
               rows,
               cols,
               Layout::kRowMajor,
               QuantScales{q.scales.data(), zero ? q.zeros.data() : nullptr, scale_dtype, br, bc}};
  return q;
}

TEST(ScaleGrid, PartialEdgeBlocksUseTheirOwnScale) {
  // [5, 7] in 2 × 3 blocks: a grid of [3, 3] whose last row and column of blocks are partial.
  Quantized q = Random(DType::kF8E4M3, DType::kF32, 5, 7, 2, 3, false, 1);
  ASSERT_EQ(q.t.scale_rows(), 3);
  ASSERT_EQ(q.t.scale_cols(), 3);
  const float* s = reinterpret_cast<const float*>(q.scales.data());
  for (int64_t n = 0; n < 5; ++n)
    for (int64_t k = 0; k < 7; ++k)
      EXPECT_EQ(WeightValue(q.t, n, k), F8E4M3ToF32(q.codes[n * 7 + k]) * s[(n / 2) * 3 + k / 3]) << n << "," << k;
}

TEST(ScaleGrid, RowSliceAtABlockBoundaryKeepsItsScales) {
  // Rows 4.. of [9, 7] in 2 × 3 blocks (MLA splits kv_a_proj_with_mqa this way): the slice's
  // values are the whole weight's, its partial last block row included.
  Quantized q = Random(DType::kF8E4M3, DType::kF32, 9, 7, 2, 3, false, 3);
  const Tensor tail = q.t.RowSlice(4, 5);
  for (int64_t n = 0; n < 5; ++n)
    for (int64_t k = 0; k < 7; ++k) EXPECT_EQ(WeightValue(tail, n, k), WeightValue(q.t, 4 + n, k)) << n << "," << k;
}

TEST(ScaleGrid, Int4GroupsAlongKWithZeroPoints) {
  // 40 columns in groups of 32: two groups per row, the second partial.
  Quantized q = Random(DType::kU4, DType::kBF16, 3, 40, 1, 32, true, 2);
  ASSERT_EQ(q.t.scale_cols(), 2);
  for (int64_t n = 0; n < 3; ++n) {
    for (int64_t k = 0; k < 40; ++k) {
      const int64_t i = n * 40 + k, g = k / 32;
      const int code = (i % 2) ? q.codes[i / 2] >> 4 : q.codes[i / 2] & 15;
      uint16_t h;
      std::memcpy(&h, &q.scales[2 * (n * 2 + g)], 2);
      EXPECT_EQ(WeightValue(q.t, n, k), static_cast<float>(code - q.zeros[n * 2 + g]) * Bf16ToF32(h));
    }
  }
  q.t.quant.zero = nullptr;  // symmetric: the codes are offset by 8
  const int code0 = q.codes[0] & 15;
  uint16_t h0;
  std::memcpy(&h0, q.scales.data(), 2);
  EXPECT_EQ(WeightValue(q.t, 0, 0), static_cast<float>(code0 - 8) * Bf16ToF32(h0));
}

TEST(ScaleGrid, Mxfp4ScalesArePowersOfTwo) {
  Quantized q = Random(DType::kE2M1, DType::kE8M0, 2, 64, 1, 32, false, 3);
  for (int64_t k = 0; k < 64; ++k) {
    const int code = (k % 2) ? q.codes[k / 2] >> 4 : q.codes[k / 2] & 15;
    EXPECT_EQ(WeightValue(q.t, 0, k), kE2M1Values[code] * std::ldexp(1.f, q.scales[k / 32] - 127));
  }
  q.scales[0] = 0;  // 2^-127: tiny but not zero
  const int code = q.codes[0] & 15;
  if (code % 8 != 0) {
    EXPECT_NE(WeightValue(q.t, 0, 0), 0.f);
  }
}

class OnlineQuantization : public ::testing::TestWithParam<QuantScheme> {};

TEST_P(OnlineQuantization, RoundTripIsWithinHalfAStep) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  const int64_t rows = 70, cols = 300;  // partial 128-blocks and 32-groups
  std::vector<float> w(rows * cols);
  for (auto& v : w) v = nd(rng);
  w[5] = 0.f;
  // Row 3: ties for the integer schemes. Its largest magnitude 127 (int8: scale 1) and, in the first
  // group of 32, 7.5 (int4: scale 1), the rest halves: rounding goes to the even neighbour.
  const bool int4_scheme = GetParam() == QuantScheme::kInt4 || GetParam() == QuantScheme::kInt4A8;
  for (int64_t k = 0; k < cols; ++k) w[3 * cols + k] = 0.5f + static_cast<float>(k % 6) - 3.f;  // -2.5 .. 2.5
  w[3 * cols + 7] = int4_scheme ? 7.5f : 127.f;
  const Tensor src{w.data(), DType::kF32, rows, cols};
  QuantizedStorage storage;
  const Tensor q = Quantize(src, GetParam(), &storage);
  ASSERT_TRUE(q.quantized());
  EXPECT_EQ(q.quant.int8_activations, GetParam() == QuantScheme::kInt8A8 || GetParam() == QuantScheme::kInt4A8);
  const Tensor layout = QuantizedLayout(src, GetParam());
  EXPECT_EQ(layout.quant.int8_activations, q.quant.int8_activations);
  EXPECT_EQ(layout.dtype, q.dtype);
  EXPECT_EQ(layout.scale_bytes(), q.scale_bytes());
  EXPECT_EQ(storage.scales.size(), q.scale_bytes());
  EXPECT_EQ(storage.codes.size(), q.bytes());
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k = 0; k < cols; ++k) {
      const float s = BlockScale(q, n / q.quant.block_rows, k / q.quant.block_cols), v = w[n * cols + k];
      const float got = WeightValue(q, n, k);
      // Half an integer step, or for FP8 half a mantissa step of the value (2^-4 relative) or of the
      // smallest normal.
      // (int4: the scale is rounded to BF16, which can stretch the largest value past 7.5 steps.)
      const float tol = GetParam() == QuantScheme::kFp8 ? std::max(std::fabs(v) / 16, s * 0x1p-10f) * 1.0001f
                        : int4_scheme                   ? s * 0.53f
                                                        : s * 0.5001f;
      ASSERT_LE(std::fabs(got - v), tol) << n << "," << k;
      // The integer schemes' codes are their definition: clamp(round-half-even(v / scale)).
      if (GetParam() != QuantScheme::kFp8) {
        const float lo = int4_scheme ? -8.f : -127.f, hi = int4_scheme ? 7.f : 127.f;
        ASSERT_EQ(got, std::clamp(std::nearbyint(v / s), lo, hi) * s) << n << "," << k;
      }
    }
  }
}

// On a pool the rows (FP8: rows of 128 × 128 blocks) are quantized side by side: the same codes and
// scales as one thread, for every source type, partial blocks, and rows of zeros, NaNs and infinities.
TEST_P(OnlineQuantization, ThreadsGiveTheSameBytes) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  const int64_t rows = 300, cols = 300;  // three rows of FP8 blocks, the last partial
  std::vector<float> w(rows * cols);
  for (auto& v : w) v = nd(rng) * 3;
  std::fill_n(w.begin() + 7 * cols, cols, 0.f);                // a row of zeros
  w[9 * cols + 11] = std::nanf("");                            // a NaN among values
  w[200 * cols + 3] = std::numeric_limits<float>::infinity();  // an infinity in the third block row
  ThreadPool pool(3);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> half(w.size());
    for (size_t i = 0; i < w.size(); ++i) half[i] = dt == DType::kBF16 ? F32ToBf16(w[i]) : F32ToF16(w[i]);
    const Tensor src{dt == DType::kF32 ? static_cast<const void*>(w.data()) : half.data(), dt, rows, cols};
    QuantizedStorage one, many;
    const Tensor a = Quantize(src, GetParam(), &one), b = Quantize(src, GetParam(), &many, &pool);
    ASSERT_TRUE(a.quantized() && b.quantized());
    EXPECT_EQ(one.codes, many.codes) << DTypeName(dt);
    EXPECT_EQ(one.scales, many.scales) << DTypeName(dt);
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, OnlineQuantization,
                         ::testing::Values(QuantScheme::kInt8, QuantScheme::kFp8, QuantScheme::kInt4,
                                           QuantScheme::kInt8A8, QuantScheme::kInt4A8));

}  // namespace
}  // namespace ls
