// The tensor-parallel executor of one process: a ModelRunner per rank, each on its own backend
// (device) and worker thread, computing its shard of every step (model/tp_shard.h) and meeting
// the others in the collectives (backend/collectives.h). The engine steps it like a single
// runner: Forward hands the same StepBatch to every rank (each builds its own metadata from it)
// and returns rank 0's result, which holds the full logits rows and their samples. The KV layout
// is the shard geometry's, the same page ids on every rank, each rank's pool holding its heads.
//
// Two ways to run, one code path: every rank in this process (each on its worker), or one rank
// per process (multi-process mode): then this object drives only rank 0 and sends every call
// first to the other ranks through a StepChannel (step_message.h), where a TpWorker runs the same
// runner calls on its shard; while idle it sends a heartbeat every kHeartbeatSeconds.
//
// Speculative decoding: AttachDrafter gives every rank its shard of the MTP assistant over its
// runner (rank_runner.h) and returns the DraftRunner the engine's SpecDecoder drafts with: each
// round goes to every rank like a step (a kDraft message to the other processes), every rank's
// drafter computes its shard and draws the same tokens, and rank 0's are returned. Verify,
// acceptance and rollback need nothing more: a verify chunk is a step, and rank 0's scheduler
// decides what is kept (the KV manager's page tables, which every step and round carries).
//
// A rank that fails while the others complete, or that is still running 2 s after another rank
// failed (waiting in a collective), breaks the group: every rank's collectives are aborted and
// the step fails with a device-lost status, so the engine stops instead of hanging. A failure
// every rank reports alike (a step the runners reject before computing) fails only that step.
// With ranks in other processes, a step that does not end within GroupTimeoutSeconds() (a rank
// died) breaks the group the same way.
#pragma once

#include <chrono>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/backend/collectives.h"
#include "lib/common/mutex.h"
#include "lib/model/config.h"
#include "lib/model/tp_shard.h"
#include "lib/model/weights.h"
#include "lib/parallel/rank_runner.h"
#include "lib/parallel/rank_worker.h"
#include "lib/parallel/step_channel.h"
#include "lib/runner/model_runner.h"
#include "lib/runner/step_runner.h"
#include "lib/spec/drafter.h"

namespace gannet::parallel {

struct TpRankParts {
  backend::Backend* backend = nullptr;  // not owned; outlives the runner
  std::unique_ptr<backend::Collectives> collectives;
};

class TpRunner : public runner::StepRunner {
 public:
  // Shards `weights` (of the whole model `config`) for every local rank and creates the rank
  // runners: rank 0 on the calling thread (options.on_weight_progress reports its load), the
  // others on their workers at the same time. `shared` keeps what the collectives share alive.
  // `ranks` are every rank of the group in order, or, with `remote` (multi-process mode), rank 0
  // alone, the others being reached through `remote`.
  static absl::StatusOr<std::unique_ptr<TpRunner>> Create(
      const model::ModelConfig& config, const model::ModelWeights& weights,
      std::vector<TpRankParts> ranks, std::shared_ptr<void> shared,
      const runner::RunnerOptions& options, std::unique_ptr<StepChannel> remote = nullptr);
  ~TpRunner() override;

  absl::Status AttachKv(const kv::KvLayout& layout) override;
  absl::Status Forward(const runner::StepBatch& batch, runner::StepResult* result) override;
  uint64_t weight_bytes() const override;
  absl::StatusOr<double> LastStepDeviceSeconds() override;

  // Every rank's shard of the assistant `config`/`weights` (the whole model's, outliving this
  // runner), drafting for its runner. Once; before AttachKv or after.
  absl::StatusOr<std::unique_ptr<spec::DraftRunner>> AttachDrafter(
      const model::ModelConfig& config, const model::ModelWeights& weights,
      const spec::DrafterOptions& options);
  // One draft round on every rank (the DraftRunner's Draft); rank 0's result.
  absl::Status Draft(std::span<const spec::DraftSeq> seqs, int steps, spec::DraftResult* result);
  // Graphs rank 0's runner has recorded so far (its steps; tests).
  int num_graphs();
  // Rank 0's device time of the rounds since the last call (measured on its worker).
  double TakeDraftDeviceSeconds();
  // The tokens local rank r > 0 drew in the last round (tests: every rank draws the same).
  std::vector<std::vector<int32_t>> RankDraftTokens(int r);

  int world_size() const { return world_; }
  // The least memory any rank of the group has free (after its weights and activations).
  int64_t MinFreeMemoryBytes();
  // Every rank's geometry (ShardConfig).
  const model::ModelConfig& shard_config() const { return shard_config_; }

 private:
  struct Rank {
    TpRankParts parts;
    RankRunner shard;
    RankDrafter drafter;  // with speculative decoding
    std::unique_ptr<RankWorker> worker;
  };
  TpRunner() = default;
  // Runs task(local rank) on every local rank's worker and applies the failure policy above;
  // `message` (multi-process mode) goes to the other processes first, from rank 0's worker.
  absl::Status RunOnAll(const std::function<absl::Status(int)>& task,
                        const std::vector<uint8_t>* message = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Heartbeats();

  model::ModelConfig shard_config_;
  int world_ = 1;
  std::vector<Rank> ranks_;  // local ranks; ranks_[0] is rank 0
  std::shared_ptr<void> shared_;
  std::unique_ptr<StepChannel> remote_;
  int64_t remote_free_bytes_ = std::numeric_limits<int64_t>::max();
  Mutex mu_;  // one call into the group at a time (the engine's steps, heartbeats)
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point last_sent_ ABSL_GUARDED_BY(mu_);
  // Rank 0's device span of the last Forward, read on its worker as the step ends (a second
  // round trip to the worker after the step would put a thread hand-off on every step's critical
  // path).
  absl::StatusOr<double> last_span_ ABSL_GUARDED_BY(mu_) = 0.0;
  double draft_seconds_ ABSL_GUARDED_BY(mu_) = 0;  // rank 0's device time of the draft rounds
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  CondVar stop_cv_;
  std::thread heartbeat_;
};

}  // namespace gannet::parallel
