// A fixed pool of worker threads for data-parallel loops on the CPU backend.
//
// ParallelFor splits [0, n) into chunks of at least `grain` items and runs them on the workers and
// the calling thread; it returns when every chunk is done. Calls from inside a running chunk run
// serially (no nested fan-out, no deadlock). Concurrent ParallelFor calls from different threads
// are serialized. The pool is owned by its creator; DefaultThreadPool() is a process-wide one sized
// by GANNET_NUM_THREADS or the hardware concurrency.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "lib/common/mutex.h"

namespace gannet {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // fn(begin, end) is called on disjoint sub-ranges covering [0, n).
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();
  void RunChunks();

  std::vector<std::thread> workers_;
  Mutex call_mu_;  // serializes ParallelFor callers
  Mutex mu_ ABSL_ACQUIRED_AFTER(call_mu_);
  CondVar work_cv_;
  CondVar done_cv_;
  // The job: set under mu_ before generation_ moves, read by the workers that saw it move.
  const std::function<void(int64_t, int64_t)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t n_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t chunk_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;  // next chunk start
  int active_ ABSL_GUARDED_BY(mu_) = 0;    // workers inside the current job
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

ThreadPool& DefaultThreadPool();

}  // namespace gannet
