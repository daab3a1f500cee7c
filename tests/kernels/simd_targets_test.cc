// Every kernel of kernels/cpu/simd/kernels.def, on every SIMD target this build compiled, gives the
// portable target's bits over a spread of shapes (partial vectors, partial panels, every tile
// height) and values (zeros, subnormals, infinities and NaNs where the kernel defines them): one
// case per kernel, run through each target's own table. A target this CPU lacks is SKIPPED with
// the reason. A kernel added to kernels.def without a case here does not compile (kCases is built
// from the same list). Also: the dispatch picks each kernel from the best target within the cap,
// a cap the CPU lacks is refused, and no function compiled for a wider instruction set is
// reachable except through the dispatch (isa_linkage_test.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/bf16_dot_gemm.h"
#include "kernels/cpu/int8_dot_gemm.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/quantized_gemm.h"
#include "kernels/cpu/simd/kernel_table.h"
#include "kernels/quantized_weight.h"

namespace ls::cpu {
namespace {

// What a case's runs produced, byte for byte.
using Bytes = std::vector<unsigned char>;
void Append(Bytes* out, const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  out->insert(out->end(), b, b + n);
}
template <typename T>
void Append(Bytes* out, const std::vector<T>& v) {
  Append(out, v.data(), v.size() * sizeof(T));
}
void Append(Bytes* out, float f) { Append(out, &f, 4); }

// Normal values with a few edge values sprinkled in when `edges`.
std::vector<float> Values(size_t n, std::mt19937& rng, float scale = 1.f, bool edges = false) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  if (edges && n > 8) {
    const float special[] = {0.f, -0.f, 1e-40f, -3e-39f, 88.5f, -90.f, 40.f, -41.f, 1e30f, -1e30f};
    for (float s : special) v[rng() % n] = s;
  }
  return v;
}

struct Weight {
  std::vector<unsigned char> src, scales, zeros, packed;
  Tensor t;  // row-major
  Tensor p;  // packed
};

Weight FloatWeight(DType dt, int64_t rows, int64_t cols, std::mt19937& rng) {
  Weight w;
  const std::vector<float> v = Values(rows * cols, rng, 0.1f);
  w.src.resize(DTypeBytes(dt, rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (dt == DType::kF32) std::memcpy(&w.src[4 * i], &v[i], 4);
    const uint16_t h = dt == DType::kBF16 ? F32ToBf16(v[i]) : F32ToF16(v[i]);
    if (dt != DType::kF32) std::memcpy(&w.src[2 * i], &h, 2);
  }
  w.t = Tensor{w.src.data(), dt, rows, cols};
  return w;
}

// A quantized weight: codes, scales (with E8M0 exponents spread over 2^-87 .. 2^70) and zero points.
Weight QuantWeight(DType codes, DType scales, int32_t block_cols, bool zero, int64_t rows, int64_t cols,
                   std::mt19937& rng) {
  Weight w;
  w.src.resize(DTypeBytes(codes, rows * cols));
  for (auto& c : w.src) {
    c = static_cast<unsigned char>(rng());
    if (codes == DType::kF8E4M3 && (c & 0x7f) == 0x7f) c ^= 0x40;  // no NaN codes
  }
  const int32_t bc = static_cast<int32_t>(std::min<int64_t>(block_cols, cols));
  const int64_t groups = (cols + bc - 1) / bc;
  w.scales.resize(DTypeBytes(scales, rows * groups));
  std::uniform_real_distribution<float> u(0.005f, 0.05f);
  for (int64_t i = 0; i < rows * groups; ++i) {
    const float s = u(rng);
    if (scales == DType::kE8M0) {
      w.scales[i] = static_cast<unsigned char>(std::array<int, 3>{40, 118, 197}[rng() % 3] + rng() % 6);
    } else if (scales == DType::kF32) {
      std::memcpy(&w.scales[4 * i], &s, 4);
    } else {
      const uint16_t h = F32ToBf16(s);
      std::memcpy(&w.scales[2 * i], &h, 2);
    }
  }
  if (zero) {
    w.zeros.resize(rows * groups);
    for (auto& z : w.zeros) z = static_cast<unsigned char>(rng() % 16);
  }
  w.t = Tensor{w.src.data(), codes, rows, cols, Layout::kRowMajor,
               QuantScales{w.scales.data(), zero ? w.zeros.data() : nullptr, scales, 1, bc}};
  return w;
}

void Pack(Weight* w) {
  w->packed.resize(PackedWeightBytes(w->t) + 64);
  auto* dst = w->packed.data() + (64 - reinterpret_cast<uintptr_t>(w->packed.data()) % 64) % 64;
  w->p = PackWeight(w->t, dst);
}

// Output columns [n0, n1) of M rows, into y and (accumulating) into a copy started at 0.5.
void GemmOutputs(const std::function<void(float*, int64_t, bool)>& run, int64_t M, int64_t cols, Bytes* out) {
  std::vector<float> y(M * cols, -7.f), acc(M * cols, 0.5f);
  run(y.data(), cols, false);
  run(acc.data(), cols, true);
  Append(out, y);
  Append(out, acc);
}

// Rows of every tile form: 1-5 (the tiles), 8 and more (widened weights on targets with 16 vector
// registers, in tiles of 4-6 rows: 8 = 4 + 4, 13 = 5 + 4 + 4, 30 = 5 × 6, 32 = 6 + 6 + 5 + 5 + 5 + 5).
constexpr int64_t kRows[] = {1, 2, 3, 5, 8, 12, 13, 30, 32};

void RunPackedGemmRange(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(1);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t K : {1, 17, 100})
      for (int64_t M : kRows) {
        Weight w = FloatWeight(dt, 150, K, rng);
        Pack(&w);
        const std::vector<float> x = Values(M * K, rng);
        // Columns [32, 150): a panel boundary to the inside of the last panel.
        GemmOutputs([&](float* y, int64_t ld, bool a) { k.PackedGemmRange(x.data(), K, M, w.p, 32, 150, y, ld, a); },
                    M, 118, out);
      }
}

void RunQuantizedGemmRange(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(2);
  // odd_scales: float32 scales above 2^125, whose −8·s overflows (AVX2's symmetric U4 tiles take
  // the table for their group), subnormal and negative, among the usual ones.
  struct F {
    DType codes, scales;
    int32_t block;
    bool zero, odd_scales = false;
  };
  const F formats[] = {{DType::kI8, DType::kF32, 1 << 20, false}, {DType::kI8, DType::kF32, 32, false},
                       {DType::kF8E4M3, DType::kF32, 128, false}, {DType::kU4, DType::kF32, 32, false},
                       {DType::kU4, DType::kF32, 16, true},       {DType::kU4, DType::kBF16, 32, false},
                       {DType::kU4, DType::kBF16, 32, true},      {DType::kE2M1, DType::kE8M0, 32, false},
                       {DType::kU4, DType::kF32, 32, false, true}};
  for (const F& f : formats)
    for (int64_t M : {1, 3, 7, 13}) {
      const int64_t K = 96;
      Weight w = QuantWeight(f.codes, f.scales, f.block, f.zero, 70, K, rng);
      if (f.odd_scales)
        for (size_t i = 0; i < w.scales.size() / 4; ++i) {
          const float odd[3] = {5e37f, 1e-39f, -0.03f};
          if (i % 7 < 3) std::memcpy(&w.scales[4 * i], &odd[i % 7], 4);
        }
      Pack(&w);
      const std::vector<float> x = Values(M * K, rng);
      GemmOutputs([&](float* y, int64_t ld, bool a) { k.QuantizedGemmRange(x.data(), K, M, w.p, 0, 70, y, ld, a); }, M,
                  70, out);
    }
}

void RunRowMajorGemmRange(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(3);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t K : {1, 15, 77})
      for (int64_t M : {1, 2, 5, 9}) {
        Weight w = FloatWeight(dt, 21, K, rng);
        const std::vector<float> x = Values(M * K, rng);
        GemmOutputs([&](float* y, int64_t ld, bool a) { k.RowMajorGemmRange(x.data(), K, M, w.t, 5, 16, y, ld, a); },
                    M, 11, out);
      }
}

