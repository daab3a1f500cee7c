// PlacedExperts: per-device copies of the placed experts' weights.
#include "models/placed_experts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ls {
namespace {

// Device bytes of a weight's copy: values or codes, and a quantized weight's scales and zero points.
size_t StoredBytes(const Tensor& t) { return Align64(t.bytes()) + Align64(t.scale_bytes()) + Align64(t.zero_bytes()); }

}  // namespace

absl::StatusOr<std::unique_ptr<PlacedExpertsBuild>> PlacedExpertsBuild::Start(
    const std::vector<const ExpertWeights*>& experts, Backend* backend,
    const std::vector<std::pair<int32_t, ExpertPlacement>>& placements, int32_t rank, int32_t num_ranks, bool prepare) {
  const int32_t num_layers = static_cast<int32_t>(experts.size());
  if (num_ranks < 1 || rank < 0 || rank >= num_ranks)
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " of ", num_ranks, " ranks is not a rank"));
  std::unique_ptr<PlacedExpertsBuild> build(new PlacedExpertsBuild);
  build->experts_ = experts;
  build->backend_ = backend;
  build->prepare_ = prepare;
  auto out = std::make_shared<PlacedExperts>();
  out->num_ranks_ = num_ranks;
  out->rank_ = rank;
  out->layers_.resize(num_layers);
  for (const auto& [l, p] : placements) {
    if (l < 0 || l >= num_layers || !experts[l])
      return absl::InvalidArgumentError(absl::StrCat("expert placement names layer ", l, ", which is not a MoE layer"));
    const int32_t num_experts = static_cast<int32_t>(experts[l]->gate.size());
    if (p.num_experts != num_experts)
      return absl::InvalidArgumentError(absl::StrCat("expert placement for layer ", l, " has ", p.num_experts,
                                                     " experts; the model has ", num_experts));
    if (auto s = p.Validate(); !s.ok()) return absl::InvalidArgumentError(absl::StrCat("layer ", l, ": ", s.message()));
    if (out->num_devices_ == 0) {
      out->num_devices_ = p.num_devices;
      out->slots_per_device_ = p.slots_per_device;
    } else if (p.num_devices != out->num_devices_ || p.slots_per_device != out->slots_per_device_) {
      return absl::InvalidArgumentError("expert placements must share devices and slots across layers");
    }
    out->layers_[l].placement = p;
  }
  for (int32_t l = 0; l < num_layers; ++l)
    if (experts[l] && out->layers_[l].placement.num_devices == 0)
      return absl::InvalidArgumentError(absl::StrCat("expert placement is missing MoE layer ", l));
  const int32_t D = out->num_devices_, S = out->slots_per_device_;
  if (D % num_ranks != 0)
    return absl::InvalidArgumentError(absl::StrCat("the expert placement's ", D, " devices do not split evenly over ",
                                                   num_ranks, " ranks (each rank holds the same number of devices)"));
  const int32_t first = rank * (D / num_ranks), held = D / num_ranks;  // this rank's devices
  build->first_device_ = first;
  // A weight's bytes in a slot: its prepared form when preparing and the backend converts it
  // (64-byte aligned, as Model does), else the copy of its every part.
  auto stored = [&](const Tensor& t) {
    const size_t n = prepare ? backend->PreparedWeightBytes(t, WeightUse::kMatmulExpert) : 0;
    return n > 0 ? Align64(n) : StoredBytes(t);
  };
  // Bytes per device of this rank, then one buffer per device holding its slots of every layer.
  std::vector<size_t> bytes(held, 0);
  for (int32_t l = 0; l < num_layers; ++l) {
    PlacedLayer& pl = out->layers_[l];
    if (pl.placement.num_devices == 0) continue;
    const ExpertWeights& L = *experts[l];
    pl.gate.resize(D * S);
    pl.up.resize(D * S);
    pl.down.resize(D * S);
    for (int32_t s = first * S; s < (first + held) * S; ++s) {
      const int32_t e = pl.placement.slot_expert[s];
      if (e < 0) continue;
      const size_t n = stored(L.gate[e]) + stored(L.up[e]) + stored(L.down[e]);
      bytes[s / S - first] += n;
      if (pl.placement.replicas[e].front() != s) out->redundant_bytes_ += n;  // not the expert's first copy
      build->order_.emplace_back(l, s);
    }
  }
  build->used_.assign(held, 0);
  for (int32_t d = 0; d < held; ++d) {
    out->storage_.emplace_back(backend, std::max<size_t>(bytes[d], 64));
    out->bytes_per_device_ = std::max(out->bytes_per_device_, bytes[d]);
    out->rank_bytes_ += bytes[d];
  }
  build->out_ = std::move(out);
  return build;
}

// Each part of a copied weight (codes or values, then scales and zero points of a quantized one)
// is 64-byte aligned, with shape, dtype, layout and format kept.
Tensor PlacedExpertsBuild::Copy(int32_t d, const Tensor& t) {
  auto* base = static_cast<unsigned char*>(out_->storage_[d].data());
  if (const size_t n = prepare_ ? backend_->PreparedWeightBytes(t, WeightUse::kMatmulExpert) : 0; n > 0) {
    auto* dst = base + used_[d];
    used_[d] += Align64(n);
    return backend_->PrepareWeight(t, WeightUse::kMatmulExpert, dst);
  }
  auto part = [&](const void* src, size_t n) {
    auto* dst = base + used_[d];
    backend_->CopyToDevice(dst, src, n);
    used_[d] += Align64(n);
    return dst;
  };
  Tensor placed = t;
  placed.data = part(t.data, t.bytes());
  if (t.quantized()) placed.quant.scale = part(t.quant.scale, t.scale_bytes());
  if (t.quant.zero) placed.quant.zero = part(t.quant.zero, t.zero_bytes());
  return placed;
}

size_t PlacedExpertsBuild::CopyNextSlot() {
  if (done()) return 0;
  const auto [l, s] = order_[next_++];
  PlacedLayer& pl = out_->layers_[l];
  const ExpertWeights& L = *experts_[l];
  const int32_t e = pl.placement.slot_expert[s], d = s / out_->slots_per_device_ - first_device_;
  const size_t before = used_[d];
  pl.gate[s] = Copy(d, L.gate[e]);
  pl.up[s] = Copy(d, L.up[e]);
  pl.down[s] = Copy(d, L.down[e]);
  return used_[d] - before;
}

std::shared_ptr<const PlacedExperts> PlacedExpertsBuild::Finish() {
  return done() ? std::shared_ptr<const PlacedExperts>(std::move(out_)) : nullptr;
}

}  // namespace ls
