// A rank other than 0 of a multi-process tensor-parallel group: it receives rank 0's messages
// (step_message.h) and runs the same runner calls on its shard, until rank 0 ends the group.
// Rank 0 is presumed gone when no message (not even a heartbeat) arrives within
// GroupTimeoutSeconds(), and a step that does not finish within it aborts the group (a rank
// died mid-step): either way the worker stops with a device-lost status, never hangs.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/backend/collectives.h"
#include "lib/common/mutex.h"
#include "lib/model/config.h"
#include "lib/model/tp_shard.h"
#include "lib/model/weights.h"
#include "lib/parallel/rank_runner.h"
#include "lib/parallel/step_channel.h"
#include "lib/runner/model_runner.h"

namespace gannet::parallel {

// The MTP assistant a rank drafts with when rank 0 attaches one (the whole model's config and
// weights, outliving the worker); null members: none.
struct DraftModelRef {
  const model::ModelConfig* config = nullptr;
  const model::ModelWeights* weights = nullptr;
};

class TpWorker {
 public:
  // Starts serving on a thread of its own. `config` and `weights` are the whole model's (they must
  // outlive the worker); `backend` is this rank's device.
  static std::unique_ptr<TpWorker> Start(const model::ModelConfig& config,
                                         const model::ModelWeights& weights,
                                         backend::Backend* backend,
                                         std::unique_ptr<backend::Collectives> collectives,
                                         std::unique_ptr<StepChannel> channel,
                                         DraftModelRef draft = {});
  // Leaving while the group still serves aborts it (rank 0 then fails with device lost).
  ~TpWorker();

  // Waits at most timeout_s (< 0: no limit) for the group to end: OK when rank 0 shut it down,
  // the failure otherwise; DeadlineExceeded (not device lost) while it still serves.
  absl::Status Wait(double timeout_s);
  int rank() const { return rank_; }

 private:
  TpWorker() = default;
  absl::Status Serve();
  absl::Status Handle(std::span<const uint8_t> msg, bool* done);
  void Watchdog();

  const model::ModelConfig* config_ = nullptr;
  const model::ModelWeights* weights_ = nullptr;
  backend::Backend* backend_ = nullptr;
  std::unique_ptr<backend::Collectives> collectives_;
  std::unique_ptr<StepChannel> channel_;
  int rank_ = 0;
  RankRunner shard_;
  DraftModelRef draft_;
  RankDrafter drafter_;

  Mutex mu_;
  CondVar cv_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> step_started_ns_{0};  // 0 = not in a step
  std::atomic<bool> stop_watchdog_{false};
  std::thread thread_, watchdog_;
};

}  // namespace gannet::parallel
