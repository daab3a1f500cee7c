// The quantized packed-GEMM kernel (quantized_gemm.h) for every SIMD target: tiles of MR
// activation rows × NP panels, as packed_gemm_simd.cc, with each panel step's codes widened to
// float32 in registers: 8-bit integer codes by sign extension, e4m3 by moving its exponent and
// mantissa into float32 position and multiplying by 2^120 (exact), 4-bit codes by their nibbles
// looked up in a 16-entry table (or, with zero points, subtracted as integers). The widened
// weights are scaled once per tile step and shared by the tile's rows.
#include "kernels/cpu/quantized_gemm.h"
#include "kernels/cpu/simd/vec.h"

LS_SIMD_BEGIN
namespace {
#include "kernels/cpu/simd/gemm_tiles.inc"

constexpr int64_t P = kPanelRows;

// A packed format: codes, scales, zero points, and whether the scale multiplies the finished sum
// (I8 codes with one scale per row) instead of every weight.
template <DType C, DType S, bool Zero, bool After>
struct Format {
  static constexpr DType kCodes = C;
  static constexpr DType kScales = S;
  static constexpr bool kZero = Zero;
  static constexpr int64_t kStepBytes = DTypeBits(C) * P / 8;  // 32 (8-bit codes) or 16 (4-bit)
  static constexpr bool kScaleAfterSum = After;
};

// The 16 float32 scales at `s` (elements of S).
template <DType S>
inline V16 LoadScales(const uint8_t* s) {
  if constexpr (S == DType::kF32) {
    return Load(reinterpret_cast<const float*>(s));
  } else if constexpr (S == DType::kBF16) {
    return LoadBf16(reinterpret_cast<const uint16_t*>(s));
  } else {  // E8M0: 2^(e − 127); e = 0 is the subnormal 2^-127
    const I16 e = LoadU8(s);
    return AsFloat(SelectI(EqI(e, SetI(0)), SetI(0x00400000), ShlI<23>(e)));
  }
}

inline V16 Table16(const float (&t)[16]) { return Load(t); }
constexpr float kU4Values[16] = {-8.f, -7.f, -6.f, -5.f, -4.f, -3.f, -2.f, -1.f, 0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f};

// One panel step's 32 codes as float32 values (zero point subtracted, not yet scaled): rows 0-15
// in lo, 16-31 in hi.
template <class F>
inline void Decode(const uint8_t* c, const I16* zero, const V16& table, V16* lo, V16* hi) {
  if constexpr (F::kCodes == DType::kI8) {
    *lo = ToFloat(LoadI8(c));
    *hi = ToFloat(LoadI8(c + 16));
  } else if constexpr (F::kCodes == DType::kF8E4M3) {
    // Sign-extended byte << 20 puts e and m at float32's exponent and mantissa; the mask keeps them
    // and the sign. As a float that is the value · 2^-120.
    const I16 mask = SetI(static_cast<int32_t>(0x87F00000u));
    const V16 unbias = Set(0x1p120f);
    *lo = Mul(AsFloat(AndI(ShlI<20>(LoadI8(c)), mask)), unbias);
    *hi = Mul(AsFloat(AndI(ShlI<20>(LoadI8(c + 16)), mask)), unbias);
  } else {  // 4-bit: byte j holds row j (low nibble) and row 16 + j (high nibble)
    const I16 v = LoadU8(c);
    const I16 h = ShrI<4>(v);
    if constexpr (F::kZero) {
      *lo = ToFloat(SubI(AndI(v, SetI(15)), zero[0]));
      *hi = ToFloat(SubI(h, zero[1]));
    } else {  // a table lookup reads only an index's low 4 bits: the low nibble needs no mask
      *lo = Lookup16(table, v);
      *hi = Lookup16(table, h);
    }
  }
}

constexpr int64_t kAheadBytes = 1024;  // prefetch distance in a panel's stream of codes

// How a tile widens symmetric U4 codes. With AVX-512 a 16-entry table lookup is one instruction;
// with AVX2 it takes four per eight lanes, so there the weight is formed as fma(c, s, −8·s) from
// the bare code c: the one rounding of (c − 8)·s, the same bits as the table's value times s, while
// −8·s is exact (|s| ≤ 2^120; a group with a larger scale takes the table). One sequence's int4
// decode on the AVX2 target of an AMD Zen 5 (d 2048 model, 3 alternating rounds): 246 → 335 tok/s,
// at 8 and 32 sequences 359 → 486 and 447 → 578 (with one panel a tile, below; either change
// alone gave 1% and 7%).
// With AVX2's 16 registers, 4-bit codes also take one panel a tile (Kernel::Panels).
#if defined(LS_SIMD_X86_AVX2)
constexpr bool kU4ByFma = true, kOnePanel4Bit = true;
#else
constexpr bool kU4ByFma = false, kOnePanel4Bit = false;
#endif

template <class F>
struct Kernel {
  static constexpr int kMaxRows = kFloatTileRows;
  // On AVX2, 4-bit codes take one panel at a time: two would hold their scales (and −8·s, the zero
  // points or the 16-entry table) beside the accumulators, spilling to the stack (AVX2 target of a
  // Zen 5, 3 alternating rounds, one / 8 / 32 sequences: E2M1, `decode_bench --mxfp4`, +4.3 / +2.4
  // / −0.5%; U4 with zero points, `--large --int4 128 --int4_zero_points`, +4.6 / +2.5 / +0.3%).
  static constexpr bool kFmaWidens = kU4ByFma && F::kCodes == DType::kU4 && !F::kZero;
  static constexpr int Panels(int MR) {
    return kOnePanel4Bit && (F::kCodes == DType::kU4 || F::kCodes == DType::kE2M1) ? 1 : FloatTilePanels(MR);
  }
  // Widened weights are the scaled values (w · s): equal, bit for bit, to what the chains below
  // multiply, the power-of-two form of E8M0 scales included. A scale applied after the sum (I8
  // per row) is not a widened weight: that format keeps its tiles.
  static constexpr bool kWidens = !F::kScaleAfterSum;
  const float* x;
  int64_t ldx;
  const uint8_t* codes;
  const uint8_t* scales;
  const uint8_t* zeros;
  int64_t K, group, groups;
  bool accumulate;