// Rows with a NaN, an infinity and exact halves (the int8 rounding's edge cases).
std::vector<float> RoundingRows(int64_t K, std::mt19937& rng) {
  std::vector<float> x = Values(4 * K, rng, 3.f);
  x[1 * K + K / 2] = std::nanf("");
  x[2 * K] = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < K; ++i) x[3 * K + i] = 0.5f * (i % 5) - 1.f;
  return x;
}

void RunRowAbsMax(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(4);
  for (int64_t K : {1, 7, 16, 31, 100}) {
    const std::vector<float> x = RoundingRows(K, rng);
    for (int m = 0; m < 4; ++m) Append(out, k.RowAbsMax(x.data() + m * K, K));
  }
}

void RunRoundRowInt8(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(5);
  for (int64_t K : {1, 7, 16, 31, 100})
    for (int64_t group : {0, 16, 32}) {
      const std::vector<float> x = RoundingRows(K, rng);
      for (int m = 0; m < 4; ++m) {
        const float amax = k.RowAbsMax(x.data() + m * K, K);
        std::vector<int8_t> q(K + 3, 0);
        std::vector<uint8_t> u(K + 3, 128);
        std::vector<int32_t> sums(group ? (K + group - 1) / group : 0, 0);
        k.RoundRowInt8(x.data() + m * K, K, amax > 0.f ? 127.f / amax : 0.f, group, q.data(), u.data(), sums.data());
        Append(out, q);
        Append(out, u);
        Append(out, sums);
      }
    }
}

