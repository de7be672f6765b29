#include "lib/parallel/tp_runner.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/common/units.h"

namespace gannet::parallel {

namespace {

// How long the other ranks get to finish once one rank has failed before the group is presumed
// stuck in a collective and aborted.
constexpr double kFailureGraceSeconds = 2.0;

}  // namespace

absl::StatusOr<std::unique_ptr<TpRunner>> TpRunner::Create(const model::ModelConfig& config,
                                                           const model::ModelWeights& weights,
                                                           std::vector<TpRankParts> parts,
                                                           std::shared_ptr<void> shared,
                                                           const runner::RunnerOptions& options) {
  const int world = static_cast<int>(parts.size());
  GANNET_RETURN_IF_ERROR(model::CheckTpShardable(config, world));
  std::unique_ptr<TpRunner> tp(new TpRunner());
  tp->shared_ = std::move(shared);
  tp->shard_config_ = model::ShardConfig(config, world);
  tp->ranks_.resize(world);
  for (int r = 0; r < world; ++r) {
    Rank& rank = tp->ranks_[r];
    rank.parts = std::move(parts[r]);
    if (rank.parts.backend == nullptr || rank.parts.collectives == nullptr ||
        rank.parts.collectives->rank() != r || rank.parts.collectives->world_size() != world) {
      return InvalidArgumentError("tensor parallel: rank {} of {} has no backend or collectives of "
                                  "its rank", r, world);
    }
    rank.worker = std::make_unique<RankWorker>(rank.parts.backend);
  }
  auto create = [&](int r) -> absl::Status {
    Rank& rank = tp->ranks_[r];
    GANNET_ASSIGN_OR_RETURN(rank.weights, model::ShardWeights(config, weights, {r, world}));
    runner::RunnerOptions o = options;
    o.collectives = rank.parts.collectives.get();
    if (r != 0) o.on_weight_progress = nullptr;
    GANNET_ASSIGN_OR_RETURN(rank.runner, runner::ModelRunner::Create(tp->shard_config_,
                                                                     rank.weights->views,
                                                                     rank.parts.backend, o));
    return absl::OkStatus();
  };
  for (int r = 1; r < world; ++r) tp->ranks_[r].worker->Post([&create, r] { return create(r); });
  absl::Status first = tp->ranks_[0].parts.backend->BindThread();
  if (first.ok()) first = create(0);
  for (int r = 1; r < world; ++r) {
    absl::Status st = tp->ranks_[r].worker->Wait();
    if (first.ok() && !st.ok()) first = Annotate(st, fmt::format("tensor parallel rank {}", r));
  }
  GANNET_RETURN_IF_ERROR(first);
  GANNET_LOG_INFO("tensor parallel: {} ranks, {} weights per rank (rank 0), {} copied to slice",
                  world, FormatBytes(static_cast<int64_t>(tp->ranks_[0].runner->weight_bytes())),
                  FormatBytes(tp->ranks_[0].weights->copied_bytes));
  return tp;
}

TpRunner::~TpRunner() {
  // Each rank's runner and collectives are released on its own thread (its device current).
  for (Rank& rank : ranks_) {
    if (rank.worker == nullptr) continue;
    rank.worker->Post([&rank] {
      rank.runner.reset();
      rank.parts.collectives.reset();
      return absl::OkStatus();
    });
  }
  for (Rank& rank : ranks_) {
    if (rank.worker != nullptr) (void)rank.worker->Wait();
  }
}

absl::Status TpRunner::RunOnAll(const std::function<absl::Status(int)>& task) {
  if (broken_) {
    return MarkDeviceLost(absl::UnavailableError("tensor parallel: the group failed earlier"));
  }
  const int world = world_size();
  // Each rank reports here when it finishes; a rank may wait in a collective for one that failed,
  // so once one has failed the others get a grace period, then the group is aborted, which ends
  // their waits.
  struct Progress {
    std::mutex mu;
    std::condition_variable cv;
    int remaining = 0;
    int failed = -1;
  } progress;
  progress.remaining = world;
  std::vector<absl::Status> st(world);
  for (int r = 0; r < world; ++r) {
    ranks_[r].worker->Post([&task, &progress, &st, r] {
      absl::Status s = task(r);
      std::lock_guard<std::mutex> lock(progress.mu);
      if (!s.ok() && progress.failed < 0) progress.failed = r;
      st[r] = std::move(s);
      --progress.remaining;
      progress.cv.notify_all();
      return absl::OkStatus();
    });
  }
  int failed = -1;
  {
    std::unique_lock<std::mutex> lock(progress.mu);
    progress.cv.wait(lock, [&] { return progress.remaining == 0 || progress.failed >= 0; });
    if (progress.remaining > 0 &&
        !progress.cv.wait_for(lock, std::chrono::duration<double>(kFailureGraceSeconds),
                              [&] { return progress.remaining == 0; })) {
      for (Rank& rank : ranks_) rank.parts.collectives->Abort();
      broken_ = true;
    }
    failed = progress.failed;
  }
  for (int r = 0; r < world; ++r) (void)ranks_[r].worker->Wait();
  if (failed < 0) return absl::OkStatus();
  bool alike = !broken_;
  for (int r = 0; r < world && alike; ++r) {
    alike = !st[r].ok() && !IsDeviceLost(st[r]) && st[r].code() == st[0].code();
  }
  if (alike) return st[0];
  if (!broken_) {
    for (Rank& rank : ranks_) rank.parts.collectives->Abort();
    broken_ = true;
  }
  return MarkDeviceLost(Annotate(st[failed], fmt::format("tensor parallel rank {} of {} failed",
                                                         failed, world)));
}

absl::Status TpRunner::AttachKv(const kv::KvLayout& layout) {
  return RunOnAll([&](int r) { return ranks_[r].runner->AttachKv(layout); });
}

absl::Status TpRunner::Forward(const runner::StepBatch& batch, runner::StepResult* result) {
  return RunOnAll([&](int r) { return ranks_[r].runner->Forward(batch, r == 0 ? result : nullptr); });
}

uint64_t TpRunner::weight_bytes() const {
  uint64_t bytes = 0;
  for (const Rank& rank : ranks_) bytes += rank.runner->weight_bytes();
  return bytes;
}

absl::StatusOr<double> TpRunner::LastStepDeviceSeconds() {
  absl::StatusOr<double> seconds = 0.0;
  ranks_[0].worker->Post([&] {
    seconds = ranks_[0].runner->LastStepDeviceSeconds();
    return absl::OkStatus();
  });
  GANNET_RETURN_IF_ERROR(ranks_[0].worker->Wait());
  return seconds;
}

}  // namespace gannet::parallel
