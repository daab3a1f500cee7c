// ThreadPool: every task runs exactly once, across many short loops and uneven task sizes.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "kernels/thread_pool.h"

namespace ls {
namespace {

TEST(ThreadPool, EveryTaskRunsOnceOverManyLoops) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(257);
  for (int loop = 0; loop < 2000; ++loop) {
    const int n = 1 + loop % 257;
    pool.ParallelFor(n, [&](int64_t i) { hits[i].fetch_add(1); });
  }
  int64_t total = 0;
  for (auto& h : hits) total += h.load();
  int64_t expected = 0;
  for (int loop = 0; loop < 2000; ++loop) expected += 1 + loop % 257;
  EXPECT_EQ(total, expected);
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  int sum = 0;
  pool.ParallelFor(10, [&](int64_t i) { sum += static_cast<int>(i); });
  EXPECT_EQ(sum, 45);
}

}  // namespace
}  // namespace ls
