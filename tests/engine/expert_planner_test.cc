// Expert placement planner: hand-worked cases and property tests over random loads (every expert
// placed, slot limits respected, no two copies of an expert on one device, loads conserved), the
// round-robin dispatcher, and JSON round trips.
#include "engine/expert_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace ls {
namespace {

TEST(ExpertPlacement, ReplicaCountsFollowLoadPerReplica) {
  // 4 experts, 2 devices x 3 slots = 2 spare: expert 0 (load 10) gets 2 replicas (10/2 = 5 > 4),
  // then expert 1 (load 4) and expert 0 (10/2 = 5) compete: 0 has 5 per replica, 1 has 4 -> but
  // 0 already has 2 = D replicas, so expert 1 gets the second spare.
  EXPECT_EQ(ReplicaCounts({10, 4, 1, 1}, 2, 3), (std::vector<int32_t>{2, 2, 1, 1}));
  EXPECT_EQ(ReplicaCounts({1, 1, 1, 1}, 2, 2), (std::vector<int32_t>{1, 1, 1, 1}));
}

TEST(ExpertPlacement, HandWorkedPacking) {
  // Loads 8, 4, 2, 2 on 2 devices x 2 slots: no spares. Heaviest first: 8 -> d0, 4 -> d1, 2 -> d1
  // (4 < 8), 2 -> d1 is full -> d0. Device loads 10 and 6.
  auto p = PlanPlacement({8, 4, 2, 2}, 2, 2);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->slot_expert, (std::vector<int32_t>{0, 3, 1, 2}));
  EXPECT_EQ(ExpectedDeviceLoads(*p, {8, 4, 2, 2}), (std::vector<double>{10, 6}));
  // With one spare slot per device the hot expert is split over both devices.
  auto q = PlanPlacement({8, 4, 2, 2}, 2, 3);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->replicas[0].size(), 2u);
  EXPECT_NEAR(MaxOverMean(ExpectedDeviceLoads(*q, {8, 4, 2, 2})), 1.0, 0.25);
}

TEST(ExpertPlacement, RejectsTooFewSlots) {
  EXPECT_FALSE(PlanPlacement({1, 1, 1, 1, 1}, 2, 2).ok());
}

TEST(ExpertPlacement, PropertiesHoldOnRandomLoads) {
  std::mt19937 rng(42);
  for (int round = 0; round < 300; ++round) {
    const int32_t D = 1 + rng() % 8, N = 1 + rng() % 64;
    const int32_t S = (N + D - 1) / D + rng() % 4;
    std::vector<double> loads(N);
    const double zipf = (rng() % 30) / 10.0;
    for (int32_t e = 0; e < N; ++e) loads[e] = 1000.0 / std::pow(1 + (rng() % N), zipf) + (rng() % 3);
    auto p = PlanPlacement(loads, D, S);
    ASSERT_TRUE(p.ok()) << "D=" << D << " S=" << S << " N=" << N << ": " << p.status();
    ASSERT_TRUE(p->Validate().ok()) << p->Validate();
    ASSERT_EQ(p->slot_expert.size(), static_cast<size_t>(D * S));
    for (int32_t e = 0; e < N; ++e) {
      ASSERT_GE(p->replicas[e].size(), 1u);
      ASSERT_LE(p->replicas[e].size(), static_cast<size_t>(D));
    }
    const auto dev = ExpectedDeviceLoads(*p, loads);
    EXPECT_NEAR(std::accumulate(dev.begin(), dev.end(), 0.0), std::accumulate(loads.begin(), loads.end(), 0.0), 1e-6)
        << "loads are conserved";
    // Spare slots are all used once there are enough experts to fill them.
    int32_t filled = 0;
    for (int32_t e : p->slot_expert) filled += e >= 0;
    EXPECT_EQ(filled, std::min<int64_t>(static_cast<int64_t>(D) * S, static_cast<int64_t>(N) * D));
  }
}

// Rows of an expert with one copy go to it; a replicated expert's rows, in order, to the copy on
// the device with the fewest rows so far, alternating between equal devices.
TEST(ExpertPlacement, DispatchSendsReplicatedRowsToTheLeastLoadedDevice) {
  ExpertPlacement p;
  p.num_experts = 5;
  p.num_devices = 2;
  p.slots_per_device = 3;
  p.slot_expert = {0, 1, 2, 0, 3, 4};  // expert 0 on both devices
  p.Index();
  ASSERT_TRUE(p.Validate().ok());
  // One-copy rows: two on device 0 (experts 1, 2), one on device 1 (expert 3). Expert 0's rows
  // then go to device 1 (2:1 -> 2:2), device 0 (tie; the other copy than last), device 1, device 0.
  const int32_t ids[7] = {1, 2, 0, 0, 0, 3, 0};
  EXPECT_EQ(DispatchSlots(p, ids, 7), (std::vector<int32_t>{1, 2, 3, 0, 3, 4, 0}));
  // Equal devices alternate, as round-robin would.
  const int32_t only0[4] = {0, 0, 0, 0};
  EXPECT_EQ(DispatchSlots(p, only0, 4), (std::vector<int32_t>{0, 3, 0, 3}));
}

// On random placements and routings: every row goes to a copy of its own expert, and the busiest
// device never holds more rows than under round-robin over the copies, summed over the cases.
TEST(ExpertPlacement, DispatchIsValidAndBalancesBetterThanRoundRobin) {
  std::mt19937 rng(5);
  int64_t greedy_max = 0, round_robin_max = 0;
  for (int c = 0; c < 200; ++c) {
    std::vector<double> loads(16);
    for (auto& l : loads) l = 1.0 + rng() % 20;
    auto p = PlanPlacement(loads, 4, 5);  // 20 slots for 16 experts: 4 replicas
    ASSERT_TRUE(p.ok());
    std::vector<int32_t> ids(64);
    for (auto& e : ids) e = static_cast<int32_t>(rng() % 16);
    const std::vector<int32_t> slots = DispatchSlots(*p, ids.data(), 64);
    std::vector<int64_t> rows(4, 0), rr(4, 0), next(16, 0);
    for (int i = 0; i < 64; ++i) {
      ASSERT_EQ(p->slot_expert[slots[i]], ids[i]);
      ++rows[p->device_of(slots[i])];
      const auto& reps = p->replicas[ids[i]];
      ++rr[p->device_of(reps[next[ids[i]]++ % reps.size()])];
    }
    greedy_max += *std::max_element(rows.begin(), rows.end());
    round_robin_max += *std::max_element(rr.begin(), rr.end());
  }
  EXPECT_LT(greedy_max, round_robin_max);
}

TEST(ExpertPlacement, JsonRoundTripAndErrors) {
  auto p = PlanPlacement({5, 3, 2, 1, 1, 1}, 3, 3);
  ASSERT_TRUE(p.ok());
  const std::string json = PlacementsToJson({{2, *p}, {3, *p}});
  auto back = PlacementsFromJson(json, 6);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].first, 2);
  EXPECT_EQ((*back)[0].second.slot_expert, p->slot_expert);
  EXPECT_FALSE(PlacementsFromJson("{", 6).ok());
  EXPECT_NE(PlacementsFromJson(R"({"num_devices": 2, "slots_per_device": 2, "layers": {"0": [0, 0, 1, 2]}})", 3)
                .status().message().find("two copies"),
            std::string::npos);
  EXPECT_NE(PlacementsFromJson(R"({"num_devices": 2, "slots_per_device": 2, "layers": {"0": [0, 1, -1, -1]}})", 3)
                .status().message().find("expert 2 is not placed"),
            std::string::npos);
}

}  // namespace
}  // namespace ls
