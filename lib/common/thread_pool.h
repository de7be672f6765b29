// A fixed pool of worker threads for data-parallel loops on the CPU backend.
//
// ParallelFor splits [0, n) into chunks of at least `grain` items and runs them on the workers and
// the calling thread; it returns when every chunk is done. Calls from inside a running chunk run
// serially (no nested fan-out, no deadlock). Concurrent ParallelFor calls from different threads
// are serialized. The pool is owned by its creator; DefaultThreadPool() is a process-wide one sized
// by GANNET_NUM_THREADS or the hardware concurrency.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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
  std::mutex call_mu_;  // serializes ParallelFor callers
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  int64_t next_ = 0;       // next chunk start, guarded by mu_
  int active_ = 0;         // workers inside the current job
  uint64_t generation_ = 0;
  bool stop_ = false;
};

ThreadPool& DefaultThreadPool();

}  // namespace gannet
