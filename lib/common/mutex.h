// A std::mutex and std::condition_variable with clang's thread-safety annotations, so that the
// `tsa` preset (clang -Wthread-safety -Werror) checks every access to a member declared
// ABSL_GUARDED_BY(mu_) and every call to a function declared ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_).
// libstdc++'s std::mutex and std::lock_guard carry no annotations, and absl::Mutex is not used
// because Debian's build runs deadlock detection on every lock (15% of tokenizer encode time,
// commit 94d6847); these wrappers add nothing at run time.
//
//   Mutex mu_;
//   CondVar cv_;
//   bool ready_ ABSL_GUARDED_BY(mu_) = false;
//   ...
//   MutexLock lock(&mu_);
//   cv_.Wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready_; });
//
// A predicate that reads guarded state is annotated as above: the analysis checks a lambda's
// body on its own, and the annotation states that the waiter holds the mutex when it runs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace gannet {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Tells the analysis that the caller holds the mutex where it cannot see it (no run-time check).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope; Unlock and Lock release and retake it inside the scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() ABSL_UNLOCK_FUNCTION() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// std::condition_variable waiting on a Mutex the caller holds (it is released while waiting and
// held again on return, as with std::condition_variable). The bodies are not analysed: they hand
// the held std::mutex to the standard library, which the analysis cannot follow.
class CondVar {
 public:
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

  void Wait(Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Adopted a(mu);
    cv_.wait(a.lock);
  }
  // Waits until ready() holds.
  template <typename Pred>
  void Wait(Mutex& mu, Pred ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Adopted a(mu);
    cv_.wait(a.lock, ready);
  }
  // Waits at most `timeout` (or until notified or a spurious wake-up).
  template <typename Rep, typename Period>
  void WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Adopted a(mu);
    cv_.wait_for(a.lock, timeout);
  }
  // Waits at most `timeout` for ready(); returns ready() at the end.
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Pred ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Adopted a(mu);
    return cv_.wait_for(a.lock, timeout, ready);
  }

 private:
  // The caller's held mutex as the std::unique_lock the standard wait takes; handed back still
  // held (also when a predicate throws: the wait retakes the mutex before calling it).
  struct Adopted {
    explicit Adopted(Mutex& mu) : lock(mu.mu_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    std::unique_lock<std::mutex> lock;
  };
  std::condition_variable cv_;
};

}  // namespace gannet
