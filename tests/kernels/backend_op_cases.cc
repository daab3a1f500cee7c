// The table-driven backend test's cases (backend_op_cases.h).
#include "tests/kernels/backend_op_cases.h"

#include <cmath>
#include <limits>

namespace ls::testing {
namespace {

// A paged cache of `blocks` blocks of `block_size` rows of `row` values of `dtype` (float32 or
// BF16), filled with normal values (the rows before a sequence's start position are its cached
// context).
void* CacheValues(Rig& r, int64_t n, DType dtype) {
  if (dtype == DType::kF32) return r.Random(n, 0.5f);
  std::vector<uint16_t> bits;
  for (float v : r.Values(n, 0.5f)) bits.push_back(F32ToBf16(v));
  return r.Put(bits);
}
KvLayer Cache(Rig& r, int32_t blocks, int32_t block_size, int64_t row, bool with_v, DType dtype = DType::kF32) {
  KvLayer c;
  c.num_blocks = blocks;
  c.block_size = block_size;
  c.dtype = dtype;
  c.k = CacheValues(r, int64_t{blocks} * block_size * row, dtype);
  if (with_v) c.v = CacheValues(r, int64_t{blocks} * block_size * row, dtype);
  return c;
}
// Appends the cache's values to the outputs, as float32.
void ReadCache(Rig& r, const KvLayer& c, int64_t row) {
  const int64_t n = int64_t{c.num_blocks} * c.block_size * row;
  for (const void* p : {static_cast<const void*>(c.k), static_cast<const void*>(c.v)}) {
    if (!p) continue;
    if (c.dtype == DType::kF32) {
      r.Read(static_cast<const float*>(p), n);
      continue;
    }
    std::vector<uint16_t> bits(static_cast<size_t>(n));
    r.be().CopyToHost(bits.data(), p, bits.size() * sizeof(uint16_t));
    for (uint16_t b : bits) r.out.push_back(Bf16ToF32(b));
  }
}
constexpr DType kCacheTypes[] = {DType::kF32, DType::kBF16};

// Two sequences over a cache of 8 blocks of 4 rows: one with 5 rows cached and 3 new tokens (a
// block boundary inside), one fresh with 6 (prefill). Block tables are host memory.
std::vector<AttentionSeq> TwoSeqs(Rig& r) {
  const int32_t* t0 = r.Host<int32_t>({5, 2, 7});
  const int32_t* t1 = r.Host<int32_t>({0, 3});
  return {AttentionSeq{0, 3, 5, t0, 3, 1}, AttentionSeq{3, 6, 0, t1, 2, 0}};
}
constexpr int32_t kSeqTokens = 9;

// The cases, one per op of kernels/ops.def; each draws its inputs, runs the op and reads back
// everything it writes.
#define LS_OP(name, params, args) void name##Case(Rig& r);
#include "kernels/ops.def"
#undef LS_OP

void EmbeddingCase(Rig& r) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    const Tensor table = r.Weight(50, 37, dt, WeightUse::kOther, 1.f);
    const int32_t* ids = r.Host<int32_t>({3, 49, 0, 3, 17});
    float* out = r.Filled(5 * 37, -1.f);
    r.be().Embedding(ids, 5, table, out);
    r.Read(out, 5 * 37);
  }
}

void RmsNormCase(Rig& r) {
  for (int64_t width : {7, 64, 300}) {
    const Tensor w = r.Weight(1, width, DType::kBF16, WeightUse::kOther, 1.f);
    float* x = r.Random(5 * width);
    float* out = r.Filled(5 * width, 0.f);
    r.be().RmsNorm(x, 5, w, 1e-6f, out);
    r.be().RmsNorm(x, 5, w, 1e-5f, x);  // in place
    r.Read(out, 5 * width);
    r.Read(x, 5 * width);
  }
}

void GemmCase(Rig& r) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t M : {1, 5, 13})
      for (bool accumulate : {false, true}) {
        const int64_t K = 96, N = 70;
        const Tensor w = r.Weight(N, K, dt, WeightUse::kMatmul);
        float* x = r.Random(M * K);
        float* y = r.Filled(M * N, 0.5f);
        r.be().Gemm(x, M, w, y, accumulate);
        r.Read(y, M * N);
      }
}