  // The code bytes of one k step of a panel, and where step k of panel `panel` starts (the group
  // scales are small and read as they come).
  static constexpr int64_t kStepBytes = F::kStepBytes;
  const char* StepAddress(int64_t panel, int64_t k) const {
    return reinterpret_cast<const char*>(codes) + (panel * K + k) * F::kStepBytes;
  }
  void WidenPanel(int64_t panel, int64_t k0, int64_t kb, float* out) const {
    constexpr int64_t SB = DTypeBits(F::kScales) / 8;
    const V16 table = F::kCodes == DType::kE2M1 ? Table16(kE2M1Values) : Table16(kU4Values);
    for (int64_t k = k0; k < k0 + kb;) {
      const int64_t g = k / group, k_end = std::min(k0 + kb, (g + 1) * group);
      const int64_t at = (panel * groups + g) * P;
      const V16 s0 = LoadScales<F::kScales>(scales + at * SB), s1 = LoadScales<F::kScales>(scales + (at + 16) * SB);
      I16 z[2];
      if constexpr (F::kZero) {
        z[0] = LoadU8(zeros + at);
        z[1] = LoadU8(zeros + at + 16);
      }
      for (; k < k_end; ++k) {
        V16 lo, hi;
        Decode<F>(codes + (panel * K + k) * F::kStepBytes, z, table, &lo, &hi);
        Store(out + (k - k0) * P, Mul(lo, s0));
        Store(out + (k - k0) * P + 16, Mul(hi, s1));
      }
    }
  }

