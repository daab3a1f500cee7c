// StableLatentMoe forward step.
#include "models/stable_latent_moe.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"

namespace ls {

absl::StatusOr<std::unique_ptr<StableLatentMoe>> StableLatentMoe::Load(const std::string& model_dir,
                                                                       Backend* backend) {
  auto config = LoadModelConfig(model_dir);
  if (!config.ok()) return config.status();
  auto store = WeightStore::Open(model_dir);
  if (!store.ok()) return store.status();
  auto weights = BindModelWeights(*config, **store);
  if (!weights.ok()) return weights.status();
  return std::unique_ptr<StableLatentMoe>(
      new StableLatentMoe(std::move(*config), std::move(*store), std::move(*weights), backend));
}

StableLatentMoe::StableLatentMoe(ModelConfig config, std::unique_ptr<WeightStore> store, ModelWeights weights,
                                 Backend* backend)
    : config_(std::move(config)),
      store_(std::move(store)),
      host_weights_(std::move(weights)),
      backend_(backend),
      weights_(PrepareModelWeights(host_weights_, backend_, &weight_storage_, &copied_weights_)),
      expert_tokens_(static_cast<size_t>(config_.num_hidden_layers) * config_.n_routed_experts, 0) {
  for (DeviceBuffer* b : {&x_, &h_, &q_, &k_, &v_, &attn_, &gate_, &up_, &act_, &router_logits_, &topk_w_,
                          &topk_ids_, &z_, &c_, &dz_, &dy_, &dids_, &dw_, &rows_})
    *b = DeviceBuffer(backend_);
  // The backend reads its own copies of these: their mapped file pages need not stay resident
  // (otherwise a packed model would hold its GEMM weights twice).
  for (const Tensor& t : copied_weights_) WeightStore::ReleaseResidentPages(t);
  copied_weights_ = {};
}

absl::Status StableLatentMoe::Forward(const StepBatch& batch, KvCache& cache, std::vector<float>* logits) {
  backend_->BeginStep();
  const ModelConfig& c = config_;
  const int64_t T = static_cast<int64_t>(batch.tokens.size()), d = c.hidden_size;
  int64_t counted = 0;
  for (const auto& s : batch.seqs) counted += s.num_tokens;
  if (counted != T) return absl::InvalidArgumentError("StepBatch: sequence token counts do not add up to tokens");
  for (int32_t id : batch.tokens)
    if (id < 0 || id >= c.vocab_size) return absl::InvalidArgumentError(absl::StrCat("token id ", id, " out of range"));

  std::vector<int32_t> positions(T);
  std::vector<AttentionSeq> seqs;
  int32_t offset = 0;
  for (const auto& s : batch.seqs) {
    const int64_t needed = (static_cast<int64_t>(s.start_pos) + s.num_tokens + cache.block_size() - 1) / cache.block_size();
    if (static_cast<int64_t>(s.block_table.size()) < needed)
      return absl::InvalidArgumentError("StepBatch: block table too short for the sequence");
    for (int32_t b : s.block_table)
      if (b < 0 || b >= cache.num_blocks()) return absl::InvalidArgumentError("StepBatch: block id out of range");
    for (int32_t i = 0; i < s.num_tokens; ++i) positions[offset + i] = s.start_pos + i;
    seqs.push_back({offset, s.num_tokens, s.start_pos, s.block_table.data(), static_cast<int32_t>(s.block_table.size())});
    offset += s.num_tokens;
  }

  float* x = x_.as<float>(T * d);
  {
    PartTimer t(profile_, StepPart::kEmbedding);
    backend_->Embedding(batch.tokens.data(), T, weights_.embed, x);
  }
  for (int32_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const LayerWeights& L = weights_.layers[layer];
    Attention(L, layer, seqs, positions, cache, T);
    {
      PartTimer t(profile_, L.is_moe ? StepPart::kRouter : StepPart::kSharedOrDense);
      backend_->RmsNorm(x, T, L.post_attention_norm, c.rms_norm_eps, h_.as<float>(T * d));
    }
    if (L.is_moe) {
      MoeFfn(L, layer, T);
    } else {
      DenseFfn(L, T);
    }
  }

  // Final norm and LM head over the rows whose logits were asked for.
  PartTimer lm_head_timer(profile_, StepPart::kLmHead);
  std::vector<int64_t> wanted;  // token rows whose logits were asked for, in sequence order
  wanted.reserve(batch.num_logit_rows());
  for (const auto& s : seqs) {
    const StepSequence& want = batch.seqs[&s - seqs.data()];
    if (!want.want_logits) continue;
    for (int32_t i = want.all_logits ? 0 : s.num_tokens - 1; i < s.num_tokens; ++i) wanted.push_back(s.token_offset + i);
  }
  const int64_t rows = static_cast<int64_t>(wanted.size());
  logits->resize(static_cast<size_t>(rows * c.vocab_size));
  if (rows == 0) {
    backend_->Synchronize();  // the step's expert counts are in place when it returns
    return absl::OkStatus();
  }
  float* sel = h_.as<float>(rows * d);
  backend_->GatherRows(x, wanted.data(), rows, d, sel);
  backend_->RmsNorm(sel, rows, weights_.final_norm, c.rms_norm_eps, sel);
  float* out = act_.as<float>(rows * c.vocab_size);
  backend_->Gemm(sel, rows, weights_.lm_head, out, false);
  backend_->CopyToHost(logits->data(), out, logits->size() * sizeof(float));
  return absl::OkStatus();
}

absl::Status StableLatentMoe::ForwardSequence(const std::vector<int32_t>& ids, bool all_logits,
                                             std::vector<float>* logits) {
  constexpr int32_t kBlock = 16;
  const int32_t blocks = std::max<int32_t>(1, static_cast<int32_t>((ids.size() + kBlock - 1) / kBlock));
  KvCache cache(backend_, config_, blocks, kBlock);
  StepSequence s;
  s.num_tokens = static_cast<int32_t>(ids.size());
  s.all_logits = all_logits;
  for (int32_t i = 0; i < blocks; ++i) s.block_table.push_back(i);
  StepBatch b;
  b.tokens = ids;
  b.seqs = {std::move(s)};
  return Forward(b, cache, logits);
}

absl::StatusOr<std::shared_ptr<const PlacedExperts>> StableLatentMoe::BuildPlacedExperts(
    const std::vector<std::pair<int32_t, ExpertPlacement>>& placements) const {
  return PlacedExperts::Build(config_, weights_, backend_, placements);
}

void StableLatentMoe::SetPlacedExperts(std::shared_ptr<const PlacedExperts> placed) {
  placed_ = std::move(placed);
  device_rows_.assign(placed_ ? static_cast<size_t>(config_.num_hidden_layers) * placed_->num_devices() : 0, 0);
}

void StableLatentMoe::PlacedMoe(const PlacedLayer& pl, int32_t layer, const float* z, const int32_t* topk_ids,
                                const float* weights, int64_t T, float* out, int64_t* tokens_per_expert) {
  const ModelConfig& c = config_;
  const int64_t K = c.num_experts_per_tok, w = c.expert_width();
  const int32_t D = pl.placement.num_devices, S = pl.placement.slots_per_device;
  // The routing decisions travel to the host, which plans the dispatch: the physical slot of
  // every routed pair, grouped by device.
  std::vector<int32_t> ids(T * K);
  backend_->CopyToHost(ids.data(), topk_ids, ids.size() * sizeof(int32_t));
  for (int32_t e : ids) ++tokens_per_expert[e];
  const std::vector<int32_t> slots = DispatchSlots(pl.placement, ids.data(), T * K);
  std::vector<std::vector<int64_t>> pairs(D);
  for (int64_t i = 0; i < T * K; ++i) pairs[pl.placement.device_of(slots[i])].push_back(i);
  // Dispatch: every device's rows, grouped by device, gathered from the token rows and sent over
  // the devices' transport; each device then sees its rows, with its local slots.
  std::vector<int64_t> rows_per_device(D), tokens, pair_order;
  std::vector<int32_t> local;
  tokens.reserve(T * K);
  pair_order.reserve(T * K);
  local.reserve(T * K);
  for (int32_t d = 0; d < D; ++d) {
    rows_per_device[d] = static_cast<int64_t>(pairs[d].size());
    device_rows_[static_cast<size_t>(layer) * D + d] += rows_per_device[d];
    for (int64_t pair : pairs[d]) {
      tokens.push_back(pair / K);
      pair_order.push_back(pair);
      local.push_back(slots[pair] - d * S);
    }
  }
  const int64_t rows = T * K;
  float* send = dz_.as<float>(2 * rows * w);  // [rows, w] to send, then [rows, w] received
  float* recv = send + rows * w;
  int32_t* local_ids = dids_.as<int32_t>(rows);
  if (rows > unit_rows_) {  // unit weights, uploaded once per growth rather than every layer
    unit_rows_ = std::max(rows, 2 * unit_rows_);
    const std::vector<float> unit(static_cast<size_t>(unit_rows_), 1.f);
    backend_->CopyToDevice(dw_.as<float>(unit_rows_), unit.data(), unit.size() * sizeof(float));
  }
  const float* unit_weights = static_cast<const float*>(dw_.data());
  backend_->GatherRows(z, tokens.data(), rows, w, send);
  backend_->ExchangeRows(send, rows_per_device, w, recv);
  backend_->CopyToDevice(local_ids, local.data(), rows * sizeof(int32_t));
  // Each device runs its experts over its rows with unit weights, so its output rows are the
  // experts' outputs as they are.
  float* out_rows = rows_.as<float>(2 * rows * w);  // [rows, w] computed, then [rows, w] returned
  float* back = out_rows + rows * w;
  int64_t first = 0;  // the device's first row
  for (int32_t d = 0; d < D; first += rows_per_device[d], ++d) {
    if (rows_per_device[d] == 0) continue;
    MoeParams m;
    m.z = recv + first * w;
    m.num_tokens = rows_per_device[d];
    m.in_width = w;
    m.out_width = w;
    m.topk_ids = local_ids + first;
    m.topk_weights = unit_weights + first;
    m.top_k = 1;
    m.num_experts = S;
    m.gate = pl.gate.data() + d * S;
    m.up = pl.up.data() + d * S;
    m.down = pl.down.data() + d * S;
    m.act = c.hidden_act;
    m.out = out_rows + first * w;
    backend_->MoeExperts(m);
  }
  // Combine, part 1: results travel back over the transport and return to their pairs.
  backend_->ExchangeRows(out_rows, rows_per_device, w, back);
  float* y = dy_.as<float>(rows * w);  // [T * K, w] unweighted expert outputs, pair order
  backend_->ScatterRows(back, pair_order.data(), rows, w, y);
  // Combine, part 2: weighted sum over each token's K pairs in pair order, as the single-device op.
  backend_->CombineExpertOutputs(y, weights, T, static_cast<int32_t>(K), w, out);
}

absl::Status StableLatentMoe::SetRouterBias(int32_t layer, std::vector<float> bias) {
  if (layer < 0 || layer >= config_.num_hidden_layers || !weights_.layers[layer].is_moe)
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " is not a MoE layer"));
  if (static_cast<int64_t>(bias.size()) != config_.n_routed_experts)
    return absl::InvalidArgumentError(absl::StrCat("bias has ", bias.size(), " values, expected ", config_.n_routed_experts));
  weights_.layers[layer].router_bias = std::move(bias);
  UpdateRouterBiasView(weights_.layers[layer], backend_);
  return absl::OkStatus();
}