void RopeCase(Rig& r) {
  for (bool interleaved : {false, true}) {
    RopeParams p;
    p.num_heads = 3;
    p.head_dim = 16;
    p.rotary_dim = 12;
    p.interleaved = interleaved;
    std::vector<float> inv_freq(6);
    for (int i = 0; i < 6; ++i) inv_freq[i] = std::pow(10000.f, -2.f * i / 12.f);
    p.inv_freq = r.Host(inv_freq);
    p.attention_scaling = 1.1f;
    float* x = r.Random(4 * 48);
    r.be().Rope(x, 4, r.Host<int32_t>({0, 1, 7, 300}), p);
    r.Read(x, 4 * 48);
  }
}

void AddBiasCase(Rig& r) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    const Tensor bias = r.Weight(1, 33, dt, WeightUse::kOther, 1.f);
    float* y = r.Random(4 * 33);
    r.be().AddBias(y, 4, bias);
    r.Read(y, 4 * 33);
  }
}

void MulSigmoidCase(Rig& r) {
  for (int64_t gate_width : {int64_t{1}, int64_t{40}}) {
    float* x = r.Random(3 * 40);
    float* gate = r.Random(3 * gate_width, 3.f);
    r.be().MulSigmoid(x, 3, 40, gate, gate_width);
    r.Read(x, 3 * 40);
  }
}

// Head sizes 16 and 80 (on the GPU, a lane's values one by one, or BF16 pairs with a partial last).
void PagedAttentionCase(Rig& r) {
  struct Variant {
    int32_t window, hd;
  };
  for (DType dtype : kCacheTypes) {
    for (const Variant v : {Variant{0, 16}, Variant{4, 16}, Variant{0, 80}, Variant{4, 80}}) {
      const int32_t H = 4, Hkv = 2, hd = v.hd;
      const std::vector<AttentionSeq> seqs = TwoSeqs(r);
      AttentionParams p;
      p.q = r.Random(kSeqTokens * H * hd);
      p.k_new = r.Random(kSeqTokens * Hkv * hd);
      p.v_new = r.Random(kSeqTokens * Hkv * hd);
      p.out = r.Filled(kSeqTokens * H * hd, 0.f);
      p.num_heads = H;
      p.num_kv_heads = Hkv;
      p.head_dim = hd;
      p.scale = 0.25f;
      p.sliding_window = v.window;
      p.cache = Cache(r, 8, 4, Hkv * hd, true, dtype);
      p.seqs = r.Host(seqs);
      p.num_seqs = 2;
      r.be().PagedAttention(p);
      r.Read(p.out, kSeqTokens * H * hd);
      ReadCache(r, p.cache, Hkv * hd);
    }
  }
}

LatentAttentionParams LatentParams(Rig& r, const std::vector<AttentionSeq>& seqs, int64_t q_rope_stride,
                                   DType dtype = DType::kF32) {
  LatentAttentionParams p;
  p.num_heads = 3;
  p.latent_dim = 32;
  p.rope_dim = 8;
  p.q_latent = r.Random(kSeqTokens * 3 * 32);
  p.q_rope_stride = q_rope_stride;
  p.q_rope = r.Random(kSeqTokens * 3 * q_rope_stride);
  p.c_new = r.Random(kSeqTokens * 32);
  p.k_rope_new = r.Random(kSeqTokens * 8);
  p.out = r.Filled(kSeqTokens * 3 * 32, 0.f);
  p.scale = 0.2f;
  p.cache = Cache(r, 8, 4, 40, false, dtype);
  p.seqs = r.Host(seqs);
  p.num_seqs = static_cast<int32_t>(seqs.size());
  return p;
}

void PagedLatentAttentionCase(Rig& r) {
  for (DType dtype : kCacheTypes)
    for (int64_t stride : {8, 20}) {
      const LatentAttentionParams p = LatentParams(r, TwoSeqs(r), stride, dtype);
      r.be().PagedLatentAttention(p);
      r.Read(p.out, kSeqTokens * 3 * 32);
      ReadCache(r, p.cache, 40);
    }
}

void StoreLatentRowsCase(Rig& r) {
  for (DType dtype : kCacheTypes) {
    const LatentAttentionParams p = LatentParams(r, TwoSeqs(r), 8, dtype);
    r.be().StoreLatentRows(p);
    ReadCache(r, p.cache, 40);
  }
}

