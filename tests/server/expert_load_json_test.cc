// The /v1/expert_load body: what each MoE layer carries (window tokens, placement per device, rows
// and their balance), dense layers left out, totals only on request, valid JSON whatever the
// numbers, and a K3-sized answer (92 MoE layers x 896 experts, 1,024 slots) in < 50 ms and < 2 MB.
#include "server/expert_load_json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>

#include "engine/expert_planner.h"
#include "nlohmann/json.hpp"

namespace ls::server {
namespace {

using json = nlohmann::json;

ExpertLoadJsonOptions Options(double now, bool totals = false, std::string model = "") {
  ExpertLoadJsonOptions o;
  o.now_unix_seconds = now;
  o.totals = totals;
  o.model = std::move(model);
  return o;
}

// 3 layers (layer 0 dense), 4 experts, 2 devices x 3 slots.
struct Small {
  MetricsSnapshot m;
  ExpertLoadWindowSnapshot w;
  Small() {
    m.num_layers = 3;
    m.num_experts = 4;
    m.moe_layers = {1, 2};
    m.steps = 40;
    m.expert_tokens = {0, 0, 0, 0, 10, 20, 30, 40, 5, 5, 5, 25};
    m.num_devices = 2;
    m.slots_per_device = 3;
    m.device_rows = {0, 0, 60, 40, 18, 22};
    m.replica_map = {{}, {3, 0, 2, 3, 1, -1}, {0, 1, 3, 2, 3, -1}};
    m.replans = 1;
    m.replan_events.push_back({1700000000.5, 17, 0.002, 1.5, 1.1});
    m.replan_events.back().chunks = 2;
    m.replan_events.back().max_chunk_seconds = 0.0004;
    m.migration_chunks = {{1700000000.25, 15, 3, 3072, 0.0004}, {1700000000.5, 16, 2, 2048, 0.0003}};
    w.steps = 8;
    w.capacity = 16;
    w.first_step_unix_seconds = 1700000001.0;
    w.last_step_unix_seconds = 1700000002.25;
    w.num_experts = 4;
    w.moe_layers = {1, 2};
    w.tokens = {1, 2, 3, 6, 0, 0, 0, 0};
  }
};

TEST(ExpertLoadJsonTest, EachMoeLayerCarriesWindowTokensPlacementPerDeviceAndRows) {
  Small s;
  const json j = json::parse(ExpertLoadJson(s.m, s.w, Options(1700000003.0, false, "tiny \"q\"")));
  EXPECT_EQ(j["object"], "expert_load");
  EXPECT_EQ(j["model"], "tiny \"q\"");
  EXPECT_DOUBLE_EQ(j["time"].get<double>(), 1700000003.0);
  EXPECT_EQ(j["steps"], 40);
  EXPECT_EQ(j["num_experts"], 4);
  EXPECT_EQ(j["num_devices"], 2);
  EXPECT_EQ(j["slots_per_device"], 3);
  EXPECT_EQ(j["window"]["steps"], 8);
  EXPECT_EQ(j["window"]["capacity"], 16);
  EXPECT_DOUBLE_EQ(j["window"]["first_step_time"].get<double>(), 1700000001.0);
  EXPECT_DOUBLE_EQ(j["window"]["last_step_time"].get<double>(), 1700000002.25);
  ASSERT_EQ(j["layers"].size(), 2u) << "the dense layer 0 is left out";
  const json& l1 = j["layers"][0];
  EXPECT_EQ(l1["layer"], 1);
  EXPECT_EQ(l1["tokens"], json::parse("[1,2,3,6]"));
  EXPECT_DOUBLE_EQ(l1["max_over_mean"].get<double>(), 6.0 / 3.0);          // mean 12/4
  EXPECT_DOUBLE_EQ(l1["total_max_over_mean"].get<double>(), 40.0 / 25.0);  // since start: mean 100/4
  EXPECT_EQ(l1["device_rows"], json::parse("[60,40]"));
  EXPECT_DOUBLE_EQ(l1["device_max_over_mean"].get<double>(), 60.0 / 50.0);
  EXPECT_EQ(l1["slot_expert"], json::parse("[[3,0,2],[3,1,-1]]"));
  EXPECT_FALSE(l1.contains("tokens_total"));
  const json& l2 = j["layers"][1];
  EXPECT_EQ(l2["layer"], 2);
  EXPECT_EQ(l2["max_over_mean"], 0.0) << "no tokens in the window: 0, not a division by zero";
  EXPECT_EQ(l2["slot_expert"], json::parse("[[0,1,3],[2,3,-1]]"));
  ASSERT_EQ(j["replan_events"].size(), 1u);
  const json& e = j["replan_events"][0];
  EXPECT_DOUBLE_EQ(e["time"].get<double>(), 1700000000.5);
  EXPECT_EQ(e["step"], 17);
  EXPECT_DOUBLE_EQ(e["plan_seconds"].get<double>(), 0.002);
  EXPECT_DOUBLE_EQ(e["device_max_over_mean_before"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(e["device_max_over_mean_after"].get<double>(), 1.1);
  EXPECT_EQ(e["chunks"], 2);
  EXPECT_DOUBLE_EQ(e["max_chunk_seconds"].get<double>(), 0.0004);
  ASSERT_EQ(j["migration_chunks"].size(), 2u);
  const json& c = j["migration_chunks"][1];
  EXPECT_DOUBLE_EQ(c["time"].get<double>(), 1700000000.5);
  EXPECT_EQ(c["step"], 16);
  EXPECT_EQ(c["slots"], 2);
  EXPECT_EQ(c["bytes"], 2048);
  EXPECT_DOUBLE_EQ(c["seconds"].get<double>(), 0.0003);
}

TEST(ExpertLoadJsonTest, TotalsSinceStartOnlyWhenAsked) {
  Small s;
  const json j = json::parse(ExpertLoadJson(s.m, s.w, Options(0, true)));
  EXPECT_EQ(j["layers"][0]["tokens_total"], json::parse("[10,20,30,40]"));
  EXPECT_EQ(j["layers"][1]["tokens_total"], json::parse("[5,5,5,25]"));
}

TEST(ExpertLoadJsonTest, WithoutExpertParallelismThereAreNoPlacementFields) {
  Small s;
  s.m.num_devices = 0;
  s.m.slots_per_device = 0;
  s.m.device_rows.clear();
  s.m.replica_map.clear();
  const json j = json::parse(ExpertLoadJson(s.m, s.w, {}));
  EXPECT_EQ(j["num_devices"], 0);
  EXPECT_FALSE(j["layers"][0].contains("slot_expert"));
  EXPECT_FALSE(j["layers"][0].contains("device_rows"));
  EXPECT_EQ(j["layers"][0]["tokens"], json::parse("[1,2,3,6]"));
}

TEST(ExpertLoadJsonTest, NonFiniteFiguresAndControlCharactersStillMakeValidJson) {
  Small s;
  s.m.replan_events[0].plan_seconds = std::numeric_limits<double>::quiet_NaN();
  s.m.replan_events[0].device_max_over_mean_after = std::numeric_limits<double>::infinity();
  const std::string text = ExpertLoadJson(s.m, s.w, Options(-0.0, false, "a\nb\\c\x01"));
  const json j = json::parse(text);  // throws on invalid JSON
  EXPECT_EQ(j["replan_events"][0]["plan_seconds"], 0);
  EXPECT_EQ(j["replan_events"][0]["device_max_over_mean_after"], 0);
  EXPECT_EQ(j["model"], "a\nb\\c\x01");
}

TEST(ExpertLoadJsonTest, MismatchedSnapshotsAreSkippedNotReadOutOfBounds) {
  Small s;
  s.m.expert_tokens.resize(5);  // too short for layer 1
  s.m.device_rows.resize(3);    // too short for layer 1
  s.m.replica_map[2].pop_back();
  const json j = json::parse(ExpertLoadJson(s.m, s.w, Options(0, true)));
  EXPECT_EQ(j["layers"][0]["total_max_over_mean"], 0);
  EXPECT_FALSE(j["layers"][0].contains("tokens_total"));
  EXPECT_FALSE(j["layers"][0].contains("device_rows"));
  EXPECT_FALSE(j["layers"][1].contains("device_rows"));
}

// K3's shape: 92 MoE layers after a dense one, 896 experts; 32 devices x 32 slots (128 spare
// replicas), planned from random skewed loads; counts as a 256-step window of 8,192-token steps
// (top-16) gives, and totals of a long-running server.
TEST(ExpertLoadJsonTest, K3SizedAnswerTakesUnder50msAndUnder2MB) {
  constexpr int32_t kLayers = 93, kExperts = 896, kDevices = 32, kSlots = 32;
  std::mt19937_64 rng(27);
  MetricsSnapshot m;
  ExpertLoadWindowSnapshot w;
  m.num_layers = kLayers;
  m.num_experts = kExperts;
  m.num_devices = kDevices;
  m.slots_per_device = kSlots;
  m.steps = 123456789;
  m.replica_map.assign(kLayers, {});
  m.expert_tokens.assign(static_cast<size_t>(kLayers) * kExperts, 0);
  m.device_rows.assign(static_cast<size_t>(kLayers) * kDevices, 0);
  w.num_experts = kExperts;
  w.steps = w.capacity = 256;
  const double mean_window = 256.0 * 8192 * 16 / kExperts;  // ~37,000 tokens per expert
  std::lognormal_distribution<double> skew(0.0, 0.6);
  for (int32_t l = 1; l < kLayers; ++l) {
    m.moe_layers.push_back(l);
    w.moe_layers.push_back(l);
    std::vector<double> loads(kExperts);
    for (int32_t e = 0; e < kExperts; ++e) {
      loads[e] = mean_window * skew(rng);
      w.tokens.push_back(static_cast<int64_t>(loads[e]));
      m.expert_tokens[static_cast<size_t>(l) * kExperts + e] = static_cast<int64_t>(loads[e] * 40000);
    }
    auto p = PlanPlacement(loads, kDevices, kSlots);
    ASSERT_TRUE(p.ok()) << p.status();
    m.replica_map[l] = p->slot_expert;
    const std::vector<double> rows = ExpectedDeviceLoads(*p, loads);
    for (int32_t d = 0; d < kDevices; ++d)
      m.device_rows[static_cast<size_t>(l) * kDevices + d] = static_cast<int64_t>(rows[d]);
  }
  for (size_t i = 0; i < MetricsSnapshot::kMaxReplanEvents; ++i)
    m.replan_events.push_back({1.7e9 + i, 1000 * i, 0.25, 1.31, 1.02});

  auto time_best_of = [&](bool totals, std::string* out) {
    double best = 1e9;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      *out = ExpertLoadJson(m, w, Options(1.7e9, totals));
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  std::string body, with_totals;
  const double ms = time_best_of(false, &body);
  const double ms_totals = time_best_of(true, &with_totals);
  const auto t0 = std::chrono::steady_clock::now();
  const json j = json::parse(body);
  const double parse_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "{\"bench\": \"expert_load_json_k3\", \"layers\": %zu, \"experts\": %d, \"slots\": %d, \"bytes\": %zu, "
      "\"ms\": %.2f, \"bytes_with_totals\": %zu, \"ms_with_totals\": %.2f, \"parse_ms\": %.2f}\n",
      j["layers"].size(), kExperts, kDevices * kSlots, body.size(), ms, with_totals.size(), ms_totals, parse_ms);
  ASSERT_EQ(j["layers"].size(), 92u);
  EXPECT_EQ(j["layers"][91]["slot_expert"].size(), static_cast<size_t>(kDevices));
  EXPECT_EQ(j["layers"][0]["tokens"].size(), static_cast<size_t>(kExperts));
  EXPECT_LT(body.size(), size_t{2} << 20);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the time limit is for an optimised build, not a sanitizer's (" << ms << " ms here)";
#endif
  EXPECT_LT(ms, 50.0);
}

}  // namespace
}  // namespace ls::server
