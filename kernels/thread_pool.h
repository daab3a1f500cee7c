// ThreadPool: a fixed set of worker threads running data-parallel loops for the CPU kernels.
// Workers spin briefly between loops (a decode step issues dozens of short loops) and then sleep.
// ParallelFor may be called from one thread at a time; it is not reentrant.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
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

 private:
  void WorkerLoop();
  void RunTasks();

  std::vector<std::thread> workers_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t num_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> busy_workers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace ls