void LoadLatentRowsCase(Rig& r) {
  for (DType dtype : kCacheTypes) {
    const KvLayer cache = Cache(r, 8, 4, 40, false, dtype);
    const std::vector<AttentionSeq> seqs = TwoSeqs(r);
    for (auto [first, count] : {std::pair{0, 8}, std::pair{3, 2}, std::pair{7, 1}}) {
      float* out = r.Filled(count * 40, -1.f);
      r.be().LoadLatentRows(cache, 40, seqs[0], first, count, out);
      r.Read(out, count * 40);
    }
  }
}

void ExpandedLatentAttentionCase(Rig& r) {
  // Three new tokens at positions 6..8 against keys 0..8, in one tile and in two.
  const int32_t H = 2, nope = 16, rope = 8, vd = 12, T = 3, keys = 9;
  const float* q = r.Random(T * H * (nope + rope));
  const float* k_nope = r.Random(keys * H * nope);
  const float* k_rope = r.Random(keys * 10);
  const float* v = r.Random(keys * H * vd);
  for (int32_t split : {keys, 5}) {
    float* out = r.Filled(T * H * vd, 0.f);
    float* state = r.Filled(T * H * 2, 0.f);
    for (int32_t first = 0; first < keys; first += split) {
      ExpandedLatentAttentionParams p;
      p.q = q;
      p.k_nope = k_nope + int64_t{first} * H * nope;
      p.k_rope = k_rope + int64_t{first} * 10;
      p.k_rope_stride = 10;
      p.v = v + int64_t{first} * H * vd;
      p.out = out;
      p.state = state;
      p.num_heads = H;
      p.nope_dim = nope;
      p.rope_dim = rope;
      p.v_dim = vd;
      p.scale = 0.2f;
      p.seq = AttentionSeq{0, T, 6, nullptr, 0, -1};
      p.first_key = first;
      p.num_keys = std::min(split, keys - first);
      p.first_tile = first == 0;
      p.last_tile = first + split >= keys;
      r.be().ExpandedLatentAttention(p);
    }
    r.Read(out, T * H * vd);
  }
}

void ShortConvCase(Rig& r) {
  const int64_t C = 12;
  const int32_t K = 4;
  const Tensor w = r.Weight(C, K, DType::kBF16, WeightUse::kOther, 0.5f);
  ShortConvParams p;
  p.in = r.Random(kSeqTokens * C);
  p.out = r.Filled(kSeqTokens * C, 0.f);
  p.channels = C;
  p.weight = &w;
  p.kernel = K;
  p.cache.state_floats = 50;  // a slot: 14 floats of something else, then the K − 1 inputs
  p.cache.state = r.Random(2 * p.cache.state_floats);
  p.tail_offset = 14;
  const std::vector<AttentionSeq> seqs = TwoSeqs(r);
  p.seqs = r.Host(seqs);
  p.num_seqs = 2;
  r.be().ShortConv(p);
  r.Read(p.out, kSeqTokens * C);
  r.Read(p.cache.state, 2 * p.cache.state_floats);
}

void KdaAttentionCase(Rig& r) {
  for (KdaGate gate : {KdaGate::kSoftplus, KdaGate::kBoundedSigmoid})
    for (int32_t chunk : {0, 2}) {
      const int32_t H = 2, d = 8;
      KdaParams p;
      p.q = r.Random(kSeqTokens * H * d);
      p.k = r.Random(kSeqTokens * H * d);
      p.v = r.Random(kSeqTokens * H * d);
      p.graw = r.Random(kSeqTokens * H * d);
      p.beta = r.Random(kSeqTokens * H);
      p.out = r.Filled(kSeqTokens * H * d, 0.f);
      p.num_heads = H;
      p.head_dim = d;
      p.a_log = r.Weight(1, H, DType::kF32, WeightUse::kOther, 0.5f);
      p.dt_bias = r.Weight(1, H * d, DType::kBF16, WeightUse::kOther, 0.5f);
      p.gate = gate;
      p.lower_bound = -5.f;
      p.cache.state_floats = H * d * d;
      p.cache.state = r.Random(2 * p.cache.state_floats, 0.1f);
      const std::vector<AttentionSeq> seqs = TwoSeqs(r);
      p.seqs = r.Host(seqs);
      p.num_seqs = 2;
      p.chunk = chunk;
      r.be().KdaAttention(p);
      r.Read(p.out, kSeqTokens * H * d);
      r.Read(p.cache.state, 2 * p.cache.state_floats);
    }
}

