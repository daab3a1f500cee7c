// MoeBlock forward: router, latent projections, grouped or placed experts, shared experts.
#include "models/layers/moe_block.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"

namespace ls {

MoeBlock::MoeBlock(WeightBinder& b, const std::string& prefix, const ModelConfig& c, const MoeNames& names)
    : m_(c.moe),
      act_(c.hidden_act),
      eps_(c.rms_norm_eps),
      width_(c.expert_width()),
      tensor_parallel_(c.tensor_parallel) {
  const int64_t d = c.hidden_size, N = m_.num_experts, f = m_.expert_ffn;
  router_ = b.Get(prefix + names.router, N, d);
  router_bias_.assign(N, 0.f);
  router_bias_name_ = b.FullName(prefix + names.router_bias);
  if (Tensor bias = b.Optional(prefix + names.router_bias, 0, N); !bias.empty())
    for (int64_t e = 0; e < N; ++e) router_bias_[e] = LoadAsF32(bias.data, bias.dtype, e);
  router_bias_view_ = Tensor{router_bias_.data(), DType::kF32, 1, N};
  if (m_.latent_size > 0) {
    latent_down_ = b.Get(prefix + names.latent_down, width_, d);
    latent_up_ = b.Get(prefix + names.latent_up, d, width_);
  }
  if (m_.expert_output_norm) latent_norm_ = b.Get(prefix + names.latent_norm, 0, width_);
  for (int64_t e = 0; e < N && b.status().ok(); ++e) {
    const GluMlp expert(b, absl::StrCat(prefix, names.experts, e, "."), names.expert, f, width_, width_, act_);
    experts_.gate.push_back(expert.gate());
    experts_.up.push_back(expert.up());
    experts_.down.push_back(expert.down());
  }
  if (m_.shared_ffn > 0) {
    shared_ =
        std::make_unique<GluMlp>(b, prefix + names.shared, GluNames{}, m_.shared_ffn, d, d, act_, c.tensor_parallel);
    if (m_.shared_gate) shared_gate_ = b.Get(prefix + names.shared_gate, 1, d);
  }
}

void MoeBlock::SetRouterBias(std::vector<float> bias, Backend* backend) {
  router_bias_ = std::move(bias);
  const Tensor host{router_bias_.data(), DType::kF32, 1, static_cast<int64_t>(router_bias_.size())};
  if (backend->PreparedWeightBytes(host, WeightUse::kOther) == 0) {
    router_bias_view_ = host;
  } else {
    backend->CopyToDevice(const_cast<void*>(router_bias_view_.data), host.data, host.bytes());
  }
}

void MoeBlock::ForEachWeight(const WeightFn& fn) {
  for (Tensor* t : {&router_, &shared_gate_})
    if (!t->empty()) fn(*t, WeightUse::kMatmulRouter);
  for (Tensor* t : {&latent_down_, &latent_up_})
    if (!t->empty()) fn(*t, WeightUse::kMatmul);
  for (Tensor* t : {&router_bias_view_, &latent_norm_})
    if (!t->empty()) fn(*t, WeightUse::kOther);
  for (auto* list : {&experts_.gate, &experts_.up, &experts_.down})
    for (Tensor& t : *list) fn(t, WeightUse::kMatmulExpert);
  if (shared_) shared_->ForEachWeight(fn);
}

void MoeBlock::Forward(StepContext& full, int32_t layer, const float* h, float* x) {
  Backend* be = full.backend;
  StepBuffers& buf = *full.buf;
  const int64_t d = router_.cols, N = m_.num_experts, K = m_.top_k, w = width_;
  // Under tensor parallelism the group's ranks hold the same tokens: each routes its own slice of
  // them, the shared experts' width is split, and every rank's part lands in `sum` (zero
  // elsewhere), which the group sums once into the stream. Alone the slice is every token and the
  // sum is the stream itself.
  float* const stream = x;
  const float* const h_all = h;
  float* sum = x;
  StepContext ctx = full;
  if (tensor_parallel_.on()) {
    const int64_t first = full.num_tokens * tensor_parallel_.rank / tensor_parallel_.size;
    ctx.num_tokens = full.num_tokens * (tensor_parallel_.rank + 1) / tensor_parallel_.size - first;
    sum = buf.partial.as<float>(full.num_tokens * d);
    be->SetZero(sum, full.num_tokens * d);
    h += first * d;
    x = sum + first * d;
  }
  const int64_t T = ctx.num_tokens;

  std::optional<PartTimer> timer(std::in_place, ctx.profile, StepPart::kRouter);
  RouterParams r;
  float* logits = buf.router_logits.as<float>(T * N);
  be->Gemm(h, T, router_, logits, false);
  if (ctx.experts->router_sink) {
    std::vector<float>& dst = (*ctx.experts->router_sink)[layer];
    const size_t old = dst.size();
    dst.resize(old + static_cast<size_t>(T * N));
    be->CopyToHost(dst.data() + old, logits, static_cast<size_t>(T * N) * sizeof(float));
  }
  r.logits = logits;
  r.bias = static_cast<const float*>(router_bias_view_.data);
  r.num_tokens = T;
  r.num_experts = static_cast<int32_t>(N);
  r.top_k = static_cast<int32_t>(K);
  r.scoring = m_.scoring;
  r.n_group = m_.n_group;
  r.topk_group = m_.topk_group;
  r.group_score = m_.group_score;
  r.norm_topk_prob = m_.norm_topk_prob;
  r.routed_scaling_factor = m_.routed_scaling_factor;
  r.topk_ids = buf.topk_ids.as<int32_t>(T * K);
  r.topk_weights = buf.topk_w.as<float>(T * K);
  be->Router(r);

  const float* z = h;
  timer.emplace(ctx.profile, StepPart::kLatent);
  if (m_.latent_size > 0) {
    be->Gemm(h, T, latent_down_, buf.z.as<float>(T * w), false);
    z = static_cast<float*>(buf.z.data());
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
  m.gate = experts_.gate.data();
  m.up = experts_.up.data();
  m.down = experts_.down.data();
  m.act = act_;
  m.out = buf.c.as<float>(T * w);
  m.tokens_per_expert = ctx.experts->tokens.data() + static_cast<size_t>(layer) * N;
  timer.emplace(ctx.profile, StepPart::kExperts);
  const std::shared_ptr<const ls::PlacedExperts>& placed = ctx.experts->placed;
  if (const PlacedLayer* pl = placed ? placed->layer(layer) : nullptr) {
    PlacedExperts(ctx, *pl, layer, z, r.topk_ids, r.topk_weights, m.out, m.tokens_per_expert);
  } else {
    be->MoeExperts(m);
  }
  timer.emplace(ctx.profile, StepPart::kLatent);
  if (m_.expert_output_norm) be->RmsNorm(m.out, T, latent_norm_, eps_, m.out);
  if (m_.latent_size > 0) {
    be->Gemm(m.out, T, latent_up_, x, /*accumulate=*/true);
  } else {
    be->Add(x, m.out, T * w);
  }
  timer.emplace(ctx.profile, StepPart::kSharedOrDense);
  if (shared_) {
    // The shared experts see every token (their width is what the group splits).
    const int64_t all = full.num_tokens;
    if (!m_.shared_gate) {
      shared_->Apply(full, h_all, sum, /*accumulate=*/true);
    } else {
      float* out = buf.ffn_out.as<float>(all * d);
      float* gate = buf.gate_logits.as<float>(all);
      shared_->Apply(full, h_all, out, /*accumulate=*/false);
      be->Gemm(h_all, all, shared_gate_, gate, false);
      be->MulSigmoid(out, all, d, gate, 1);  // σ(gate) scales each rank's part alike: the sum is scaled
      be->Add(sum, out, all * d);
    }
  }
  if (tensor_parallel_.on()) {
    be->AllReduceSum(sum, full.num_tokens * d);
    be->Add(stream, sum, full.num_tokens * d);
  }
}

void MoeBlock::PlacedExperts(StepContext& ctx, const PlacedLayer& pl, int32_t layer, const float* z,
                             const int32_t* topk_ids, const float* weights, float* out, int64_t* tokens_per_expert) {
  Backend* be = ctx.backend;
  StepBuffers& buf = *ctx.buf;
  RankTransport* ranks = ctx.experts->ranks;
  const int64_t T = ctx.num_tokens, K = m_.top_k, w = width_;
  const int32_t D = pl.placement.num_devices, S = pl.placement.slots_per_device;
  // The devices split over the ranks: rank r holds devices [r·held, (r+1)·held), that is slots
  // [r·held·S, (r+1)·held·S). One process alone is rank 0 of 1 and holds them all.
  const int32_t R = ranks ? ranks->size() : 1, me = ranks ? ranks->rank() : 0, held = D / R;
  // The routing decisions travel to the host, which plans the dispatch: the physical slot of
  // every routed pair, grouped by device (so by rank).
  std::vector<int32_t> ids(T * K);
  if (T > 0) be->CopyToHost(ids.data(), topk_ids, ids.size() * sizeof(int32_t));
  for (int32_t e : ids) ++tokens_per_expert[e];
  const std::vector<int32_t> slots = DispatchSlots(pl.placement, ids.data(), T * K);
  std::vector<std::vector<int64_t>> pairs(D);
  for (int64_t i = 0; i < T * K; ++i) pairs[pl.placement.device_of(slots[i])].push_back(i);
  std::vector<int64_t> send_rows(R, 0), tokens, pair_order;
  std::vector<int32_t> send_slots;  // each row's slot among those of the rank it goes to
  tokens.reserve(T * K);
  pair_order.reserve(T * K);
  send_slots.reserve(T * K);
  for (int32_t d = 0; d < D; ++d) {
    const int32_t r = d / held;
    send_rows[r] += static_cast<int64_t>(pairs[d].size());
    ctx.experts->device_rows[static_cast<size_t>(layer) * D + d] += static_cast<int64_t>(pairs[d].size());
    for (int64_t pair : pairs[d]) {
      tokens.push_back(pair / K);
      pair_order.push_back(pair);
      send_slots.push_back(slots[pair] - r * held * S);
    }
  }
  // Each rank learns how many rows come from every rank and which of its slots each is for.
  std::vector<int64_t> recv_rows = send_rows;
  std::vector<int32_t> recv_slots = send_slots;
  if (R > 1) {
    if (!ranks->AllToAllCounts(send_rows, &recv_rows)) std::fill(recv_rows.begin(), recv_rows.end(), 0);
    std::vector<int64_t> send_bytes(R), recv_bytes(R);
    int64_t received = 0;
    for (int32_t r = 0; r < R; ++r) {
      send_bytes[r] = send_rows[r] * static_cast<int64_t>(sizeof(int32_t));
      recv_bytes[r] = recv_rows[r] * static_cast<int64_t>(sizeof(int32_t));
      received += recv_rows[r];
    }
    recv_slots.assign(received, 0);
    ranks->AllToAll(send_slots.data(), send_bytes, recv_slots.data(), recv_bytes);  // a failure sticks
  }
  const int64_t sent = T * K, received = static_cast<int64_t>(recv_slots.size());
  // Dispatch: the rows, grouped by the rank they go to, gathered from the token rows and moved
  // over the ranks' transport.
  float* send = buf.dz.as<float>((sent + received) * w);  // [sent, w] to send, then [received, w] received
  float* recv = send + sent * w;
  int32_t* local_ids = buf.dids.as<int32_t>(std::max<int64_t>(received, 1));
  if (received > buf.unit_rows) {  // unit weights, uploaded once per growth rather than every layer
    buf.unit_rows = std::max(received, 2 * buf.unit_rows);
    const std::vector<float> unit(static_cast<size_t>(buf.unit_rows), 1.f);
    be->CopyToDevice(buf.dw.as<float>(buf.unit_rows), unit.data(), unit.size() * sizeof(float));
  }
  const float* unit_weights = static_cast<const float*>(buf.dw.data());
  be->GatherRows(z, tokens.data(), sent, w, send);
  be->ExchangeRows(send, send_rows, recv, recv_rows, w);
  if (received > 0) be->CopyToDevice(local_ids, recv_slots.data(), received * sizeof(int32_t));
  // This rank runs its slots' experts over the rows it received, with unit weights, so its output
  // rows are the experts' outputs as they are.
  float* out_rows = buf.rows.as<float>((received + sent) * w);  // [received, w] computed, then [sent, w] returned
  float* back = out_rows + received * w;
  if (received > 0) {
    MoeParams m;
    m.z = recv;
    m.num_tokens = received;
    m.in_width = w;
    m.out_width = w;
    m.topk_ids = local_ids;
    m.topk_weights = unit_weights;
    m.top_k = 1;
    m.num_experts = held * S;
    m.gate = pl.gate.data() + static_cast<size_t>(me) * held * S;
    m.up = pl.up.data() + static_cast<size_t>(me) * held * S;
    m.down = pl.down.data() + static_cast<size_t>(me) * held * S;
    m.act = act_;
    m.out = out_rows;
    be->MoeExperts(m);
  }
  // Combine, part 1: results travel back over the transport and return to their pairs.
  be->ExchangeRows(out_rows, recv_rows, back, send_rows, w);
  float* y = buf.dy.as<float>(std::max<int64_t>(sent, 1) * w);  // [T * K, w] unweighted expert outputs, pair order
  be->ScatterRows(back, pair_order.data(), sent, w, y);
  // Combine, part 2: weighted sum over each token's K pairs in pair order, as the single-device op.
  be->CombineExpertOutputs(y, weights, T, static_cast<int32_t>(K), w, out);
}

}  // namespace ls