  template <int MR, int NP>
  void Tile(int64_t m0, int64_t panel, float* y, int64_t ldy, int64_t valid) const {
    constexpr int64_t SB = DTypeBits(F::kScales) / 8;
    const V16 table = F::kCodes == DType::kE2M1 ? Table16(kE2M1Values) : Table16(kU4Values);
    const float* xr = x + m0 * ldx;
    V16 acc[MR][NP][2];
    for (int m = 0; m < MR; ++m)
      for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = Zero();
    for (int64_t g = 0, k0 = 0; k0 < K; ++g, k0 += group) {
      const int64_t k1 = std::min(K, k0 + group);
      V16 s[NP][2];
      I16 z[NP][2];
      for (int p = 0; p < NP; ++p) {
        const int64_t at = ((panel + p) * groups + g) * P;
        if constexpr (!F::kScaleAfterSum) {
          s[p][0] = LoadScales<F::kScales>(scales + at * SB);
          s[p][1] = LoadScales<F::kScales>(scales + (at + 16) * SB);
        }
        if constexpr (F::kZero) {
          z[p][0] = LoadU8(zeros + at);
          z[p][1] = LoadU8(zeros + at + 16);
        }
      }
      // The group's fused multiply-add chains; with `scaled` each widened weight is multiplied by
      // its scale first; with `by_fma` symmetric U4 weights are fma(c, s, nb) (kU4ByFma).
      V16 nb[NP][2];
      auto chain = [&](auto scaled, auto by_fma) {
        for (int64_t k = k0; k < k1; ++k) {
          V16 lo[NP], hi[NP];
          for (int p = 0; p < NP; ++p) {
            const uint8_t* c = codes + ((panel + p) * K + k) * F::kStepBytes;
            Prefetch(c + kAheadBytes);
            if constexpr (decltype(by_fma)::value) {
              const I16 v = LoadU8(c);
              lo[p] = Fma(ToFloat(AndI(v, SetI(15))), s[p][0], nb[p][0]);
              hi[p] = Fma(ToFloat(ShrI<4>(v)), s[p][1], nb[p][1]);
              continue;
            }
            Decode<F>(c, z[p], table, &lo[p], &hi[p]);
            if constexpr (decltype(scaled)::value) {
              lo[p] = Mul(lo[p], s[p][0]);
              hi[p] = Mul(hi[p], s[p][1]);
            }
          }
          for (int m = 0; m < MR; ++m) {
            const V16 xb = Set(xr[m * ldx + k]);
            for (int p = 0; p < NP; ++p) {
              acc[m][p][0] = Fma(xb, lo[p], acc[m][p][0]);
              acc[m][p][1] = Fma(xb, hi[p], acc[m][p][1]);
            }
          }
        }
      };
      if constexpr (F::kScales == DType::kE8M0) {
        // Power-of-two scales: multiplying the weight by s inside fma(x, w·s, acc) equals running
        // the group's chain on acc/s with the bare weight and multiplying by s after, bit for bit,
        // while every value stays a normal float32 — so with the group's scales in [2^-64, 2^63]
        // (the accumulators far from both ends of the range) the per-weight multiply goes.
        bool pow2 = true;
        for (int p = 0; p < NP; ++p)
          for (int h = 0; h < 2; ++h) pow2 &= AllWithin(s[p][h], 0x1p-64f, 0x1p63f);
        if (pow2) {
          for (int p = 0; p < NP; ++p)
            for (int h = 0; h < 2; ++h) {
              // 1/s = 2^(127 − e): exponent bits (254 − e) << 23.
              const V16 inv = AsFloat(SubI(SetI(254 << 23), AsInt(s[p][h])));
              for (int m = 0; m < MR; ++m) acc[m][p][h] = Mul(acc[m][p][h], inv);
            }
          chain(std::false_type{}, std::false_type{});
          for (int m = 0; m < MR; ++m)
            for (int p = 0; p < NP; ++p)
              for (int h = 0; h < 2; ++h) acc[m][p][h] = Mul(acc[m][p][h], s[p][h]);
          continue;
        }
      }
      if constexpr (kFmaWidens) {
        bool fits = true;
        for (int p = 0; p < NP; ++p)
          for (int h = 0; h < 2; ++h) {
            fits &= AllWithin(s[p][h], -0x1p120f, 0x1p120f);
            nb[p][h] = Mul(s[p][h], Set(-8.f));
          }
        if (fits) {
          chain(std::true_type{}, std::true_type{});
          continue;
        }
      }
      chain(std::bool_constant<!F::kScaleAfterSum>{}, std::false_type{});
    }
    if constexpr (F::kScaleAfterSum) {
      for (int p = 0; p < NP; ++p) {
        const int64_t at = (panel + p) * groups * P;
        const V16 s0 = LoadScales<F::kScales>(scales + at * SB);
        const V16 s1 = LoadScales<F::kScales>(scales + (at + 16) * SB);
        for (int m = 0; m < MR; ++m) {
          acc[m][p][0] = Mul(acc[m][p][0], s0);
          acc[m][p][1] = Mul(acc[m][p][1], s1);
        }
      }
    }
    StoreTile<MR, NP>(acc, y, ldy, valid, accumulate);
  }
};

template <class F>
void Run(const float* x, int64_t ldx, int64_t M, const Tensor& t, int64_t n_begin, int64_t n_end, float* y,
         int64_t ldy, bool accumulate) {
  const Kernel<F> k{x,
                    ldx,
                    static_cast<const uint8_t*>(t.data),
                    static_cast<const uint8_t*>(t.quant.scale),
                    static_cast<const uint8_t*>(t.quant.zero),
                    t.cols,
                    t.quant.block_cols,
                    t.scale_cols(),
                    accumulate};
  PanelRange(k, M, n_begin, n_end, t.cols * F::kStepBytes, y, ldy);
}

}  // namespace

// Every packed format (quantized_gemm.h's PackQuantizedWeight keeps E8M0 scales for E2M1 codes and
// BF16 scales for U4 codes, else F32; zero points only with U4 codes).
void QuantizedGemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin, int64_t n_end,
                        float* y, int64_t ldy, bool accumulate) {
  const DType s = w.quant.scale_dtype;
  const bool zero = w.quant.zero != nullptr;
  auto run = [&](auto format) { Run<decltype(format)>(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate); };
  switch (w.dtype) {
    case DType::kI8:
      return w.scale_cols() == 1 ? run(Format<DType::kI8, DType::kF32, false, true>{})
                                 : run(Format<DType::kI8, DType::kF32, false, false>{});
    case DType::kF8E4M3:
      return run(Format<DType::kF8E4M3, DType::kF32, false, false>{});
    case DType::kU4:
      if (s == DType::kBF16)
        return zero ? run(Format<DType::kU4, DType::kBF16, true, false>{})
                    : run(Format<DType::kU4, DType::kBF16, false, false>{});
      return zero ? run(Format<DType::kU4, DType::kF32, true, false>{})
                  : run(Format<DType::kU4, DType::kF32, false, false>{});
    case DType::kE2M1:
      return s == DType::kE8M0 ? run(Format<DType::kE2M1, DType::kE8M0, false, false>{})
                               : run(Format<DType::kE2M1, DType::kF32, false, false>{});
    default:
      return;
  }
}

LS_SIMD_END