void StableLatentMoe::Attention(const LayerWeights& L, int32_t layer, const std::vector<AttentionSeq>& seqs,
                                const std::vector<int32_t>& positions, KvCache& cache, int64_t T) {
  const ModelConfig& c = config_;
  const int64_t d = c.hidden_size, H = c.num_attention_heads, Hkv = c.num_key_value_heads, hd = c.head_dim;
  float* x = static_cast<float*>(x_.data());
  float* h = h_.as<float>(T * d);
  float* q = q_.as<float>(T * H * hd);
  float* k = k_.as<float>(T * Hkv * hd);
  float* v = v_.as<float>(T * Hkv * hd);
  float* o = attn_.as<float>(T * H * hd);
  {
    PartTimer t(profile_, StepPart::kAttentionIn);
    backend_->RmsNorm(x, T, L.input_norm, c.rms_norm_eps, h);
    const GemmOutput qkv[] = {{&L.q, q}, {&L.k, k}, {&L.v, v}};
    backend_->GemmMany(h, T, qkv, 3);
    if (c.qk_norm) {
      backend_->RmsNorm(q, T * H, L.q_norm, c.rms_norm_eps, q);
      backend_->RmsNorm(k, T * Hkv, L.k_norm, c.rms_norm_eps, k);
    }
    backend_->Rope(q, T, c.num_attention_heads, c.head_dim, positions.data(), c.rope_theta);
    backend_->Rope(k, T, c.num_key_value_heads, c.head_dim, positions.data(), c.rope_theta);
  }
  AttentionParams p;
  p.q = q;
  p.k_new = k;
  p.v_new = v;
  p.out = o;
  p.num_heads = c.num_attention_heads;
  p.num_kv_heads = c.num_key_value_heads;
  p.head_dim = c.head_dim;
  p.scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  p.cache = cache.layer(layer);
  p.seqs = seqs.data();
  p.num_seqs = static_cast<int32_t>(seqs.size());
  {
    PartTimer t(profile_, StepPart::kAttention);
    backend_->PagedAttention(p);
  }
  PartTimer t(profile_, StepPart::kAttentionOut);
  backend_->Gemm(o, T, L.o, x, /*accumulate=*/true);
}

