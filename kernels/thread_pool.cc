// ThreadPool implementation: a published job per loop, dynamic task counter, completion by count.
#include "kernels/thread_pool.h"

#include <algorithm>
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

void ThreadPool::RunTasks(Job& job) {
  for (;;) {
    const int64_t i = job.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.n) break;
    (*job.fn)(i);  // safe: the caller waits for this task, so fn is alive
    job.done.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;  // the generation at construction: a loop may start before this thread runs
  for (;;) {
    // Spin for a short while (about 100 microseconds) before sleeping: the next loop of a step
    // usually starts within microseconds.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
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
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job = current_;
    }
    if (job) RunTasks(*job);
  }
}

void ThreadPool::ParallelForRanges(int64_t n, int64_t item_cost, int64_t task_cost,
                                   const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t chunk = std::max<int64_t>(1, task_cost / std::max<int64_t>(1, item_cost));
  if (chunk >= n || workers_.empty()) return fn(0, n);
  ParallelFor((n + chunk - 1) / chunk, [&](int64_t r) { fn(r * chunk, std::min(n, (r + 1) * chunk)); });
}

void ThreadPool::Wake() {
  if (workers_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_.reset();  // no job: a woken worker finds nothing to run and spins again
  }
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = job;
  }
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  RunTasks(*job);
  for (int spins = 0; job->done.load(std::memory_order_acquire) != n; ++spins) {
    LS_CPU_RELAX();
    if (spins % 256 == 255) std::this_thread::yield();
  }
}

}  // namespace ls
