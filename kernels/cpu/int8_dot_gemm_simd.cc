// The int8-activation GEMM kernel (int8_dot_gemm.h) for every target with integer dot products:
// tiles of MR activation rows × NP panels; per k quad a panel's codes are one or two 64-byte loads
// (4-bit codes split into two by a mask and a shift), and each activation row's four int8 values,
// broadcast, meet them in one dot-product step per 16 output rows (DotI8 / DotU4 of the vector
// layer: vpdpbusd, AVX-VNNI, the sign trick, or sdot). On the avx512_amx target, I8 codes meet
// ranges of at least kAmxMinRows rows in AMX tiles instead (AmxI8Range below). Integer sums are exact,
// so every path gives the same int32 sums; the float steps are those of int8_dot_gemm.h.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "kernels/cpu/int8_dot_gemm.h"
#include "kernels/cpu/simd/vec.h"

LS_SIMD_BEGIN
namespace {
#include "kernels/cpu/simd/gemm_tiles.inc"

constexpr int64_t P = kPanelRows;

inline int32_t Quad(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Prefetch distance in a panel's stream of codes; I8 tiles of many rows use the far one (TileAhead;
// on an AMD Zen 5, d 2048 model: the 512-token prefill 6% faster, decode of 8 and 32 sequences on
// the same experts 5-13%). AVX2's smaller tiles (one or two rows) run faster at twice the near
// distance (the same CPU as AVX2, 5 alternating rounds: w8a8 decode of 1 and 8 sequences 1.7-7.4%
// and 1.1-5.0% faster, w4a8 2.4% and 1.4%, the gain growing with the host's bandwidth of the
// moment; 4096 no better than 2048).
#if defined(LS_SIMD_BASE_AVX2)
constexpr int64_t kAheadBytes = 2048, kFarAheadBytes = 4096;
#else
constexpr int64_t kAheadBytes = 1024, kFarAheadBytes = 4096;
#endif

// The float steps of I8 codes (int8_dot_gemm.h) for one row of 16 columns: the int32 sums less the
// unsigned-activation offset, times the row's scale, times the columns' scales, stored or added.
inline void StoreI8Sums(I16 sums, I16 offset, float sx, V16 sw, float* out, int64_t valid, bool accumulate) {
  StoreColumns(out, Mul(Mul(ToFloat(SubI(sums, offset)), Set(sx)), sw), valid, accumulate);
}

// I8 codes, one scale per row: the whole k range in int32, scaled once.
struct KernelI8 {
  static constexpr bool kWidens = false;
  static constexpr int kMaxRows = kTileRegs >= 32 ? kFloatTileRows : 2;
  static constexpr int Panels(int MR) { return FloatTilePanels(MR); }
  const Int8Rows& x;
  const uint8_t* codes;
  const float* scales;
  const int32_t* sums;  // per stored row
  int64_t kq;
  bool accumulate;

  template <int MR, int NP>
  void Tile(int64_t m0, int64_t panel, float* y, int64_t ldy, int64_t valid) const {
    I16 acc[MR][NP][2];
    for (int m = 0; m < MR; ++m)
      for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = SetI(0);
    for (int64_t q = 0; q < kq; ++q) {
      B64 lo[NP], hi[NP];
      for (int p = 0; p < NP; ++p) {
        const uint8_t* c = codes + ((panel + p) * kq + q) * 128;
        const uint8_t* ahead = c + TileAhead<MR>(kAheadBytes, kFarAheadBytes);
        Prefetch(ahead);
        Prefetch(ahead + 64);
        lo[p] = LoadB64(c);
        hi[p] = LoadB64(c + 64);
      }
      for (int m = 0; m < MR; ++m) {
        const int32_t xq = Quad(x.q + (m0 + m) * x.kp + 4 * q), xu = Quad(x.u + (m0 + m) * x.kp + 4 * q);
        for (int p = 0; p < NP; ++p) {
          acc[m][p][0] = DotI8(acc[m][p][0], lo[p], xq, xu);
          acc[m][p][1] = DotI8(acc[m][p][1], hi[p], xq, xu);
        }
      }
    }
    for (int p = 0; p < NP; ++p)
      for (int h = 0; h < 2; ++h) {
        const int64_t col = p * P + h * 16;
        if (col >= valid) continue;
        const int64_t row = (panel + p) * P + h * 16;
        const I16 offset = kI8Offset ? ShlI<7>(LoadI32(sums + row)) : SetI(0);  // 128 · Σ w
        const V16 sw = Load(scales + row);
        for (int m = 0; m < MR; ++m)
          StoreI8Sums(acc[m][p][h], offset, x.scale[m0 + m], sw, y + m * ldy + col, valid - col, accumulate);
      }
  }

};

// U4 codes in groups along k: int32 per group, folded into float with the group's scales.
struct KernelU4 {
  static constexpr bool kWidens = false;
  static constexpr int kMaxRows = kTileRegs >= 32 ? 6 : 2;
  static constexpr int Panels(int MR) {
    if (kTileRegs >= 32) return MR == 1 ? 4 : MR <= 3 ? 2 : 1;
    return MR == 1 ? 2 : 1;
  }
  const Int8Rows& x;
  const uint8_t* codes;
  const uint8_t* scales;
  const uint8_t* zeros;  // per panel and group, the zero points of its rows; null: 8 (symmetric)
  DType scale_dtype;
  int64_t kq, groups, group;
  bool accumulate;

  V16 Scales(int64_t at) const {
    return scale_dtype == DType::kF32 ? Load(reinterpret_cast<const float*>(scales) + at)
                                      : LoadBf16(reinterpret_cast<const uint16_t*>(scales) + at);
  }

  // DotU4 over quads [q_begin, q_end) of NP panels from zero, left in its sum form in `sums`.
  template <int MR, int NP>
  inline void Quads(int64_t m0, int64_t panel, int64_t q_begin, int64_t q_end, I16 (&sums)[MR][NP][2]) const {
    for (int m = 0; m < MR; ++m)
      for (int p = 0; p < NP; ++p) sums[m][p][0] = sums[m][p][1] = SetI(0);
    for (int64_t q = q_begin; q < q_end; ++q) {
      B64 lo[NP], hi[NP];
      for (int p = 0; p < NP; ++p) {
        const uint8_t* c = codes + ((panel + p) * kq + q) * 64;
        Prefetch(c + kAheadBytes);
        const B64 v = LoadB64(c);
        lo[p] = NibbleLo(v);
        hi[p] = NibbleHi(v);
      }
      for (int m = 0; m < MR; ++m) {
        const int32_t xq = Quad(x.q + (m0 + m) * x.kp + 4 * q);
        for (int p = 0; p < NP; ++p) {
          sums[m][p][0] = DotU4(sums[m][p][0], lo[p], xq);
          sums[m][p][1] = DotU4(sums[m][p][1], hi[p], xq);
        }
      }
    }
  }

  // With few registers the group sums of the tile wait in memory between groups (scratch): kept in
  // registers they would push the integer accumulators of the inner loop onto the stack.
  static constexpr bool kSumsInMemory = kTileRegs < 32;

  template <int MR, int NP>
  void Tile(int64_t m0, int64_t panel, float* y, int64_t ldy, int64_t valid) const {
    V16 out[MR][NP][2];
    thread_local std::vector<float> scratch;
    float* sums = nullptr;
    if constexpr (kSumsInMemory) {
      scratch.assign(static_cast<size_t>(MR * NP * 2 * 16), 0.f);
      sums = scratch.data();
    } else {
      for (int m = 0; m < MR; ++m)
        for (int p = 0; p < NP; ++p) out[m][p][0] = out[m][p][1] = Zero();
    }
    const int64_t quads_per_group = group / 4;
    // The first kAheadBytes of each panel, which the loop's prefetches (kAheadBytes ahead of each
    // load) never ask for: a task's panels start cold (one sequence's experts, AMD Zen 5, 3
    // alternating rounds: w4a8 decode of 1, 2 and 8 sequences 2.9%, 4.3% and 2.0% faster; on the
    // AVX2 target 4.0%, 4.2% and 2.9%). The same for I8 tiles gained nothing measurable.
    for (int p = 0; p < NP; ++p)
      for (int64_t b = 0; b < kAheadBytes; b += 64) Prefetch(codes + (panel + p) * kq * 64 + b);
    // A group's sums in DotU4's form: one run of quads when the group fits the form (w4a8's groups
    // of 32 on every target), else runs of kU4PairQuads widened into int32 after each.
    const bool one_run = quads_per_group <= kU4PairQuads;
    for (int64_t g = 0; g < groups; ++g) {
      I16 acc[MR][NP][2];
      const int64_t q_end = std::min(kq, (g + 1) * quads_per_group);
      if (one_run) {
        Quads<MR, NP>(m0, panel, g * quads_per_group, q_end, acc);
        for (int m = 0; m < MR; ++m)
          for (int p = 0; p < NP; ++p)
            for (int h = 0; h < 2; ++h) acc[m][p][h] = WidenU4(acc[m][p][h]);
      } else {
        for (int m = 0; m < MR; ++m)
          for (int p = 0; p < NP; ++p) acc[m][p][0] = acc[m][p][1] = SetI(0);
        for (int64_t q0 = g * quads_per_group; q0 < q_end; q0 += kU4PairQuads) {
          I16 run[MR][NP][2];
          Quads<MR, NP>(m0, panel, q0, std::min(q_end, q0 + kU4PairQuads), run);
          for (int m = 0; m < MR; ++m)
            for (int p = 0; p < NP; ++p)
              for (int h = 0; h < 2; ++h) acc[m][p][h] = AddI(acc[m][p][h], WidenU4(run[m][p][h]));
        }
      }
      for (int p = 0; p < NP; ++p) {
        const int64_t at = ((panel + p) * groups + g) * P;
        const V16 s[2] = {Scales(at), Scales(at + 16)};
        I16 z[2] = {};
        if (zeros) z[0] = LoadU8(zeros + at), z[1] = LoadU8(zeros + at + 16);
        for (int m = 0; m < MR; ++m) {
          const int32_t sum = x.sums[(m0 + m) * x.groups + g];
          for (int h = 0; h < 2; ++h) {
            // Σ u·q − zero · Σ q, the zero point 8 without zero points.
            const I16 offset = zeros ? MulI(z[h], SetI(sum)) : SetI(8 * sum);
            const V16 term = ToFloat(SubI(acc[m][p][h], offset));
            if constexpr (kSumsInMemory) {
              float* o = sums + ((m * NP + p) * 2 + h) * 16;
              Store(o, Fma(term, s[h], Load(o)));
            } else {
              out[m][p][h] = Fma(term, s[h], out[m][p][h]);
            }
          }
        }
      }
    }
    for (int m = 0; m < MR; ++m) {
      const V16 sx = Set(x.scale[m0 + m]);
      for (int p = 0; p < NP; ++p)
        for (int h = 0; h < 2; ++h) {
          const V16 o = kSumsInMemory ? Load(sums + ((m * NP + p) * 2 + h) * 16) : out[m][p][h];
          out[m][p][h] = Mul(o, sx);
        }
    }
    StoreTile<MR, NP>(out, y, ldy, valid, accumulate);
  }

};

#if defined(LS_SIMD_IS_AVX512_AMX)
// I8 codes in AMX tiles: blocks of 32 rows × one panel (32 columns) as four int32 tiles C[i][j]
// (rows 16i.., columns 16j..), summed over k in steps of 64 by tdpbusd from two tiles of unsigned
// activation rows A[i] (x.u, 16 rows × 64 bytes) and two of codes B[j] (16 quads × 16 columns ×
// 4 bytes: the panel layout's two 64-byte runs per quad are the rows of B[0] and B[1], 128 bytes
// apart). The sums are KernelI8's (Σ u·w, exact), finished by the same float steps (StoreI8Sums).
// Ranges of fewer rows run the vector tiles: below 16 rows the AMX blocks were slower there when
// their codes stream from memory (measured at 4 to 12 rows).
constexpr int64_t kAmxMinRows = 16;
constexpr int kAmxTileRows = 16;   // rows of an A tile
constexpr int64_t kAmxQuads = 16;  // quads per tile step (64 bytes of a row)

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0-3: C[i][j] = 2i + j; 4, 5: A[0], A[1]; 6, 7: B[0], B[1]. A block's rows are r0 (≤ 16)
// in C[0][*] and A[0] and r1 in C[1][*] and A[1] (r1 = 0: those tiles unused and unconfigured).
void ConfigureTiles(int r0, int r1) {
  TileConfig c;
  for (int i = 0; i < 2; ++i) {
    const int r = i == 0 ? r0 : r1;
    if (r == 0) continue;
    c.rows[2 * i] = c.rows[2 * i + 1] = c.rows[4 + i] = static_cast<uint8_t>(r);
    c.colsb[2 * i] = c.colsb[2 * i + 1] = c.colsb[4 + i] = 64;
  }
  c.rows[6] = c.rows[7] = kAmxQuads;
  c.colsb[6] = c.colsb[7] = 64;
  _tile_loadconfig(&c);
}

// The int32 sums of rows [m0, m0 + r0 + r1) against one panel's codes into c [32][32].
template <bool kTwo>
void AmxBlock(const Int8Rows& x, int64_t m0, const uint8_t* panel, int64_t kq, int32_t* c) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kTwo) {
    _tile_zero(2);
    _tile_zero(3);
  }
  const uint8_t* a = x.u + m0 * x.kp;
  for (int64_t q = 0; q < kq; q += kAmxQuads) {
    _tile_loadd(4, a + 4 * q, x.kp);
    _tile_loadd(6, panel + q * 128, 128);
    _tile_loadd(7, panel + q * 128 + 64, 128);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    if constexpr (kTwo) {
      _tile_loadd(5, a + kAmxTileRows * x.kp + 4 * q, x.kp);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
  }
  _tile_stored(0, c, 128);
  _tile_stored(1, c + 16, 128);
  if constexpr (kTwo) {
    _tile_stored(2, c + 16 * 32, 128);
    _tile_stored(3, c + 16 * 32 + 16, 128);
  }
}

// Int8DotRange for I8 codes with kq a multiple of kAmxQuads: panels in groups that stay in L2 (as
// PanelRange), every block of 32 rows passing over a group.
void AmxI8Range(const Int8Rows& x, const uint8_t* codes, const float* scales, const int32_t* sums, int64_t kq,
                int64_t n_begin, int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  alignas(64) std::array<int32_t, 32 * 32> c;
  const int64_t group = PanelsPerGroup(kq * 128);
  const int64_t p_first = n_begin / P, p_last = (n_end + P - 1) / P;
  int configured = -1;  // r0 · 32 + r1 of the tile configuration loaded
  for (int64_t g = p_first; g < p_last; g += group) {
    const int64_t g_end = std::min(p_last, g + group);
    for (int64_t m0 = 0; m0 < x.rows; m0 += 2 * kAmxTileRows) {
      const int rows = static_cast<int>(std::min<int64_t>(2 * kAmxTileRows, x.rows - m0));
      const int r0 = std::min(rows, kAmxTileRows), r1 = rows - r0;
      if (r0 * 32 + r1 != configured) {
        ConfigureTiles(r0, r1);
        configured = r0 * 32 + r1;
      }
      for (int64_t p = g; p < g_end; ++p) {
        const uint8_t* panel = codes + p * kq * 128;
        if (r1 > 0) {
          AmxBlock<true>(x, m0, panel, kq, c.data());
        } else {
          AmxBlock<false>(x, m0, panel, kq, c.data());
        }
        float* yp = y + m0 * ldy + (p * P - n_begin);
        const int64_t valid = n_end - p * P;
        for (int h = 0; h < 2; ++h) {
          const int64_t col = h * 16;
          if (col >= valid) continue;
          const int64_t row = p * P + col;
          const I16 offset = ShlI<7>(LoadI32(sums + row));  // 128 · Σ w
          const V16 sw = Load(scales + row);
          for (int m = 0; m < rows; ++m)
            StoreI8Sums(LoadI32(c.data() + m * 32 + col), offset, x.scale[m0 + m], sw, yp + m * ldy + col, valid - col,
                        accumulate);
        }
      }
    }
  }
  _tile_release();
}
#endif

}  // namespace

