// ThreadPool: every task runs exactly once, across many short loops and uneven task sizes.
#include <gtest/gtest.h>

#include <algorithm>
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

// Ranges cover [0, n) once, in pieces of `grain` (the last shorter), whatever n and grain; and
// wake-ups between loops (with no job) leave later loops intact.
TEST(ThreadPool, RangesCoverEveryItemOnceAfterWakes) {
  ThreadPool pool(2);
  for (int64_t n : {0, 1, 7, 64, 1000}) {
    for (int64_t grain : {0, 1, 3, 64, 5000}) {
      pool.Wake();
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int64_t> bad{0};
      pool.ParallelForRanges(n, /*item_cost=*/1, /*task_cost=*/grain, [&](int64_t b, int64_t e) {
        if (b >= e || e > n || (e - b > std::max<int64_t>(1, grain))) bad.fetch_add(1);
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      EXPECT_EQ(bad.load(), 0) << n << " " << grain;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << grain << " item " << i;
    }
  }
}

}  // namespace
}  // namespace ls