void HeadGemmCase(Rig& r) {
  // Per-head rows of x (x.head = width), and one shared row (x.head = 0).
  const int32_t H = 3;
  const int64_t in = 24, outw = 10, T = 5;
  std::vector<Tensor> w;
  for (int32_t h = 0; h < H; ++h) w.push_back(r.Weight(outw, in, DType::kBF16, WeightUse::kMatmul));
  for (int64_t head_stride : {in, int64_t{0}}) {
    float* x = r.Random(T * H * in);
    float* y = r.Filled(T * H * outw, 0.f);
    r.be().HeadGemm(x, RowStrides{H * in, head_stride}, T, H, w.data(), y, RowStrides{H * outw, outw});
    r.Read(y, T * H * outw);
  }
}

void GluActivationCase(Rig& r) {
  for (GluAct act : {GluAct(Activation::kSiLU), GluAct(Activation::kSiTU), GluAct(Activation::kSiTU, 2.f, 3.f)}) {
    float* gate = r.Random(3 * 37, 2.f);
    float* up = r.Random(3 * 37, 2.f);
    float* out = r.Filled(3 * 37, 0.f);
    r.be().GluActivation(gate, up, 3, 37, act, out);
    r.Read(out, 3 * 37);
  }
}

void RouterCase(Rig& r) {
  struct Variant {
    ScoringFunc scoring;
    int32_t n_group, topk_group;
    bool bias, norm;
  };
  for (const Variant& v : {Variant{ScoringFunc::kSigmoid, 1, 1, true, true},
                           Variant{ScoringFunc::kSoftmax, 1, 1, false, false},
                           Variant{ScoringFunc::kSigmoid, 4, 2, true, true}}) {
    const int64_t T = 7;
    const int32_t N = 16, K = 3;
    RouterParams p;
    p.logits = r.Random(T * N, 2.f);
    p.bias = v.bias ? r.Random(N, 0.3f) : nullptr;
    p.num_tokens = T;
    p.num_experts = N;
    p.top_k = K;
    p.scoring = v.scoring;
    p.n_group = v.n_group;
    p.topk_group = v.topk_group;
    p.norm_topk_prob = v.norm;
    p.routed_scaling_factor = 2.5f;
    p.topk_ids = r.Put(std::vector<int32_t>(T * K, -1));
    p.topk_weights = r.Filled(T * K, 0.f);
    r.be().Router(p);
    r.Read(p.topk_ids, T * K);
    r.Read(p.topk_weights, T * K);
  }
}

void MoeExpertsCase(Rig& r) {
  const int32_t N = 4, K = 2;
  const int64_t T = 6, in = 24, f = 16, outw = 20;
  std::vector<Tensor> gate, up, down;
  for (int32_t e = 0; e < N; ++e) {
    gate.push_back(r.Weight(f, in, DType::kBF16, WeightUse::kMatmulExpert));
    up.push_back(r.Weight(f, in, DType::kBF16, WeightUse::kMatmulExpert));
    down.push_back(r.Weight(outw, f, DType::kBF16, WeightUse::kMatmulExpert));
  }
  for (GluAct act : {GluAct(Activation::kSiLU), GluAct(Activation::kSiTU, 2.f, 3.f)}) {
    std::vector<int64_t> counts(N, 0);
    MoeParams p;
    p.z = r.Random(T * in);
    p.num_tokens = T;
    p.in_width = in;
    p.out_width = outw;
    // Expert 3 gets no token.
    p.topk_ids = r.Put(std::vector<int32_t>{0, 1, 1, 2, 0, 2, 1, 0, 2, 1, 0, 2});
    p.topk_weights = r.Random(T * K, 0.5f);
    p.top_k = K;
    p.num_experts = N;
    p.gate = gate.data();
    p.up = up.data();
    p.down = down.data();
    p.act = act;
    p.out = r.Filled(T * outw, 0.f);
    p.tokens_per_expert = counts.data();
    r.be().MoeExperts(p);
    r.Read(p.out, T * outw);
    r.be().Synchronize();
    for (int64_t c : counts) r.out.push_back(static_cast<float>(c));
  }
}

