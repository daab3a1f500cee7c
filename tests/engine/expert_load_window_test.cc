// ExpertLoadWindow: totals over exactly the last W steps, as the ring wraps many times.
#include "engine/expert_load_window.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

namespace ls {
namespace {

TEST(ExpertLoadWindow, TotalsAreTheLastWindowOfStepsAsTheRingWraps) {
  const int32_t layers = 3, experts = 5, window = 4, n = layers * experts;
  ExpertLoadWindow w(layers, experts, window);
  std::mt19937 rng(3);
  std::vector<int64_t> running(n, 0), before(n, 0);
  std::deque<std::vector<int64_t>> steps;  // the reference: each step's counts
  for (int step = 0; step < 23; ++step) {
    std::vector<int64_t> counts(n);
    for (auto& c : counts) c = rng() % 7;
    for (int i = 0; i < n; ++i) running[i] += counts[i];
    w.AddStepDifference(running, before);
    before = running;
    steps.push_back(counts);
    if (static_cast<int32_t>(steps.size()) > window) steps.pop_front();
    ASSERT_EQ(w.steps(), static_cast<int32_t>(steps.size()));
    for (int32_t l = 0; l < layers; ++l) {
      const std::vector<double> loads = w.LayerLoads(l);
      for (int32_t e = 0; e < experts; ++e) {
        int64_t expected = 0;
        for (const auto& s : steps) expected += s[l * experts + e];
        ASSERT_EQ(loads[e], static_cast<double>(expected)) << "step " << step << " layer " << l << " expert " << e;
        ASSERT_EQ(w.totals()[l * experts + e], expected);
      }
    }
  }
}

TEST(ExpertLoadWindow, WindowOfOneStepHoldsTheLatestStep) {
  ExpertLoadWindow w(1, 2, 1);
  w.AddStepDifference({3, 4}, {0, 0});
  w.AddStepDifference({10, 4}, {3, 4});
  EXPECT_EQ(w.steps(), 1);
  EXPECT_EQ(w.LayerLoads(0), (std::vector<double>{7, 0}));
}

}  // namespace
}  // namespace ls
