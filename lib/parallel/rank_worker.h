// One thread per tensor-parallel rank: runs that rank's work (weight loading, steps) so every
// rank's device is driven at once, with its backend bound to the thread (Backend::BindThread).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "lib/backend/backend.h"

namespace gannet::parallel {

class RankWorker {
 public:
  explicit RankWorker(backend::Backend* backend);
  ~RankWorker();  // finishes the posted task, then joins
  RankWorker(const RankWorker&) = delete;
  RankWorker& operator=(const RankWorker&) = delete;

  // Runs `task` on the worker's thread; one task at a time (Wait before posting the next).
  void Post(std::function<absl::Status()> task);
  // The posted task's status, once it has finished.
  absl::Status Wait();
  // Waits at most `seconds`; false if the task is still running.
  bool WaitFor(double seconds);

 private:
  void Loop();
  backend::Backend* backend_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<absl::Status()> task_;
  bool busy_ = false, stop_ = false;
  absl::Status status_;
  std::thread thread_;
};

}  // namespace gannet::parallel
