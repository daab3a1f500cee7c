// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with Clang's
// thread-safety annotations, as LevelDB's port::Mutex wraps them. Members a Mutex guards are
// marked ABSL_GUARDED_BY(mu_) and functions that need it held ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
// clang's -Wthread-safety checks them (the clang build in tools/fuzz.sh turns it on). The
// standard types stay underneath because the sanitizers intercept them, where a prebuilt
// absl::Mutex would be opaque to ThreadSanitizer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace ls {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Tells the analysis the caller holds the lock (no run-time check).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable over one Mutex, which the caller of every Wait holds. (The analysis
// cannot see that the CondVar's Mutex is the caller's, so the waits carry no annotation, and a
// predicate that reads guarded members says so with mu.AssertHeld().)
class CondVar {
 public:
  explicit CondVar(Mutex* mu) : mu_(mu) {}
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Waits until `done()` holds.
  template <typename Pred>
  void Wait(Pred done) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    cv_.wait(lock, done);
    lock.release();
  }
  // Waits until `done()` holds or `timeout` passes; returns done().
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(std::chrono::duration<Rep, Period> timeout, Pred done) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    const bool result = cv_.wait_for(lock, timeout, done);
    lock.release();
    return result;
  }
  // Waits for a signal or `timeout` (wakes may be spurious).
  template <typename Rep, typename Period>
  void WaitFor(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    cv_.wait_for(lock, timeout);
    lock.release();
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  Mutex* const mu_;
  std::condition_variable cv_;
};

}  // namespace ls
