#include "lib/parallel/rank_worker.h"

#include <chrono>

namespace gannet::parallel {

RankWorker::RankWorker(backend::Backend* backend) : backend_(backend) {
  thread_ = std::thread([this] { Loop(); });
}

RankWorker::~RankWorker() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void RankWorker::Post(std::function<absl::Status()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = std::move(task);
    busy_ = true;
  }
  cv_.notify_all();
}

absl::Status RankWorker::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
  return status_;
}

bool RankWorker::WaitFor(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return !busy_; });
}

void RankWorker::Loop() {
  absl::Status bound = backend_->BindThread();
  for (;;) {
    std::function<absl::Status()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || (busy_ && task_); });
      if (stop_) return;
      task = std::move(task_);
      task_ = nullptr;
    }
    absl::Status st = bound.ok() ? task() : bound;
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = std::move(st);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace gannet::parallel
