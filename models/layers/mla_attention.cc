// MlaAttention: binding (with the per-head key up-projections transposed once at load), the
// choice of form per sequence, and the absorbed and expanded forwards.
#include "models/layers/mla_attention.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/quantized_weight.h"
#include "models/layers/row_parallel.h"

namespace ls {
namespace {

// A quantized weight's values, exactly as the format defines them (float32), in `storage`, and
// their row-major view: MLA reads these projections per head, so it needs their values, not a
// GEMM over their codes. The backend stores the copy as it stores any float32 weight.
Tensor Dequantize(const Tensor& w, std::vector<float>* storage) {
  storage->resize(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) DequantizeRow(w, r, storage->data() + r * w.cols);
  return Tensor{storage->data(), DType::kF32, w.rows, w.cols};
}

}  // namespace

MlaAttention::MlaAttention(WeightBinder& b, const std::string& prefix, const ModelConfig& config)
    : c_(config.mla),
      rope_(ComputeRopeTable(c_.rope)),
      qh_(c_.qk_nope_head_dim + c_.qk_rope_head_dim),
      tensor_parallel_(config.tensor_parallel.on()) {
  // Tensor parallelism: this rank's heads — their rows of the query and kv_b projections and of
  // the output gate, their columns of o_proj. The latent projections and the latent cache stay
  // whole on every rank.
  const int32_t T = config.tensor_parallel.size, r = config.tensor_parallel.rank;
  c_.num_heads /= T;
  const int64_t d = config.hidden_size, H_all = config.mla.num_heads, H = c_.num_heads, L = c_.kv_lora_rank,
                R = c_.qk_rope_head_dim, nope = c_.qk_nope_head_dim, v = c_.v_head_dim;
  if (c_.q_lora_rank > 0) {
    q_a_ = b.Get(prefix + "q_a_proj.weight", c_.q_lora_rank, d);
    if (c_.bias) q_a_bias_ = b.Get(prefix + "q_a_proj.bias", 0, c_.q_lora_rank);
    q_a_norm_ = b.Get(prefix + "q_a_layernorm.weight", 0, c_.q_lora_rank);
    q_b_ = b.GetPart(prefix + "q_b_proj.weight", H_all * qh_, c_.q_lora_rank, Split::kRows, T, r);
  } else {
    q_ = b.GetPart(prefix + "q_proj.weight", H_all * qh_, d, Split::kRows, T, r);
  }
  // kv_a_proj_with_mqa's rows: the latent first, then the rope key.
  Tensor kv_a = b.Get(prefix + "kv_a_proj_with_mqa.weight", L + R, d);
  // Split into two GEMM weights at row L: a quantized one must have a block boundary there.
  if (kv_a.quantized() && L % kv_a.quant.block_rows != 0) kv_a = Dequantize(kv_a, &kv_a_values_);
  if (!kv_a.empty()) {
    kv_a_c_ = kv_a.RowSlice(0, L);
    kv_a_rope_ = kv_a.RowSlice(L, R);
  }
  if (c_.bias) {
    const Tensor bias = b.Get(prefix + "kv_a_proj_with_mqa.bias", 0, L + R);
    if (!bias.empty()) {
      const size_t es = DTypeSize(bias.dtype);
      kv_a_c_bias_ = Tensor{bias.data, bias.dtype, 1, L};
      kv_a_rope_bias_ = Tensor{static_cast<const unsigned char*>(bias.data) + L * es, bias.dtype, 1, R};
    }
  }
  kv_a_norm_ = b.Get(prefix + "kv_a_layernorm.weight", 0, L);
  // kv_b_proj: per head qk_nope key rows, then v value rows, over the latent.
  Tensor kv_b = b.GetPart(prefix + "kv_b_proj.weight", H_all * (nope + v), L, Split::kRows, T, r);
  if (kv_b.quantized()) kv_b = Dequantize(kv_b, &kv_b_values_);  // its per-head rows are transposed below
  if (c_.output_gate) g_ = b.GetPart(prefix + "g_proj.weight", H_all * v, d, Split::kRows, T, r);
  o_ = b.GetPart(prefix + "o_proj.weight", d, H_all * v, Split::kCols, T, r);
  if (c_.bias) o_bias_ = b.Get(prefix + "o_proj.bias", 0, d);
  if (kv_b.empty()) return;
  const size_t es = DTypeSize(kv_b.dtype);
  uk_t_bytes_.resize(static_cast<size_t>(H * L * nope) * es);
  for (int64_t h = 0; h < H; ++h) {
    // W_UK_h is rows [h·(nope+v), h·(nope+v)+nope) of kv_b_proj: [nope, L]; its transpose [L, nope].
    const auto* src = static_cast<const unsigned char*>(kv_b.data) + h * (nope + v) * L * es;
    unsigned char* dst = uk_t_bytes_.data() + h * L * nope * es;
    for (int64_t i = 0; i < nope; ++i)
      for (int64_t j = 0; j < L; ++j) std::memcpy(dst + (j * nope + i) * es, src + (i * L + j) * es, es);
    uk_t_.push_back(Tensor{dst, kv_b.dtype, L, nope});
    uk_.push_back(kv_b.RowSlice(h * (nope + v), nope));
    uv_.push_back(kv_b.RowSlice(h * (nope + v) + nope, v));
  }
  // The expanded form's scratch per context position: its latent row, and its keys and values
  // over the heads. Tiles of whole 256-position runs keep it near kExpandScratchFloats.
  constexpr int64_t kExpandScratchFloats = int64_t{1} << 24;  // 64 MiB
  const int64_t per_position = L + R + H * (nope + v);
  expand_tile_ = static_cast<int32_t>(std::clamp<int64_t>(kExpandScratchFloats / per_position / 256, 1, 32) * 256);
}

bool MlaAttention::ChoosesExpanded(int64_t new_tokens, int64_t cached) const {
  if (form_ != MlaForm::kByCost) return form_ == MlaForm::kExpanded;
  if (new_tokens <= 1) return false;  // a decode step reads the latent rows as they are
  // Multiply-adds per head for n = new_tokens after s = cached tokens, with P = n·s + n(n+1)/2
  // (query, key) pairs of the causal chunk:
  //   absorbed: n·L·(nope + v)      W_UK into each query, W_UV out of each result
  //           + P·(L + R)           (L+R)-wide scores
  //           + P·L                 L-wide weighted sums of latents
  //   expanded: (s + n)·L·(nope + v) k_nope and v of every context position
  //           + P·(nope + R + v)    head-wide scores and weighted sums
  // so the expanded form costs less when P·(2L − nope − v) > s·L·(nope + v): from position 0
  // always (s = 0), after s cached tokens once the chunk is long enough (n ≳ L·(nope + v) /
  // (2L − nope − v) for n ≪ s: 171 tokens for DeepSeek-V3's 512/128/128). The choice depends on
  // the sequence's own chunk only, so a sequence's results do not depend on its batch.
  const double L = static_cast<double>(c_.kv_lora_rank), nope = c_.qk_nope_head_dim, v = c_.v_head_dim;
  const double n = static_cast<double>(new_tokens), s = static_cast<double>(cached);
  const double pairs = n * s + n * (n + 1) / 2;
  return pairs * (2 * L - nope - v) > s * L * (nope + v);
}

void MlaAttention::ForEachWeight(const WeightFn& fn) {
  for (Tensor* t : {&q_a_, &q_b_, &q_, &kv_a_c_, &kv_a_rope_, &g_, &o_})
    if (!t->empty()) fn(*t, WeightUse::kMatmul);
  for (Tensor* t : {&q_a_bias_, &q_a_norm_, &kv_a_c_bias_, &kv_a_rope_bias_, &kv_a_norm_, &o_bias_})
    if (!t->empty()) fn(*t, WeightUse::kOther);
  for (auto* list : {&uk_t_, &uv_, &uk_})
    for (Tensor& t : *list) fn(t, WeightUse::kMatmul);
}

void MlaAttention::WeightsPrepared() {
  // The backend keeps its own copies of the transposed key projections (packed, or on the device).
  if (!uk_t_.empty() && uk_t_[0].data != uk_t_bytes_.data()) uk_t_bytes_ = {};
  // Likewise the dequantized projections, once no weight views them any more.
  auto views = [](const std::vector<float>& bytes, std::initializer_list<const std::vector<Tensor>*> lists,
                  std::initializer_list<const Tensor*> single) {
    const auto* lo = reinterpret_cast<const unsigned char*>(bytes.data());
    const auto* hi = lo + bytes.size() * sizeof(float);
    auto in = [&](const Tensor& t) {
      const auto* p = static_cast<const unsigned char*>(t.data);
      return p >= lo && p < hi;
    };
    for (const auto* list : lists)
      for (const Tensor& t : *list)
        if (in(t)) return true;
    for (const Tensor* t : single)
      if (in(*t)) return true;
    return false;
  };
  if (!kv_b_values_.empty() && !views(kv_b_values_, {&uk_, &uv_}, {})) kv_b_values_ = {};
  if (!kv_a_values_.empty() && !views(kv_a_values_, {}, {&kv_a_c_, &kv_a_rope_})) kv_a_values_ = {};
}

void MlaAttention::Forward(StepContext& ctx, int32_t layer, const float* h, float* x) {
  Backend* be = ctx.backend;
  MlaScratch& buf = ctx.buf->Scratch<MlaScratch>();
  const int64_t T = ctx.num_tokens, H = c_.num_heads, L = c_.kv_lora_rank, R = c_.qk_rope_head_dim,
                nope = c_.qk_nope_head_dim, v = c_.v_head_dim;
  // The step's sequences by form; absorbed tokens get compact rows of the latent buffers.
  absorbed_.clear();
  expanded_.clear();
  int64_t absorbed_tokens = 0;
  for (const AttentionSeq& s : *ctx.seqs) {
    if (ChoosesExpanded(s.num_tokens, s.start_pos)) {
      expanded_.push_back(s);
    } else {
      absorbed_.push_back(s);
      absorbed_tokens += s.num_tokens;
    }
  }
  float* q = buf.q.as<float>(T * H * qh_);  // [T, H, nope + R]
  float* c = buf.latents.as<float>(T * (L + R));
  float* k_rope = c + T * L;
  float* q_lat = buf.q_latent.as<float>(absorbed_tokens * H * L);
  float* o_lat = buf.out.as<float>(absorbed_tokens * H * L + T * H * v);
  float* o = o_lat + absorbed_tokens * H * L;
  {
    PartTimer t(ctx.profile, StepPart::kAttentionIn);
    if (c_.q_lora_rank > 0) {
      float* qa = buf.q_lora.as<float>(T * c_.q_lora_rank);
      be->Gemm(h, T, q_a_, qa, false);
      if (c_.bias) be->AddBias(qa, T, q_a_bias_);
      be->RmsNorm(qa, T, q_a_norm_, c_.norm_eps, qa);
      be->Gemm(qa, T, q_b_, q, false);
    } else {
      be->Gemm(h, T, q_, q, false);
    }
    const GemmOutput kv[] = {{&kv_a_c_, c}, {&kv_a_rope_, k_rope}};
    be->GemmMany(h, T, kv, 2);
    if (c_.bias) {
      be->AddBias(c, T, kv_a_c_bias_);
      be->AddBias(k_rope, T, kv_a_rope_bias_);
    }
    be->RmsNorm(c, T, kv_a_norm_, c_.norm_eps, c);
    if (c_.use_rope) {
      // The rope dims of each query head, and the one shared rope key.
      RopeParams qp = rope_.Params(c_.rope, static_cast<int32_t>(H), static_cast<int32_t>(qh_));
      be->Rope(q + nope, T, ctx.positions, qp);
      be->Rope(k_rope, T, ctx.positions, rope_.Params(c_.rope, 1, static_cast<int32_t>(R)));
    }
  }
  // Absorbed: per run of sequences with adjacent token rows, q_latent_h = W_UK_hᵀ q_nope_h, latent
  // attention over the cached rows, and o_h = W_UV_h · (Σ p c).
  int64_t a0 = 0;  // the run's first compact row
  for (size_t r0 = 0, r1 = 0; r0 < absorbed_.size(); r0 = r1) {
    const int64_t t0 = absorbed_[r0].token_offset;
    int64_t n = 0;
    for (r1 = r0; r1 < absorbed_.size() && absorbed_[r1].token_offset == t0 + n; ++r1) {
      n += absorbed_[r1].num_tokens;
      absorbed_[r1].token_offset -= static_cast<int32_t>(t0);
    }
    float* run_q_lat = q_lat + a0 * H * L;
    float* run_o_lat = o_lat + a0 * H * L;
    {
      PartTimer t(ctx.profile, StepPart::kAttentionIn);
      be->HeadGemm(q + t0 * H * qh_, RowStrides{H * qh_, qh_}, n, static_cast<int32_t>(H), uk_t_.data(), run_q_lat,
                   RowStrides{H * L, L});
    }
    LatentAttentionParams p;
    p.q_latent = run_q_lat;
    p.q_rope = q + t0 * H * qh_ + nope;
    p.q_rope_stride = qh_;
    p.c_new = c + t0 * L;
    p.k_rope_new = k_rope + t0 * R;
    p.out = run_o_lat;
    p.num_heads = static_cast<int32_t>(H);
    p.latent_dim = static_cast<int32_t>(L);
    p.rope_dim = static_cast<int32_t>(R);
    p.scale = c_.softmax_scale;
    p.cache = ctx.cache->layer(layer);
    p.seqs = absorbed_.data() + r0;
    p.num_seqs = static_cast<int32_t>(r1 - r0);
    {
      PartTimer t(ctx.profile, StepPart::kAttention);
      be->PagedLatentAttention(p);
    }
    PartTimer t(ctx.profile, StepPart::kAttentionOut);
    be->HeadGemm(run_o_lat, RowStrides{H * L, L}, n, static_cast<int32_t>(H), uv_.data(), o + t0 * H * v,
                 RowStrides{H * v, v});
    a0 += n;
  }
  // Expanded: the new rows stored, then each sequence's context expanded and attended.
  if (!expanded_.empty()) {
    PartTimer t(ctx.profile, StepPart::kAttention);
    LatentAttentionParams p;
    p.c_new = c;
    p.k_rope_new = k_rope;
    p.latent_dim = static_cast<int32_t>(L);
    p.rope_dim = static_cast<int32_t>(R);
    p.cache = ctx.cache->layer(layer);
    p.seqs = expanded_.data();
    p.num_seqs = static_cast<int32_t>(expanded_.size());
    be->StoreLatentRows(p);
    for (const AttentionSeq& s : expanded_) AttendExpanded(ctx, layer, s, q, o);
  }
  PartTimer t(ctx.profile, StepPart::kAttentionOut);
  if (c_.output_gate) {  // the heads' output times σ(g_proj(x)), x the input norm's output
    float* gate = buf.gate.as<float>(T * H * v);
    be->Gemm(h, T, g_, gate, false);
    be->MulSigmoid(o, T, H * v, gate, H * v);
  }
  AddRowParallel(ctx, o, T, o_, tensor_parallel_, x);
  if (c_.bias) be->AddBias(x, T, o_bias_);
}

void MlaAttention::AttendExpanded(StepContext& ctx, int32_t layer, const AttentionSeq& s, const float* q, float* o) {
  Backend* be = ctx.backend;
  MlaScratch& buf = ctx.buf->Scratch<MlaScratch>();
  const int32_t H = c_.num_heads, L = static_cast<int32_t>(c_.kv_lora_rank), R = c_.qk_rope_head_dim,
                nope = c_.qk_nope_head_dim, v = c_.v_head_dim, W = L + R;
  const int32_t context = s.start_pos + s.num_tokens, tile = std::min(expand_tile_, context);
  float* rows = buf.tile_rows.as<float>(static_cast<size_t>(tile) * W);
  float* keys = buf.tile_kv.as<float>(static_cast<size_t>(tile) * H * (nope + v));
  float* values = keys + static_cast<size_t>(tile) * H * nope;
  float* state = buf.softmax_state.as<float>(static_cast<size_t>(ctx.num_tokens) * H * 2);
  ExpandedLatentAttentionParams p;
  p.q = q;
  p.k_nope = keys;
  p.k_rope = rows + L;
  p.k_rope_stride = W;
  p.v = values;
  p.out = o;
  p.state = state;
  p.num_heads = H;
  p.nope_dim = nope;
  p.rope_dim = R;
  p.v_dim = v;
  p.scale = c_.softmax_scale;
  p.seq = s;
  const KvLayer cache = ctx.cache->layer(layer);
  // Tiles start at multiples of expand_tile_, whatever the chunk.
  for (int32_t first = 0; first < context; first += tile) {
    const int32_t count = std::min(tile, context - first);
    be->LoadLatentRows(cache, W, s, first, count, rows);
    be->HeadGemm(rows, RowStrides{W, 0}, count, H, uk_.data(), keys, RowStrides{int64_t{H} * nope, nope});
    be->HeadGemm(rows, RowStrides{W, 0}, count, H, uv_.data(), values, RowStrides{int64_t{H} * v, v});
    p.first_key = first;
    p.num_keys = count;
    p.first_tile = first == 0;
    p.last_tile = first + count == context;
    be->ExpandedLatentAttention(p);
  }
}

}  // namespace ls
