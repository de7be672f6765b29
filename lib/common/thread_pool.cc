#include "lib/common/thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace gannet {
namespace {
thread_local bool t_inside_pool_job = false;
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < std::max(1, num_threads); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  work_cv_.NotifyAll();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunks() {
  while (true) {
    int64_t begin, end;
    const std::function<void(int64_t, int64_t)>* fn;
    {
      MutexLock lock(&mu_);
      if (next_ >= n_) return;
      begin = next_;
      end = std::min(n_, next_ + chunk_);
      next_ = end;
      fn = fn_;
    }
    (*fn)(begin, end);
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  t_inside_pool_job = true;  // a worker never fans out again
  while (true) {
    {
      MutexLock lock(&mu_);
      work_cv_.Wait(
          mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_;
    }
    RunChunks();
    {
      MutexLock lock(&mu_);
      if (--active_ == 0) done_cv_.NotifyAll();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (workers_.empty() || n <= grain || t_inside_pool_job) {
    fn(0, n);
    return;
  }
  MutexLock call_lock(&call_mu_);
  int64_t target_chunks = static_cast<int64_t>(num_threads()) * 4;
  int64_t chunk = std::max(grain, (n + target_chunks - 1) / target_chunks);
  {
    MutexLock lock(&mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    next_ = 0;
    ++generation_;
  }
  work_cv_.NotifyAll();
  t_inside_pool_job = true;
  RunChunks();
  t_inside_pool_job = false;
  MutexLock lock(&mu_);
  done_cv_.Wait(mu_,
                [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_ == 0 && next_ >= n_; });
  fn_ = nullptr;
}

ThreadPool& DefaultThreadPool() {
  static ThreadPool* pool = [] {
    int n = static_cast<int>(std::thread::hardware_concurrency());
    if (const char* env = std::getenv("GANNET_NUM_THREADS")) n = std::atoi(env);
    return new ThreadPool(std::clamp(n, 1, 256));
  }();
  return *pool;
}

}  // namespace gannet