void RunInt8DotRange(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(6);
  // U4 in groups of 32 and of 128 (whose sums some targets widen in runs along the group), and with
  // zero points. I8 with k a multiple of 64 too, over ranges of 16 rows and more (AMX tiles: full
  // and partial blocks of 32 rows), from column 0 and from a panel boundary.
  struct Shape {
    DType codes;
    int32_t group;
    int64_t K;
    bool zero;
  };
  for (const Shape& s :
       {Shape{DType::kI8, 1 << 20, 100, false}, Shape{DType::kI8, 1 << 20, 192, false},
        Shape{DType::kU4, 32, 100, false}, Shape{DType::kU4, 128, 100, false}, Shape{DType::kU4, 32, 100, true}})
    for (int64_t M : {1, 2, 3, 5, 12, 13, 16, 30, 45, 64})
      for (int64_t n_begin : {0, 32}) {
        Weight w = QuantWeight(s.codes, DType::kF32, s.group, s.zero, 75, s.K, rng);
        w.t.quant.int8_activations = true;
        Pack(&w);
        const std::vector<float> x = Values(M * s.K, rng);
        Int8RowsStorage st;
        const Int8Rows rows = QuantizeRows(x.data(), s.K, M, w.p, &st);
        GemmOutputs([&](float* y, int64_t ld, bool a) { k.Int8DotRange(rows, w.p, n_begin, 75, y, ld, a); }, M,
                    75 - n_begin, out);
      }
}

void RunBf16DotRange(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(7);
  for (int64_t K : {1, 7, 64, 130})
    for (int64_t M : kRows) {
      Weight w = FloatWeight(DType::kBF16, 45, K, rng);
      auto* src = reinterpret_cast<uint16_t*>(w.src.data());
      src[0] = 0x0001;  // a subnormal weight
      std::vector<unsigned char> buf(Bf16DotPackedBytes(w.t));
      const Tensor p = PackBf16DotWeight(w.t, buf.data());
      std::vector<float> x = Values(M * K, rng);
      x[0] = 3e-39f;  // a subnormal activation
      std::vector<uint16_t> st;
      const Bf16Rows rows = RoundRowsToBf16(x.data(), K, M, K, &st);
      GemmOutputs([&](float* y, int64_t ld, bool a) { k.Bf16DotRange(rows, p, 0, 45, y, ld, a); }, M, 45, out);
    }
}

