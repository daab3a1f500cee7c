// latentserve-bench statistics against hand-computed cases: percentiles, rates, TPOT, ITL, goodput.
#include "tools/bench/stats.h"

#include <gtest/gtest.h>

#include "tools/bench/workload.h"

namespace ls::bench {
namespace {

TEST(BenchStats, PercentileInterpolatesLinearly) {
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile({10, 20}, 90), 19);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
  // 0..100: the 99th percentile is 99.
  std::vector<double> v;
  for (int i = 0; i <= 100; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 99);
}

TEST(BenchStats, SummaryOfHandWorkedRequests) {
  // A: start 0, tokens at 0.1, 0.2, 0.4 (3 tokens), end 0.4 -> TTFT 0.1, TPOT 0.15, ITL 0.1, 0.2.
  // B: start 0.5, tokens at 1.0, 1.5 (2 tokens), end 1.5 -> TTFT 0.5, TPOT 0.5, ITL 0.5.
  // C: failed (http_429).
  RequestRecord a{0, 0.1, 0.4, {0.1, 0.2, 0.4}, 10, 3, ""};
  RequestRecord b{0.5, 1.0, 1.5, {1.0, 1.5}, 20, 2, ""};
  RequestRecord c{0.6, -1, 0.61, {}, 5, 0, "http_429"};
  Summary s = Summarize({a, b, c}, 2.0, Slo{0.2, 1.0});
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.errors.at("http_429"), 1);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 2.5);
  EXPECT_DOUBLE_EQ(s.goodput, 0.5) << "only A meets TTFT <= 200 ms";
  EXPECT_NEAR(s.ttft.mean, 0.3, 1e-12);
  EXPECT_NEAR(s.tpot.mean, (0.15 + 0.5) / 2, 1e-12);
  EXPECT_EQ(s.itl.count, 3);
  EXPECT_NEAR(s.itl.p50, 0.2, 1e-12);
  EXPECT_NEAR(s.e2e.max, 1.0, 1e-12);
}

TEST(BenchStats, TpotNeedsTwoTokens) {
  double t;
  EXPECT_FALSE(Tpot(RequestRecord{0, 0.1, 0.1, {0.1}, 1, 1, ""}, &t));
  EXPECT_TRUE(Tpot(RequestRecord{0, 0.1, 0.3, {0.1, 0.3}, 1, 2, ""}, &t));
  EXPECT_DOUBLE_EQ(t, 0.2);
}

TEST(BenchWorkload, SyntheticLengthsStayInRangeAndAreSeeded) {
  SyntheticSpec spec{100, 20, 0.5, 500, 3};
  auto a = SyntheticWorkload(spec, 50), b = SyntheticWorkload(spec, 50);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_GE(a[i].prompt_ids.size(), 50u);
    EXPECT_LE(a[i].prompt_ids.size(), 150u);
    EXPECT_GE(a[i].max_tokens, 10);
    EXPECT_LE(a[i].max_tokens, 30);
    for (int32_t id : a[i].prompt_ids) EXPECT_LT(id, 500);
    EXPECT_EQ(a[i].prompt_ids, b[i].prompt_ids);
  }
}

}  // namespace
}  // namespace ls::bench
