// ThreadPool: a fixed set of worker threads running data-parallel loops for the CPU kernels.
// Workers spin briefly between loops (a decode step issues dozens of short loops) and then sleep.
// A loop finishes when its tasks are done, not when every worker has checked in, so a worker the
// OS has descheduled (an oversubscribed machine) delays a loop only by a task it already holds.
// ParallelFor may be called from one thread at a time; it is not reentrant.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ls {

class ThreadPool {
 public:
  // num_threads counts the calling thread: 1 means run everything inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(i) for every i in [0, n), spread over the threads; returns when all are done.
  // Tasks are handed out dynamically, so uneven task sizes balance themselves.
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);
  // The same on `pool`, or inline in order where it is null (callers whose pool is optional).
  static void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t)>& fn) {
    if (pool) {
      pool->ParallelFor(n, fn);
    } else {
      for (int64_t i = 0; i < n; ++i) fn(i);
    }
  }

  // Calls fn(begin, end) over consecutive ranges that cover [0, n), spread over the threads: each
  // range holds task_cost / item_cost items (at least one; the last range may hold fewer), for
  // items that cost item_cost each (values of a row, say); a single range runs inline. For loops
  // of many cheap items (rows of a norm), where a task per item would cost more than the item.
  void ParallelForRanges(int64_t n, int64_t item_cost, int64_t task_cost,
                         const std::function<void(int64_t, int64_t)>& fn);

  // Wakes sleeping workers so that they spin, ready for loops that are about to come (the start
  // of a model step after the engine's own work): their wake-up latency then overlaps the
  // caller's work instead of delaying the first loop.
  void Wake();

 private:
  struct Job {
    const std::function<void(int64_t)>* fn;
    int64_t n;
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
  };
  static void RunTasks(Job& job);
  void WorkerLoop();

  std::vector<std::thread> workers_;
  std::mutex mu_;                 // guards current_
  std::shared_ptr<Job> current_;  // the latest loop; workers keep a reference while they work on it
  std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace ls