// Bf16DotRange over rows that carry their swapped float32 form where the target reads it
// (Bf16DotReadsSwappedRows): the same bits as the portable kernel, which never reads it.
void RunBf16DotReadsSwappedRows(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(17);
  for (int64_t K : {2, 64, 130, 300})
    for (int64_t M : kRows) {
      Weight w = FloatWeight(DType::kBF16, 70, K, rng);
      std::vector<unsigned char> buf(Bf16DotPackedBytes(w.t));
      const Tensor p = PackBf16DotWeight(w.t, buf.data());
      std::vector<float> x = Values(M * K, rng);
      std::vector<uint16_t> st;
      Bf16Rows rows = RoundRowsToBf16(x.data(), K, M, K, &st);
      std::vector<float> swapped(static_cast<size_t>(M * rows.kp));
      if (k.Bf16DotReadsSwappedRows(M)) {
        SwapPairsToF32(rows.v, M * rows.kp, swapped.data());
        rows.swapped = swapped.data();
      }
      // Columns [32, 70): a range that starts at the second panel.
      GemmOutputs([&](float* y, int64_t ld, bool a) { k.Bf16DotRange(rows, p, 32, 70, y, ld, a); }, M, 38, out);
    }
}

constexpr int64_t kWidths[] = {1, 5, 16, 17, 64, 100, 1031};

void RunSigmoidRow(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(8);
  for (int64_t n : kWidths) {
    const std::vector<float> x = Values(n, rng, 8.f, true);
    std::vector<float> o(n + 1, 9.f);
    k.SigmoidRow(x.data(), o.data(), n);
    Append(out, o);
  }
}

void RunSiluRow(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(9);
  for (int64_t n : kWidths) {
    const std::vector<float> x = Values(n, rng, 8.f, true);
    std::vector<float> o(n + 1, 9.f);
    k.SiluRow(x.data(), o.data(), n);
    Append(out, o);
  }
}

void RunGluRow(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(10);
  for (GluAct act : {GluAct(Activation::kSiTU), GluAct(Activation::kSiLU), GluAct(Activation::kSiTU, 2.f, 0.f),
                     GluAct(Activation::kSiTU, 1.5f, 3.f)})
    for (int64_t n : kWidths) {
      const std::vector<float> g = Values(n, rng, 8.f, true), u = Values(n, rng, 4.f, true);
      std::vector<float> o(n + 1, 9.f);
      k.GluRow(act, g.data(), u.data(), o.data(), n);
      Append(out, o);
    }
}

void RunDot(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(11);
  for (int64_t n : kWidths) {
    const std::vector<float> a = Values(n, rng), b = Values(n, rng);
    Append(out, k.Dot(a.data(), b.data(), n));
  }
}

void RunAxpy(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(12);
  for (int64_t n : kWidths) {
    const std::vector<float> x = Values(n, rng);
    std::vector<float> y = Values(n + 1, rng);
    k.Axpy(0.37f, x.data(), y.data(), n);
    Append(out, y);
  }
}

void RunRmsNormRow(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(13);
  for (int64_t n : kWidths) {
    const std::vector<float> x = Values(n, rng, 2.f), w = Values(n, rng);
    std::vector<float> o(n + 1, 9.f);
    k.RmsNormRow(x.data(), w.data(), n, 1e-6f, o.data());
    Append(out, o);
  }
}

void RunExpRow(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(14);
  for (int64_t n : kWidths) {
    const std::vector<float> x = Values(n, rng, 30.f, true);
    std::vector<float> o(n + 1, 9.f);
    Append(out, k.ExpRow(x.data(), 1.5f, o.data(), n));
    Append(out, o);
  }
}

