// ThreadPool implementation: generation counter + atomic wait, dynamic task counter.
#include "kernels/thread_pool.h"

#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#define LS_CPU_RELAX() _mm_pause()
#else
#define LS_CPU_RELAX() ((void)0)
#endif

namespace ls {

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunTasks() {
  for (;;) {
    int64_t i = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (i >= num_tasks_) break;
    (*fn_)(i);
  }
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;  // the generation at construction: a loop may start before this thread runs
  for (;;) {
    // Spin for a short while (about 100 microseconds) before sleeping: the next loop of a step
    // usually starts within microseconds.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen) {
      LS_CPU_RELAX();
      if (++spins % 64 == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          generation_.wait(seen);
        } else {
          std::this_thread::yield();
        }
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    RunTasks();
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  fn_ = &fn;
  num_tasks_ = n;
  next_task_.store(0, std::memory_order_relaxed);
  busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  RunTasks();
  // Workers that were descheduled still have to check in; yield now and then so that they can
  // run when the machine is oversubscribed.
  for (int spins = 0; busy_workers_.load(std::memory_order_acquire) != 0; ++spins) {
    LS_CPU_RELAX();
    if (spins % 256 == 255) std::this_thread::yield();
  }
  fn_ = nullptr;
}

}  // namespace ls