void CombineExpertOutputsCase(Rig& r) {
  const int64_t T = 5, width = 19;
  const int32_t K = 3;
  const float* y = r.Random(T * K * width);
  const float* weights = r.Random(T * K);
  float* out = r.Filled(T * width, -1.f);
  r.be().CombineExpertOutputs(y, weights, T, K, width, out);
  r.Read(out, T * width);
}

void AddCase(Rig& r) {
  float* x = r.Random(101);
  r.be().Add(x, r.Random(101), 101);
  r.Read(x, 101);
}

void CopyCase(Rig& r) {
  float* dst = r.Filled(101, -1.f);
  r.be().Copy(dst, r.Random(100), 100);  // the last value stays
  r.Read(dst, 101);
}

void SetZeroCase(Rig& r) {
  float* x = r.Random(101);
  r.be().SetZero(x + 1, 99);
  r.Read(x, 101);
}

void AttnResMixCase(Rig& r) {
  for (int32_t blocks : {1, 3}) {
    const int64_t T = 4, d = 40;
    AttnResParams p;
    p.blocks = r.Random(blocks * T * d);
    p.num_blocks = blocks;
    p.last = r.Random(T * d);
    p.num_tokens = T;
    p.width = d;
    p.norm_weight = r.Weight(1, d, DType::kBF16, WeightUse::kOther, 1.f);
    p.proj_weight = r.Weight(1, d, DType::kF32, WeightUse::kOther, 1.f);
    p.out = r.Filled(T * d, 0.f);
    r.be().AttnResMix(p);
    r.Read(p.out, T * d);
  }
}

void GatherRowsCase(Rig& r) {
  const float* src = r.Random(6 * 9);
  float* dst = r.Filled(4 * 9, -1.f);
  r.be().GatherRows(src, r.Host<int64_t>({5, 0, 5, 2}), 4, 9, dst);
  r.Read(dst, 4 * 9);
}

void ScatterRowsCase(Rig& r) {
  const float* src = r.Random(3 * 9);
  float* dst = r.Filled(6 * 9, -1.f);
  r.be().ScatterRows(src, r.Host<int64_t>({4, 1, 5}), 3, 9, dst);
  r.Read(dst, 6 * 9);
}

// Columns below 499, so that an id off by one exceeds the comparison's tolerance.
void ArgmaxRowsCase(Rig& r) {
  const int64_t rows = 5, cols = 300;
  std::vector<float> v = r.Values(rows * cols, 3.f);
  v[1 * cols + 17] = v[1 * cols + 230] = 50.f;                // a tie: the first column wins
  for (int64_t c = 0; c < cols; ++c) v[2 * cols + c] = -1.f;  // all equal: column 0
  v[3 * cols + 299] = 40.f;                                   // the last column
  v[4 * cols + 0] = v[4 * cols + 7] = -std::numeric_limits<float>::infinity();
  const float* x = r.Put(v);
  int32_t* ids = r.Put(std::vector<int32_t>(rows, -1));
  float* logprob = r.Filled(rows, 1.f);
  r.be().ArgmaxRows(x, rows, cols, ids, logprob);
  r.Read(ids, rows);
  r.Read(logprob, rows);
  // Without log-probabilities, and with NaN, which never wins.
  v[0 * cols + 3] = v[0 * cols + 250] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t c = 0; c < cols; ++c) v[2 * cols + c] = std::numeric_limits<float>::quiet_NaN();
  r.be().ArgmaxRows(r.Put(v), rows, cols, ids, nullptr);
  r.Read(ids, rows);
}

}  // namespace

const std::vector<OpCase>& BackendOpCases() {
  static const std::vector<OpCase> cases = {
#define LS_OP(name, params, args) {#name, name##Case},
#include "kernels/ops.def"
#undef LS_OP
  };
  return cases;
}

Mismatch Compare(const std::vector<float>& got, const std::vector<float>& want, double tolerance) {
  Mismatch m;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    double err = std::fabs(double{got[i]} - want[i]) / (tolerance * (1.0 + std::fabs(want[i])));
    if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
    if (err > m.worst) m = {err, i};
  }
  return m;
}

}  // namespace ls::testing