void RunAttend(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(15);
  for (bool bf16 : {false, true})
    for (int32_t hd : {16, 24, 64, 72, 128, 256, 288})
      for (int32_t group : {1, 2, 3, 4})
        for (int32_t ctx : {1, 5, 37})
          // One token (with a sliding window from ctx 5 when it serves KV head 1 alone) or a tile,
          // for KV head 1 or both KV heads.
          for (int32_t tokens : {1, 3})
            for (int32_t served : {1, 2}) {
              const int32_t block = 8, span = ctx + tokens - 1, blocks = (span + block - 1) / block + 1, kvh = 2;
              const int32_t heads = served * group;
              const int64_t stride = int64_t{kvh} * hd;
              const std::vector<float> kf = Values(int64_t{blocks} * block * stride, rng);
              const std::vector<float> vf = Values(kf.size(), rng);
              std::vector<uint16_t> kb(kf.size()), vb(vf.size());
              for (size_t i = 0; i < kf.size(); ++i) kb[i] = F32ToBf16(kf[i]), vb[i] = F32ToBf16(vf[i]);
              std::vector<int32_t> table(blocks);
              for (int32_t b = 0; b < blocks; ++b) table[b] = blocks - 1 - b;
              const int64_t token_stride = int64_t{heads} * hd + 3;  // other heads between tokens
              const std::vector<float> q = Values(tokens * token_stride, rng);
              std::vector<float> scratch(internal::AttendArgs::ScratchFloats(tokens, heads, hd, span));
              std::vector<float> o(tokens * token_stride + 1, 9.f);
              const int64_t first_head = served == 1 ? hd : 0;
              internal::AttendArgs a;
              a.q = q.data();
              a.k = bf16 ? static_cast<const void*>(kb.data() + first_head) : kf.data() + first_head;
              a.v = bf16 ? static_cast<const void*>(vb.data() + first_head) : vf.data() + first_head;
              a.bf16 = bf16;
              a.block_table = table.data();
              a.block_size = block;
              a.position_stride = stride;
              a.group = group;
              a.kv_heads = served;
              a.head_dim = hd;
              a.ctx = ctx;
              a.first = tokens == 1 && served == 1 && ctx > 4 ? 2 : 0;
              a.tokens = tokens;
              a.token_stride = token_stride;
              a.scale = 0.125f;
              a.scores = scratch.data();
              a.sums = a.scores + int64_t{tokens} * heads * span;
              a.acc = a.sums + int64_t{tokens} * heads;
              a.out = o.data();
              k.Attend(a);
              Append(out, o);
            }
}

// Latent rows of na + nb values (each part on its own, out of order) for the latent kernels.
struct LatentCase {
  std::vector<float> f;
  std::vector<uint16_t> b;
  std::vector<const void*> a_rows, b_rows;
  internal::LatentRows rows;
};
LatentCase MakeLatentRows(bool bf16, int32_t na, int32_t nb, int32_t n, std::mt19937& rng) {
  LatentCase c;
  c.f = Values(static_cast<size_t>(n) * (na + nb) + 1, rng);
  c.b.resize(c.f.size());
  for (size_t i = 0; i < c.f.size(); ++i) c.b[i] = F32ToBf16(c.f[i]);
  c.a_rows.resize(n);
  c.b_rows.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    const size_t off = static_cast<size_t>(n - 1 - i) * (na + nb);
    c.a_rows[i] = bf16 ? static_cast<const void*>(c.b.data() + off) : c.f.data() + off;
    c.b_rows[i] = bf16 ? static_cast<const void*>(c.b.data() + off + na) : c.f.data() + off + na;
  }
  c.rows = internal::LatentRows{c.a_rows.data(), c.b_rows.data(), n, na, nb, bf16};
  return c;
}
constexpr std::pair<int32_t, int32_t> kLatentParts[] = {{64, 16}, {40, 8}, {96, 0}, {13, 3}};

