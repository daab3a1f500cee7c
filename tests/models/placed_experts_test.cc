// Routed experts kept on the host until placed (how a rank of a group loads): the model's own
// prepared weights leave them out, each placed slot gets the backend's prepared copy, and the
// logits are bit for bit those of the model that prepared every expert at load. A placement
// built a slot at a time (PlacedExpertsBuild) is the one built at once.
#include <gtest/gtest.h>

#include <cstring>

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

// (Also the INT4 checkpoint with zero points under int8 activations: each slot's expert is packed
// for the int8 kernels with its scales and zero points.)
TEST(PlacedExperts, ExpertsKeptOnTheHostArePreparedIntoTheirSlotsOnly) {
  struct Case {
    std::string name, dir;
    DType activations;
  };
  for (const Case& c :
       {Case{"latent_sigmoid_situ_bf16", testing::FixtureDir("latent_sigmoid_situ_bf16"), DType::kF32},
        Case{"plain_softmax_silu_tied_f32", testing::FixtureDir("plain_softmax_silu_tied_f32"), DType::kF32},
        Case{"qwen3_moe_int4_asym_f32, int8 activations", testing::HfFixtureDir("qwen3_moe_int4_asym_f32"),
             DType::kI8}}) {
    CpuBackend backend(2, c.activations);
    const std::string& name = c.name;
    const std::string& dir = c.dir;
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

// Slot by slot: every placed slot is counted and copied once, Finish gives nothing before the
// last, and each slot's weights hold the same bytes as in the placement built at once.
TEST(PlacedExperts, BuiltASlotAtATimeIsTheSameAsBuiltAtOnce) {
  for (const bool on_host : {false, true}) {
    CpuBackend backend(2);
    LoadOptions options;
    options.routed_experts_on_host = on_host;
    auto model = LoadModel(testing::FixtureDir("latent_sigmoid_situ_bf16"), &backend, options);
    ASSERT_TRUE(model.ok()) << model.status();
    const int32_t N = static_cast<int32_t>((*model)->config().moe.num_experts);
    const auto placements = Placements(**model, 3, N / 3 + 2);
    auto whole = (*model)->BuildPlacedExperts(placements);
    auto build = (*model)->StartPlacedExpertsBuild(placements);
    ASSERT_TRUE(whole.ok() && build.ok()) << whole.status() << build.status();
    size_t placed_slots = 0;
    for (const auto& [l, p] : placements)
      for (int32_t e : p.slot_expert) placed_slots += e >= 0;
    ASSERT_EQ((*build)->slots(), placed_slots);
    size_t bytes = 0;
    for (size_t i = 0; i < placed_slots; ++i) {
      EXPECT_FALSE((*build)->done());
      EXPECT_EQ((*build)->slots_copied(), i);
      if (i == placed_slots / 2) {
        EXPECT_EQ((*build)->Finish(), nullptr) << "not done yet";
      }
      const size_t n = (*build)->CopyNextSlot();
      EXPECT_GT(n, 0u);
      bytes += n;
    }
    EXPECT_TRUE((*build)->done());
    EXPECT_EQ((*build)->CopyNextSlot(), 0u);
    const std::shared_ptr<const PlacedExperts> slotwise = (*build)->Finish();
    ASSERT_NE(slotwise, nullptr);
    EXPECT_EQ(slotwise->rank_bytes(), (*whole)->rank_bytes());
    EXPECT_EQ(bytes, (*whole)->rank_bytes()) << "the slots' bytes fill the devices' buffers";
    EXPECT_EQ(slotwise->redundant_bytes(), (*whole)->redundant_bytes());
    for (const auto& [l, p] : placements) {
      const PlacedLayer* a = slotwise->layer(l);
      const PlacedLayer* b = (*whole)->layer(l);
      ASSERT_TRUE(a && b);
      for (size_t s = 0; s < p.slot_expert.size(); ++s) {
        if (p.slot_expert[s] < 0) continue;
        for (const auto& [x, y] :
             {std::pair{&a->gate[s], &b->gate[s]}, {&a->up[s], &b->up[s]}, {&a->down[s], &b->down[s]}}) {
          ASSERT_EQ(x->bytes(), y->bytes());
          EXPECT_EQ(std::memcmp(x->data, y->data, x->bytes()), 0) << "layer " << l << " slot " << s;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ls
