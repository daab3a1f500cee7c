// Routed experts kept on the host until placed (how a rank of a group loads): the model's own
// prepared weights leave them out, each placed slot gets the backend's prepared copy, and the
// logits are bit for bit those of the model that prepared every expert at load.
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "tests/test_util.h"

namespace ls {
namespace {

// Expert e in device e % devices's next slot; spare slots replicate experts 0, 1, ... elsewhere.
std::vector<std::pair<int32_t, ExpertPlacement>> Placements(const Model& m, int32_t devices, int32_t slots) {
  ExpertPlacement p;
  p.num_experts = static_cast<int32_t>(m.config().moe.num_experts);
  p.num_devices = devices;
  p.slots_per_device = slots;
  p.slot_expert.assign(static_cast<size_t>(devices) * slots, -1);
  std::vector<int32_t> used(devices, 0);
  for (int32_t e = 0; e < p.num_experts; ++e) p.slot_expert[(e % devices) * slots + used[e % devices]++] = e;
  for (int32_t d = 0; d < devices; ++d)
    for (int32_t e = 0; used[d] < slots && e < p.num_experts; ++e)
      if (e % devices != d) p.slot_expert[d * slots + used[d]++] = e;
  p.Index();
  EXPECT_TRUE(p.Validate().ok()) << p.Validate();
  std::vector<std::pair<int32_t, ExpertPlacement>> out;
  for (int32_t l = 0; l < m.config().num_hidden_layers; ++l)
    if (m.config().is_moe_layer(l)) out.emplace_back(l, p);
  return out;
}

TEST(PlacedExperts, ExpertsKeptOnTheHostArePreparedIntoTheirSlotsOnly) {
  for (const std::string name : {"latent_sigmoid_situ_bf16", "plain_softmax_silu_tied_f32"}) {
    CpuBackend backend(2);
    const std::string dir = testing::FixtureDir(name);
    auto full = LoadModel(dir, &backend);
    LoadOptions options;
    options.routed_experts_on_host = true;
    auto host = LoadModel(dir, &backend, options);
    ASSERT_TRUE(full.ok() && host.ok()) << full.status() << host.status();
    const int32_t N = static_cast<int32_t>((*full)->config().moe.num_experts);
    // The prepared weights lack exactly the packed experts.
    auto all = (*full)->BuildPlacedExperts(Placements(**full, 1, N));
    ASSERT_TRUE(all.ok()) << all.status();
    EXPECT_GE((*full)->prepared_weight_bytes() - (*host)->prepared_weight_bytes(), (*all)->rank_bytes()) << name;

    std::vector<int32_t> ids;
    for (int i = 0; i < 21; ++i) ids.push_back(1 + (i * 37) % static_cast<int32_t>((*full)->config().vocab_size - 1));
    std::vector<float> want, got;
    ASSERT_TRUE((*full)->ForwardSequence(ids, true, &want).ok());
    auto placed = (*host)->BuildPlacedExperts(Placements(**host, 2, N / 2 + 1));
    ASSERT_TRUE(placed.ok()) << placed.status();
    (*host)->SetPlacedExperts(*placed);
    ASSERT_TRUE((*host)->ForwardSequence(ids, true, &got).ok());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(testing::MaxAbsDiff(got.data(), want.data(), got.size()), 0.f) << name;
  }
}

}  // namespace
}  // namespace ls