void RunLatentScores(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(16);
  for (bool bf16 : {false, true})
    for (const auto& [na, nb] : kLatentParts)
      for (int32_t group : {1, 3, 4, 5, 8})
        for (int32_t n : {0, 1, 7, 37}) {
          const LatentCase c = MakeLatentRows(bf16, na, nb, n, rng);
          const std::vector<float> q = Values(static_cast<size_t>(group) * (na + nb), rng, 2.f);
          const float* qa[internal::kLatentGroup];
          const float* qb[internal::kLatentGroup];
          for (int32_t g = 0; g < group; ++g) qa[g] = q.data() + g * (na + nb), qb[g] = qa[g] + na;
          std::vector<float> s(static_cast<size_t>(group) * (n + 3), 9.f);
          k.LatentScores(qa, qb, group, c.rows, 0.3f, s.data(), n + 3);
          Append(out, s);
        }
}

void RunLatentValues(const KernelTable& k, Bytes* out) {
  std::mt19937 rng(17);
  for (bool bf16 : {false, true})
    for (const auto& [na, nb] : kLatentParts)
      for (int32_t group : {1, 3, 8})
        for (int32_t n : {0, 1, 7, 150})
          for (int variant = 0; variant < 3; ++variant) {
            const LatentCase c = MakeLatentRows(bf16, na, nb, n, rng);
            const std::vector<float> w = Values(static_cast<size_t>(group) * (n + 3), rng);
            std::vector<float> o = Values(static_cast<size_t>(group) * na, rng), init(group), post(group);
            for (int32_t g = 0; g < group; ++g) init[g] = 0.5f + 0.1f * g, post[g] = 1.f / (1.f + g);
            float* outs[internal::kLatentGroup];
            for (int32_t g = 0; g < group; ++g) outs[g] = o.data() + g * na;
            k.LatentValues(w.data(), n + 3, group, c.rows, outs, variant == 1 ? init.data() : nullptr,
                           variant != 0 ? post.data() : nullptr);
            Append(out, o);
          }
}

struct Case {
  const char* kernel;
  void (*run)(const KernelTable&, Bytes*);
  bool (*present)(const KernelTable&);
};
const Case kCases[] = {
#define LS_KERNEL(family, name, ret, params) {#name, &Run##name, [](const KernelTable& t) { return t.name != nullptr; }},
#include "kernels/cpu/simd/kernels.def"
#undef LS_KERNEL
};

struct Param {
  SimdTarget target;
  const Case* c;
};

void PrintTo(const Param& p, std::ostream* os) { *os << SimdTargetName(p.target) << " " << p.c->kernel; }

class SimdTargets : public ::testing::TestWithParam<Param> {};

TEST_P(SimdTargets, GiveThePortableBits) {
  const auto [target, c] = GetParam();
  const std::string name(SimdTargetName(target));
  if (!CpuSupports(target)) GTEST_SKIP() << "this CPU does not run " << name;
  const KernelTable* t = TargetKernels(target);
  ASSERT_NE(t, nullptr);
  Bytes want, got;
  c->run(*TargetKernels(SimdTarget::kPortable), &want);
  c->run(*t, &got);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); i += 4) {
    float a, b;
    std::memcpy(&a, &want[i], 4);
    std::memcpy(&b, &got[i], 4);
    ASSERT_EQ(std::memcmp(&want[i], &got[i], std::min<size_t>(4, want.size() - i)), 0)
        << c->kernel << " on " << name << ": first difference at byte " << i << " (as float32: " << a << " vs " << b
        << ")";
  }
}

std::vector<Param> AllParams() {
  std::vector<Param> out;
  for (SimdTarget t : CompiledTargets())
    if (t != SimdTarget::kPortable)
      for (const Case& c : kCases)
        if (c.present(*TargetKernels(t))) out.push_back({t, &c});  // the kernels of the target's families
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryKernel, SimdTargets, ::testing::ValuesIn(AllParams()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(SimdTargetName(info.param.target)) + "_" + info.param.c->kernel;
                         });

