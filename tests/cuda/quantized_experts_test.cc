// The routed experts' quantized weights read as codes by the grouped GEMMs (kernels/cuda/grouped_gemm.h),
// in every format the CUDA backend keeps so (MXFP4; INT4 with BF16, F32 or F16 scales, with and
// without zero points; FP8 e4m3 with F32 or BF16 block scales; groups that split 8-element chunks,
// partial edge blocks, rows whose width is not a multiple of 8): the routed experts over the
// codes equal, bit for bit, the same op over the BF16 that dequantizing at load gives; every code
// widens to exactly F32ToBf16(WeightValue) (kernels/quantized_weight.h); and the device copy holds
// the codes, scales and zero points only. Reports SKIPPED without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/quantized_weight.h"
#include "tests/cuda/cuda_test_util.h"

namespace ls {
namespace {

// A quantized weight format as the loader produces it.
struct Format {
  const char* name;
  DType codes;
  DType scale_dtype;
  int32_t block_rows, block_cols;
  bool zeros;
};

const Format kFormats[] = {
    {"mxfp4", DType::kE2M1, DType::kE8M0, 1, 32, false},
    {"int4_bf16", DType::kU4, DType::kBF16, 1, 32, false},
    {"int4_f32_zero", DType::kU4, DType::kF32, 1, 16, true},
    {"int4_f16_group12", DType::kU4, DType::kF16, 1, 12, true},  // groups split chunks
    {"fp8_f32_block128", DType::kF8E4M3, DType::kF32, 128, 128, false},
    {"fp8_bf16_block32", DType::kF8E4M3, DType::kBF16, 32, 32, false},
    {"fp8_f32_block8x24", DType::kF8E4M3, DType::kF32, 8, 24, false},
};

// A random quantized matrix [rows, cols] in host memory.
struct HostWeight {
  std::vector<uint8_t> codes, scales, zeros;
  Tensor t;
};

// Codes uniform over their range (FP8 without NaN codes), zero points uniform, float scales
// positive and not powers of two. E8M0 scales near 2^0 (2^-8 .. 2^2), and with `extreme` one in
// eight 2^-127 or 2^-126 (float32 subnormal or smallest normal products).
void MakeWeight(const Format& f, int64_t rows, int64_t cols, bool extreme, std::mt19937& rng, HostWeight* w) {
  const int64_t grid_rows = (rows + f.block_rows - 1) / f.block_rows;
  const int64_t grid_cols = (cols + f.block_cols - 1) / f.block_cols, blocks = grid_rows * grid_cols;
  std::uniform_int_distribution<int> byte(0, 255);
  w->codes.resize(DTypeBytes(f.codes, rows * cols));
  for (uint8_t& b : w->codes) {
    do {
      b = static_cast<uint8_t>(byte(rng));
    } while (f.codes == DType::kF8E4M3 && (b & 0x7f) == 0x7f);
  }
  w->scales.resize(DTypeBytes(f.scale_dtype, blocks));
  std::uniform_real_distribution<float> scale(0.01f, 0.2f);
  std::uniform_int_distribution<int> exponent(127 - 8, 127 + 2), rare(0, 7);
  for (int64_t i = 0; i < blocks; ++i) {
    const float s = scale(rng);
    switch (f.scale_dtype) {
      case DType::kE8M0:
        w->scales[i] = static_cast<uint8_t>(extreme && rare(rng) == 0 ? rare(rng) % 2 : exponent(rng));
        break;
      case DType::kF32:
        std::memcpy(&w->scales[4 * i], &s, 4);
        break;
      default: {
        const uint16_t h = f.scale_dtype == DType::kBF16 ? F32ToBf16(s) : F32ToF16(s);
        std::memcpy(&w->scales[2 * i], &h, 2);
      }
    }
  }
  if (f.zeros) {
    w->zeros.resize(static_cast<size_t>(blocks));
    std::uniform_int_distribution<int> zero(0, 15);
    for (uint8_t& z : w->zeros) z = static_cast<uint8_t>(zero(rng));
  }
  w->t = Tensor{w->codes.data(), f.codes, rows, cols};
  w->t.quant =
      QuantScales{w->scales.data(), f.zeros ? w->zeros.data() : nullptr, f.scale_dtype, f.block_rows, f.block_cols};
}

struct Shape {
  int64_t T, din, f, dout;
  int32_t K, N;
};

// One expert array's quantized weights, prepared on the device twice: as codes (kMatmulExpert)
// and dequantized to BF16 at load (kMatmul).
struct Experts {
  std::vector<HostWeight> host;           // [3N]: gate, up, down per expert
  std::vector<Tensor> gate, up, down;     // codes on the device
  std::vector<Tensor> bgate, bup, bdown;  // BF16 on the device
  std::vector<void*> memory;
};

void MakeExperts(const Format& f, const Shape& s, bool extreme, std::mt19937& rng, CudaBackend& gpu, Experts* x) {
  x->host.resize(3 * s.N);
  for (int32_t e = 0; e < s.N; ++e) {
    MakeWeight(f, s.f, s.din, extreme, rng, &x->host[3 * e]);
    MakeWeight(f, s.f, s.din, extreme, rng, &x->host[3 * e + 1]);
    MakeWeight(f, s.dout, s.f, extreme, rng, &x->host[3 * e + 2]);
  }
  for (int32_t e = 0; e < s.N; ++e) {
    for (int m = 0; m < 3; ++m) {
      const Tensor& t = x->host[3 * e + m].t;
      const size_t bf16 = gpu.PreparedWeightBytes(t, WeightUse::kMatmul);
      const size_t packed = gpu.PreparedWeightBytes(t, WeightUse::kMatmulExpert);
      EXPECT_EQ(bf16, static_cast<size_t>(t.numel()) * 2);
      EXPECT_EQ(packed, Align64(t.bytes()) + Align64(t.scale_bytes()) + t.zero_bytes()) << f.name;
      void* pm = gpu.Allocate(packed);
      void* bm = gpu.Allocate(bf16);
      x->memory.insert(x->memory.end(), {pm, bm});
      const Tensor pt = gpu.PrepareWeight(t, WeightUse::kMatmulExpert, pm);
      EXPECT_EQ(pt.dtype, f.codes);
      EXPECT_TRUE(pt.quantized());
      EXPECT_EQ(pt.data, pm);
      const Tensor bt = gpu.PrepareWeight(t, WeightUse::kMatmul, bm);
      EXPECT_EQ(bt.dtype, DType::kBF16);
      (m == 0 ? x->gate : m == 1 ? x->up : x->down).push_back(pt);
      (m == 0 ? x->bgate : m == 1 ? x->bup : x->bdown).push_back(bt);
    }
  }
}

void FreeExperts(CudaBackend& gpu, Experts& x) {
  for (void* p : x.memory) gpu.Free(p);
}

// The routed experts' output over the given weights, as raw bits.
std::vector<float> RunMoe(CudaBackend& gpu, const Shape& s, const std::vector<float>& z,
                          const std::vector<int32_t>& ids, const std::vector<float>& w, const Tensor* gate,
                          const Tensor* up, const Tensor* down) {
  cuda_test::DeviceArray<float> dz(z), dw(w), dout(s.T * s.dout);
  cuda_test::DeviceArray<int32_t> dids(ids);
  dout.Poison();
  MoeParams p;
  p.z = dz.get();
  p.num_tokens = s.T;
  p.in_width = s.din;
  p.out_width = s.dout;
  p.topk_ids = dids.get();
  p.topk_weights = dw.get();
  p.top_k = s.K;
  p.num_experts = s.N;
  p.gate = gate;
  p.up = up;
  p.down = down;
  p.act = Activation::kSiLU;
  p.out = dout.get();
  gpu.MoeExperts(p);
  gpu.Synchronize();
  return dout.Download();
}

// Distinct experts per token, among the first N - 1 (the last expert is never routed to).
std::vector<int32_t> Routing(const Shape& s, std::mt19937& rng) {
  std::vector<int32_t> ids(s.T * s.K), choice(s.N - 1);
  for (int64_t t = 0; t < s.T; ++t) {
    std::iota(choice.begin(), choice.end(), 0);
    std::shuffle(choice.begin(), choice.end(), rng);
    std::copy_n(choice.begin(), s.K, ids.begin() + t * s.K);
  }
  return ids;
}

TEST(CudaQuantizedExperts, GroupedGemmsOverCodesEqualThemOverTheLoadTimeBf16BitForBit) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_NE(gpu, nullptr);
  const Shape shapes[] = {
      {100, 96, 80, 72, 3, 6},    // ~60 rows per expert: full and partial row tiles; k a multiple of 8
      {9, 36, 70, 40, 2, 4},      // k of 36 and 70: chunks past the row's end, element by element
      {300, 256, 128, 64, 2, 3},  // ~300 rows per expert: several row tiles, several K slices
  };
  std::mt19937 rng(41);
  for (const Format& f : kFormats) {
    for (const Shape& s : shapes) {
      Experts x;
      MakeExperts(f, s, /*extreme=*/true, rng, *gpu, &x);
      const std::vector<float> z = cuda_test::RandomFloats(s.T * s.din, rng);
      const std::vector<float> w = cuda_test::RandomFloats(s.T * s.K, rng, 0.5f);
      const std::vector<int32_t> ids = Routing(s, rng);
      const std::vector<float> codes = RunMoe(*gpu, s, z, ids, w, x.gate.data(), x.up.data(), x.down.data());
      const std::vector<float> bf16 = RunMoe(*gpu, s, z, ids, w, x.bgate.data(), x.bup.data(), x.bdown.data());
      ASSERT_EQ(codes.size(), bf16.size());
      size_t differ = 0, nonfinite = 0;
      for (size_t i = 0; i < codes.size(); ++i) {
        differ += std::memcmp(&codes[i], &bf16[i], sizeof(float)) != 0;
        nonfinite += !std::isfinite(bf16[i]);
      }
      EXPECT_EQ(differ, 0u) << f.name << ", T " << s.T << " din " << s.din << " f " << s.f;
      EXPECT_EQ(nonfinite, 0u) << f.name;  // the comparison is of numbers, not of NaNs
      FreeExperts(*gpu, x);
    }
  }
}

// One expert and the identity as its rows (row r of a is the unit vector e_r): y[r, n] = w[n, r],
// each the product 1 · w of exactly one nonzero term.
TEST(CudaQuantizedExperts, EveryCodeWidensToTheBf16OfItsDequantizedValue) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_NE(gpu, nullptr);
  std::mt19937 rng(42);
  for (const Format& f : kFormats) {
    const std::pair<int64_t, int64_t> shapes[] = {{70, 96}, {33, 44}, {130, 264}};  // [n, k]
    for (const auto& [n, k] : shapes) {
      HostWeight h;
      MakeWeight(f, n, k, /*extreme=*/false, rng, &h);
      void* mem = gpu->Allocate(gpu->PreparedWeightBytes(h.t, WeightUse::kMatmulExpert));
      const Tensor t = gpu->PrepareWeight(h.t, WeightUse::kMatmulExpert, mem);
      ASSERT_TRUE(t.quantized());
      cuda::ExpertWeight d;
      d.data = t.data;
      d.scale = t.quant.scale;
      d.zero = static_cast<const uint8_t*>(t.quant.zero);
      d.scale_dtype = t.quant.scale_dtype;
      d.block_rows = t.quant.block_rows;
      d.block_cols = t.quant.block_cols;
      cuda_test::DeviceArray<cuda::ExpertWeight> table(std::vector<cuda::ExpertWeight>{d});
      std::vector<uint16_t> identity(static_cast<size_t>(k * k), 0);
      for (int64_t r = 0; r < k; ++r) identity[r * k + r] = F32ToBf16(1.f);
      cuda_test::DeviceArray<uint16_t> a(identity);
      const cuda_test::DeviceExpertRows rows({static_cast<int32_t>(k)});
      cuda_test::DeviceArray<float> y(static_cast<size_t>(k * n));
      y.Poison();
      cuda::GroupedGemm(a.get(), cuda::ExpertMatrices{table.get(), f.codes}, n, k, rows.rows(), y.get(), gpu->stream());
      const std::vector<float> got = y.Download();
      size_t bad = 0;
      for (int64_t r = 0; r < k; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          const float want = Bf16ToF32(F32ToBf16(WeightValue(h.t, c, r)));
          if (got[r * n + c] == want) continue;  // −0 comes back +0: a sum of zeros
          if (bad++ < 5)
            ADD_FAILURE() << f.name << " [" << n << ", " << k << "] w[" << c << ", " << r << "]: got " << got[r * n + c]
                          << " want " << want;
        }
      }
      EXPECT_EQ(bad, 0u) << f.name;
      gpu->Free(mem);
    }
  }
}

