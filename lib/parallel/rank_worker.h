// One thread per tensor-parallel rank: runs that rank's work (weight loading, steps) so every
// rank's device is driven at once, with its backend bound to the thread (Backend::BindThread).
#pragma once

#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "lib/backend/backend.h"
#include "lib/common/mutex.h"

namespace gannet::parallel {

// Polls done() (yielding between polls) for at most GANNET_TP_SPIN_MS (default 100; 0: not at
// all) before a thread of the group blocks on what it waits for (the next task, a step's end);
// true once done() holds. A blocked thread's wake-up is on every step's critical path (the engine
// posts a step, each rank's thread wakes for it; the last rank done wakes the engine), so a
// decode step's gaps are spent polling instead. Only for ranks on devices (RankWorker::polls): a
// CPU rank's host threads are its compute, which polling would take.
bool SpinUntil(const std::function<bool()>& done);

class RankWorker {
 public:
  explicit RankWorker(backend::Backend* backend);
  ~RankWorker();  // finishes the posted task, then joins
  RankWorker(const RankWorker&) = delete;
  RankWorker& operator=(const RankWorker&) = delete;

  // Runs `task` on the worker's thread; one task at a time (Wait before posting the next).
  void Post(std::function<absl::Status()> task);
  // The posted task's status, once it has finished (polling first where polls()).
  absl::Status Wait();
  // Waits at most `seconds`; false if the task is still running.
  bool WaitFor(double seconds);
  // Whether the group's threads poll before blocking (SpinUntil): a rank on a device.
  bool polls() const { return polls_; }

 private:
  void Loop();
  // Where polls_, polls ready() (read under mu_) for a while (SpinUntil) before the caller waits
  // for it on cv_.
  void SpinBeforeWait(const std::function<bool()>& ready) ABSL_LOCKS_EXCLUDED(mu_);
  backend::Backend* backend_;
  Mutex mu_;
  CondVar cv_;
  std::function<absl::Status()> task_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  const bool polls_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gannet::parallel