void StableLatentMoe::DenseFfn(const LayerWeights& L, int64_t T) {
  PartTimer t(profile_, StepPart::kSharedOrDense);
  SharedGlu(L.dense, static_cast<float*>(h_.data()), T, config_.intermediate_size);
}

// x += GLU(h) for a dense or shared-expert MLP of the given width.
void StableLatentMoe::SharedGlu(const GluWeights& w, const float* h, int64_t T, int64_t width) {
  float* g = gate_.as<float>(T * width);
  float* u = up_.as<float>(T * width);
  float* a = act_.as<float>(T * width);
  const GemmOutput gate_up[] = {{&w.gate, g}, {&w.up, u}};
  backend_->GemmMany(h, T, gate_up, 2);
  backend_->GluActivation(g, u, T, width, config_.hidden_act, a);
  backend_->Gemm(a, T, w.down, static_cast<float*>(x_.data()), /*accumulate=*/true);
}

void StableLatentMoe::MoeFfn(const LayerWeights& L, int32_t layer, int64_t T) {
  const ModelConfig& c = config_;
  const int64_t N = c.n_routed_experts, K = c.num_experts_per_tok, w = c.expert_width();
  const float* h = static_cast<float*>(h_.data());
  float* x = static_cast<float*>(x_.data());

  std::optional<PartTimer> timer(std::in_place, profile_, StepPart::kRouter);
  RouterParams r;
  r.logits = router_logits_.as<float>(T * N);
  backend_->Gemm(h, T, L.router, const_cast<float*>(r.logits), false);
  if (router_sink_) {
    router_sink_->resize(c.num_hidden_layers);
    std::vector<float>& dst = (*router_sink_)[layer];
    const size_t old = dst.size();
    dst.resize(old + static_cast<size_t>(T * N));
    backend_->CopyToHost(dst.data() + old, r.logits, static_cast<size_t>(T * N) * sizeof(float));
  }
  r.bias = static_cast<const float*>(L.router_bias_view.data);
  r.num_tokens = T;
  r.num_experts = static_cast<int32_t>(N);
  r.top_k = static_cast<int32_t>(K);
  r.scoring = c.scoring_func;
  r.norm_topk_prob = c.norm_topk_prob;
  r.routed_scaling_factor = c.routed_scaling_factor;
  r.topk_ids = topk_ids_.as<int32_t>(T * K);
  r.topk_weights = topk_w_.as<float>(T * K);
  backend_->Router(r);

  const float* z = h;
  timer.emplace(profile_, StepPart::kLatent);
  if (c.moe_latent_size > 0) {
    backend_->Gemm(h, T, L.latent_down, z_.as<float>(T * w), false);
    z = static_cast<float*>(z_.data());
  }
  MoeParams m;
  m.z = z;
  m.num_tokens = T;
  m.in_width = w;
  m.out_width = w;
  m.topk_ids = r.topk_ids;
  m.topk_weights = r.topk_weights;
  m.top_k = r.top_k;
  m.num_experts = r.num_experts;
  m.gate = L.expert_gate.data();
  m.up = L.expert_up.data();
  m.down = L.expert_down.data();
  m.act = c.hidden_act;
  m.out = c_.as<float>(T * w);
  m.tokens_per_expert = expert_tokens_.data() + static_cast<size_t>(layer) * N;
  timer.emplace(profile_, StepPart::kExperts);
  if (const PlacedLayer* pl = placed_ ? placed_->layer(layer) : nullptr) {
    PlacedMoe(*pl, layer, z, r.topk_ids, r.topk_weights, T, m.out, m.tokens_per_expert);
  } else {
    backend_->MoeExperts(m);
  }
  timer.emplace(profile_, StepPart::kLatent);
  if (c.expert_output_norm) backend_->RmsNorm(m.out, T, L.latent_norm, c.rms_norm_eps, m.out);
  if (c.moe_latent_size > 0) {
    backend_->Gemm(m.out, T, L.latent_up, x, /*accumulate=*/true);
  } else {
    backend_->Add(x, m.out, T * w);
  }
  timer.emplace(profile_, StepPart::kSharedOrDense);
  if (L.has_shared) SharedGlu(L.shared, h, T, c.shared_expert_intermediate_size);
}

}  // namespace ls