// The portable target compiles every kernel; the others fill in only their families.
TEST(SimdTables, PortableHasEveryKernel) {
  const KernelTable& p = *TargetKernels(SimdTarget::kPortable);
  for (const Case& c : kCases) EXPECT_TRUE(c.present(p)) << c.kernel;
}

// Each capped table takes every kernel from the best target within the cap; the portable cap
// takes everything portable; a cap the CPU cannot run changes nothing.
TEST(SimdTables, TheCapChoosesTheBestTargetBelowIt) {
  const SimdTarget before = SimdCap();
  for (SimdTarget cap : CompiledTargets()) {
    if (!CpuSupports(cap)) {
      const SimdTarget current = SimdCap();  // an earlier cap of this loop, or the one before it
      EXPECT_FALSE(SetSimdCap(cap)) << SimdTargetName(cap);
      EXPECT_EQ(SimdCap(), current);
      continue;
    }
    ASSERT_TRUE(SetSimdCap(cap));
    const KernelTable& active = ActiveKernels();
    int i = 0;
#define LS_KERNEL(family, name, ret, params)                                                              \
  {                                                                                                       \
    SimdTarget want = SimdTarget::kPortable;                                                              \
    for (SimdTarget t : CompiledTargets())                                                                \
      if (CpuSupports(t) && WithinCap(t, cap) && TargetKernels(t)->name) want = t;                        \
    EXPECT_EQ(active.name, TargetKernels(want)->name) << #name << " under cap " << SimdTargetName(cap);   \
    ++i;                                                                                                  \
  }
#include "kernels/cpu/simd/kernels.def"
#undef LS_KERNEL
    EXPECT_EQ(i, static_cast<int>(std::size(kCases)));
  }
  ASSERT_TRUE(SetSimdCap(SimdTarget::kPortable));
  EXPECT_EQ(ActiveIsaName(), "portable");
  ASSERT_TRUE(SetSimdCap(before));
}

// Caps stand for real CPUs: avx512 has neither VNNI, avx512_vnni has AVX512-VNNI but not AVX-VNNI.
TEST(SimdTables, CapsFollowTheCpusTheyStandFor) {
  EXPECT_TRUE(WithinCap(SimdTarget::kPortable, SimdTarget::kAvx2));
  EXPECT_TRUE(WithinCap(SimdTarget::kAvx2, SimdTarget::kAvx512));
  EXPECT_FALSE(WithinCap(SimdTarget::kAvx2Vnni, SimdTarget::kAvx512));
  EXPECT_FALSE(WithinCap(SimdTarget::kAvx2Vnni, SimdTarget::kAvx512Vnni));
  EXPECT_TRUE(WithinCap(SimdTarget::kAvx512Vnni, SimdTarget::kAvx512Bf16));
  EXPECT_FALSE(WithinCap(SimdTarget::kAvx512, SimdTarget::kAvx2Vnni));
  EXPECT_FALSE(WithinCap(SimdTarget::kNeon, SimdTarget::kAvx512Bf16));
  EXPECT_TRUE(WithinCap(SimdTarget::kNeon, SimdTarget::kNeonDot));
  // avx512_amx stands for Sapphire Rapids and later: AVX512-VNNI and AVX512-BF16 below it.
  EXPECT_TRUE(WithinCap(SimdTarget::kAvx512Vnni, SimdTarget::kAvx512Amx));
  EXPECT_TRUE(WithinCap(SimdTarget::kAvx512Bf16, SimdTarget::kAvx512Amx));
  EXPECT_FALSE(WithinCap(SimdTarget::kAvx512Amx, SimdTarget::kAvx512Bf16));
  EXPECT_FALSE(WithinCap(SimdTarget::kNeonDot, SimdTarget::kAvx512Amx));
  for (int i = 0; i < kNumSimdTargets; ++i) {
    const auto t = static_cast<SimdTarget>(i);
    EXPECT_EQ(ParseSimdTarget(SimdTargetName(t)), t);
  }
  EXPECT_FALSE(ParseSimdTarget("avx3").has_value());
}

}  // namespace
}  // namespace ls::cpu