void Int8DotRange(const Int8Rows& x, const Tensor& t, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
                  bool accumulate) {
  const auto* codes = static_cast<const uint8_t*>(t.data);
  const auto* scales = static_cast<const uint8_t*>(t.quant.scale);
  const int64_t kq = t.stored_cols() / 4, groups = t.scale_cols();
  if (t.dtype == DType::kI8) {
    const auto* sums = reinterpret_cast<const int32_t*>(scales + DTypeBytes(t.quant.scale_dtype, t.stored_rows() * groups));
#if defined(LS_SIMD_IS_AVX512_AMX)
    if (x.rows >= kAmxMinRows && kq % kAmxQuads == 0)
      return AmxI8Range(x, codes, reinterpret_cast<const float*>(scales), sums, kq, n_begin, n_end, y, ldy, accumulate);
#endif
    const KernelI8 k{x, codes, reinterpret_cast<const float*>(scales), sums, kq, accumulate};
    PanelRange(k, x.rows, n_begin, n_end, kq * 128, y, ldy);
  } else {
    const KernelU4 k{x,
                     codes,
                     scales,
                     static_cast<const uint8_t*>(t.quant.zero),
                     t.quant.scale_dtype,
                     kq,
                     groups,
                     t.quant.block_cols,
                     accumulate};
    PanelRange(k, x.rows, n_begin, n_end, kq * 64, y, ldy);
  }
}

LS_SIMD_END
