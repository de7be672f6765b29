#include "lib/parallel/rank_worker.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace gannet::parallel {

namespace {

double SpinSeconds() {
  static const double seconds = [] {
    const char* env = std::getenv("GANNET_TP_SPIN_MS");
    return env == nullptr ? 0.1 : std::max(0.0, std::atof(env) * 1e-3);
  }();
  return seconds;
}

}  // namespace

bool SpinUntil(const std::function<bool()>& done) {
  const double limit = SpinSeconds();
  if (limit <= 0) return done();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
}

RankWorker::RankWorker(backend::Backend* backend)
    : backend_(backend), polls_(backend->device_id() >= 0) {
  thread_ = std::thread([this] { Loop(); });
}

RankWorker::~RankWorker() {
  {
    MutexLock lock(&mu_);
    cv_.Wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_; });
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void RankWorker::Post(std::function<absl::Status()> task) {
  {
    MutexLock lock(&mu_);
    task_ = std::move(task);
    busy_ = true;
  }
  cv_.NotifyAll();
}

void RankWorker::SpinBeforeWait(const std::function<bool()>& ready) {
  if (polls_) {
    SpinUntil([&] {
      MutexLock lock(&mu_);
      return ready();
    });
  }
}

absl::Status RankWorker::Wait() {
  // The group's caller waits here for each rank's step to wind up (RunOnAll): blocking at once
  // would put a futex wake-up on every step's critical path whenever it arrives first.
  auto idle = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_; };
  SpinBeforeWait(idle);
  MutexLock lock(&mu_);
  cv_.Wait(mu_, idle);
  return status_;
}

bool RankWorker::WaitFor(double seconds) {
  MutexLock lock(&mu_);
  return cv_.WaitFor(mu_, std::chrono::duration<double>(seconds),
                     [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_; });
}

void RankWorker::Loop() {
  absl::Status bound = backend_->BindThread();
  auto has_work = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || (busy_ && task_); };
  for (;;) {
    std::function<absl::Status()> task;
    {
      SpinBeforeWait(has_work);
      MutexLock lock(&mu_);
      cv_.Wait(mu_, has_work);
      if (stop_) return;
      task = std::move(task_);
      task_ = nullptr;
    }
    absl::Status st = bound.ok() ? task() : bound;
    {
      MutexLock lock(&mu_);
      status_ = std::move(st);
      busy_ = false;
    }
    cv_.NotifyAll();
  }
}

}  // namespace gannet::parallel