// With packed experts off, a quantized expert weight is dequantized to BF16 at PrepareWeight as
// before; dense matmul weights are dequantized either way.
TEST(CudaQuantizedExperts, OnlyRoutedExpertsKeepTheirCodesAndOnlyWhenPacked) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = cuda_test::Gpu();
  ASSERT_NE(gpu, nullptr);
  std::mt19937 rng(43);
  HostWeight h;
  MakeWeight(kFormats[0], 64, 128, false, rng, &h);
  const size_t bf16 = static_cast<size_t>(64 * 128 * 2), packed = Align64(64 * 64) + Align64(64 * 4);
  EXPECT_EQ(gpu->PreparedWeightBytes(h.t, WeightUse::kMatmulExpert), packed);
  EXPECT_EQ(gpu->PreparedWeightBytes(h.t, WeightUse::kMatmul), bf16);
  EXPECT_EQ(gpu->PreparedWeightBytes(h.t, WeightUse::kMatmulHead), bf16);
  gpu->set_packed_experts(false);
  EXPECT_EQ(gpu->PreparedWeightBytes(h.t, WeightUse::kMatmulExpert), bf16);
  void* mem = gpu->Allocate(bf16);
  const Tensor t = gpu->PrepareWeight(h.t, WeightUse::kMatmulExpert, mem);
  EXPECT_EQ(t.dtype, DType::kBF16);
  EXPECT_FALSE(t.quantized());
  gpu->Free(mem);
  // Formats the grouped GEMMs do not read (int8 rows) are dequantized for experts too.
  gpu->set_packed_experts(true);
  const std::vector<float> v = cuda_test::RandomFloats(16 * 32, rng);
  QuantizedStorage storage;
  const Tensor i8 = Quantize(Tensor{v.data(), DType::kF32, 16, 32}, QuantScheme::kInt8, &storage);
  EXPECT_EQ(gpu->PreparedWeightBytes(i8, WeightUse::kMatmulExpert), static_cast<size_t>(16 * 32 * 2));
}

}  // namespace
}  // namespace ls
