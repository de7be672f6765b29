#include "lib/parallel/tp_runner.h"

#include <limits>

#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/common/units.h"
#include "lib/parallel/step_message.h"

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
                                                           const runner::RunnerOptions& options,
                                                           std::unique_ptr<StepChannel> remote) {
  if (parts.empty() || parts[0].collectives == nullptr) {
    return InvalidArgumentError("tensor parallel: no ranks");
  }
  const int world = parts[0].collectives->world_size();
  const int local = static_cast<int>(parts.size());
  if (remote != nullptr ? local != 1 : local != world) {
    return InvalidArgumentError(
        "tensor parallel: {} local ranks of a group of {}{}", local, world,
        remote != nullptr ? " with remote ranks (rank 0 alone is local)" : "");
  }
  GANNET_RETURN_IF_ERROR(model::CheckTpShardable(config, world, options.moe_split));
  std::unique_ptr<TpRunner> tp(new TpRunner());
  tp->world_ = world;
  tp->shared_ = std::move(shared);
  tp->remote_ = std::move(remote);
  tp->shard_config_ = model::ShardConfig(config, world, options.moe_split);
  tp->ranks_.resize(local);
  for (int r = 0; r < local; ++r) {
    Rank& rank = tp->ranks_[r];
    rank.parts = std::move(parts[r]);
    if (rank.parts.backend == nullptr || rank.parts.collectives == nullptr ||
        rank.parts.collectives->rank() != r || rank.parts.collectives->world_size() != world) {
      return InvalidArgumentError(
          "tensor parallel: rank {} of {} has no backend or collectives of "
          "its rank",
          r, world);
    }
    rank.worker = std::make_unique<RankWorker>(rank.parts.backend);
  }
  auto create = [&](int r) -> absl::Status {
    Rank& rank = tp->ranks_[r];
    runner::RunnerOptions o = options;
    if (r != 0) o.on_weight_progress = nullptr;
    // Ranks may share checkpoint bytes (tp_shard.h views): none may give them back.
    o.on_weight_copied = nullptr;
    GANNET_ASSIGN_OR_RETURN(
        rank.shard,
        CreateRankRunner(config, weights, rank.parts.collectives.get(), rank.parts.backend, o));
    return absl::OkStatus();
  };
  for (int r = 1; r < local; ++r) tp->ranks_[r].worker->Post([&create, r] { return create(r); });
  absl::Status first = tp->ranks_[0].parts.backend->BindThread();
  // The other processes load their shards while this one loads its own.
  if (first.ok() && tp->remote_ != nullptr) first = tp->remote_->Send(EncodeInit(options));
  if (first.ok()) first = create(0);
  for (int r = 1; r < local; ++r) {
    absl::Status st = tp->ranks_[r].worker->Wait();
    if (first.ok() && !st.ok()) first = Annotate(st, fmt::format("tensor parallel rank {}", r));
  }
  if (tp->remote_ != nullptr) {
    // Every process reports whether its runner exists (and its free memory): all agree to go on.
    absl::StatusOr<int64_t> all = AgreeOverRanks(
        *tp->ranks_[0].parts.collectives, first,
        first.ok() ? tp->ranks_[0].parts.backend->FreeMemoryBytes() : 0, "create its runner");
    first = all.status();
    if (first.ok()) tp->remote_free_bytes_ = *all;
  }
  if (!first.ok()) {
    for (Rank& rank : tp->ranks_) rank.parts.collectives->Abort();
    return first;
  }
  GANNET_LOG_INFO(
      "tensor parallel: {} ranks ({} in this process), {} weights per rank, {} copied "
      "to slice{}",
      world, local, FormatBytes(static_cast<int64_t>(tp->ranks_[0].shard.runner->weight_bytes())),
      FormatBytes(tp->ranks_[0].shard.weights->copied_bytes),
      config.text.enable_moe_block
          ? fmt::format(", MoE experts split by {}",
                        model::MoeSplitName(tp->shard_config_.text.local_experts > 0
                                                ? model::MoeSplit::kExperts
                                                : model::MoeSplit::kIntermediate))
          : std::string());
  if (tp->remote_ != nullptr) {
    {
      MutexLock lock(&tp->mu_);  // no other thread yet; taken for the analysis (tsa preset)
      tp->last_sent_ = std::chrono::steady_clock::now();
    }
    tp->heartbeat_ = std::thread([raw = tp.get()] { raw->Heartbeats(); });
  }
  return tp;
}

TpRunner::~TpRunner() {
  if (heartbeat_.joinable()) {
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    stop_cv_.NotifyAll();
    heartbeat_.join();
  }
  {
    MutexLock lock(&mu_);
    if (remote_ != nullptr && !broken_ && !ranks_.empty() && ranks_[0].worker != nullptr) {
      const std::vector<uint8_t> bye = EncodeOp(StepOp::kShutdown);
      (void)RunOnAll([](int) { return absl::OkStatus(); }, &bye);
    }
  }
  // Each rank's runner and collectives are released on its own thread (its device current); the
  // backend's recorded steps go before the collectives they captured (backend.h, ReleaseGraphs).
  for (Rank& rank : ranks_) {
    if (rank.worker == nullptr) continue;
    rank.worker->Post([&rank] {
      rank.drafter.drafter.reset();  // it reads the runner's KV
      rank.shard.runner.reset();
      if (rank.parts.backend != nullptr) rank.parts.backend->ReleaseGraphs();
      rank.parts.collectives.reset();
      return absl::OkStatus();
    });
  }
  for (Rank& rank : ranks_) {
    if (rank.worker != nullptr) (void)rank.worker->Wait();
  }
}

void TpRunner::Heartbeats() {
  MutexLock lock(&mu_);
  const auto period = std::chrono::duration<double>(kHeartbeatSeconds);
  while (!stop_) {
    stop_cv_.WaitFor(mu_, std::chrono::duration_cast<std::chrono::steady_clock::duration>(period));
    if (stop_ || broken_) continue;
    if (std::chrono::steady_clock::now() - last_sent_ < period) continue;
    const std::vector<uint8_t> beat = EncodeOp(StepOp::kHeartbeat);
    absl::Status st = RunOnAll([](int) { return absl::OkStatus(); }, &beat);
    if (!st.ok()) GANNET_LOG_ERROR("tensor parallel: {}", st.message());
  }
}

absl::Status TpRunner::RunOnAll(const std::function<absl::Status(int)>& task,
                                const std::vector<uint8_t>* message) {
  if (broken_) {
    return MarkDeviceLost(absl::UnavailableError("tensor parallel: the group failed earlier"));
  }
  const int local = static_cast<int>(ranks_.size());
  // Each rank reports here when it finishes; a rank may wait in a collective for one that failed,
  // so once one has failed the others get a grace period, then the group is aborted, which ends
  // their waits. The whole call has a deadline too.
  struct Progress {
    Mutex mu;
    CondVar cv;
    int remaining ABSL_GUARDED_BY(mu) = 0;
    int failed ABSL_GUARDED_BY(mu) = -1;
  } progress;
  {
    MutexLock lock(&progress.mu);  // no worker has it yet; taken for the analysis (tsa preset)
    progress.remaining = local;
  }
  std::vector<absl::Status> st(local);
  for (int r = 0; r < local; ++r) {
    ranks_[r].worker->Post([this, &task, &progress, &st, message, r] {
      absl::Status s;
      if (r == 0 && message != nullptr) s = remote_->Send(*message);
      if (s.ok()) s = task(r);
      MutexLock lock(&progress.mu);
      if (!s.ok() && progress.failed < 0) progress.failed = r;
      st[r] = std::move(s);
      --progress.remaining;
      progress.cv.NotifyAll();
      return absl::OkStatus();
    });
  }
  if (message != nullptr) last_sent_ = std::chrono::steady_clock::now();
  auto abort_all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (Rank& rank : ranks_) rank.parts.collectives->Abort();
    broken_ = true;
  };
  int failed = -1;
  bool timed_out = false;
  auto done_or_failed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress.mu) {
    return progress.remaining == 0 || progress.failed >= 0;
  };
  if (ranks_[0].worker->polls()) {
    SpinUntil([&] {
      MutexLock lock(&progress.mu);
      return done_or_failed();
    });
  }
  {
    MutexLock lock(&progress.mu);
    // The deadline holds with every rank in this process too: a rank stuck in a collective or
    // in the driver (a lazy kernel load waiting on a collective of another rank) aborts the
    // group after it, which ends the collectives' waits, instead of hanging the engine.
    if (!progress.cv.WaitFor(progress.mu, std::chrono::duration<double>(GroupTimeoutSeconds()),
                             done_or_failed)) {
      timed_out = true;
      abort_all();
    }
    progress.cv.Wait(progress.mu, done_or_failed);
    if (progress.remaining > 0 &&
        !progress.cv.WaitFor(
            progress.mu, std::chrono::duration<double>(kFailureGraceSeconds),
            [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(progress.mu) { return progress.remaining == 0; })) {
      abort_all();
    }
    failed = progress.failed;
  }
  for (int r = 0; r < local; ++r) (void)ranks_[r].worker->Wait();
  if (timed_out) {
    return MarkDeviceLost(absl::DeadlineExceededError(fmt::format(
        "tensor parallel: a step did not complete within {} s (a rank of the group is {}; "
        "GANNET_TP_TIMEOUT_S sets the limit)",
        GroupTimeoutSeconds(), remote_ != nullptr ? "gone" : "stuck")));
  }
  if (failed < 0) return absl::OkStatus();
  bool alike = !broken_ && remote_ == nullptr;
  for (int r = 0; r < local && alike; ++r) {
    alike = !st[r].ok() && !IsDeviceLost(st[r]) && st[r].code() == st[0].code();
  }
  if (alike) return st[0];
  if (!broken_) abort_all();
  return MarkDeviceLost(
      Annotate(st[failed], fmt::format("tensor parallel rank {} of {} failed", failed, world_)));
}

absl::Status TpRunner::AttachKv(const kv::KvLayout& layout) {
  MutexLock lock(&mu_);
  const std::vector<uint8_t> msg = EncodeAttachKv(layout);
  return RunOnAll(
      [&](int r) -> absl::Status {
        absl::Status st = ranks_[r].shard.runner->AttachKv(layout);
        if (remote_ == nullptr) return st;
        // Every process says whether its storage fits: all go on, or none.
        return AgreeOverRanks(*ranks_[0].parts.collectives, st, 0, "allocate its KV storage")
            .status();
      },
      remote_ != nullptr ? &msg : nullptr);
}

absl::Status TpRunner::Forward(const runner::StepBatch& batch, runner::StepResult* result) {
  MutexLock lock(&mu_);
  std::vector<uint8_t> msg;
  if (remote_ != nullptr) msg = EncodeStep(batch);
  last_span_ = absl::UnavailableError("tensor parallel: the last step did not complete");
  return RunOnAll(
      // On the ranks' workers, while this thread holds mu_ and waits for them (RunOnAll).
      [&](int r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        runner::ModelRunner& shard = *ranks_[r].shard.runner;
        absl::Status st = shard.Forward(batch, r == 0 ? result : nullptr);
        if (st.ok() && r == 0) last_span_ = shard.LastStepDeviceSeconds();
        return st;
      },
      remote_ != nullptr ? &msg : nullptr);
}

namespace {

// The DraftRunner of a group: every round through TpRunner::Draft.
class TpDrafter : public spec::DraftRunner {
 public:
  TpDrafter(TpRunner* tp, const model::ModelConfig& config, uint64_t bytes)
      : tp_(tp), config_(config), bytes_(bytes) {}
  absl::Status Draft(std::span<const spec::DraftSeq> seqs, int steps,
                     spec::DraftResult* result) override {
    return tp_->Draft(seqs, steps, result);
  }
  const model::ModelConfig& config() const override { return config_; }
  uint64_t weight_bytes() const override { return bytes_; }
  absl::StatusOr<double> TakeDeviceSeconds() override { return tp_->TakeDraftDeviceSeconds(); }

 private:
  TpRunner* tp_;  // outlives this (the engine drops its speculative decoder first)
  model::ModelConfig config_;
  uint64_t bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<spec::DraftRunner>> TpRunner::AttachDrafter(
    const model::ModelConfig& config, const model::ModelWeights& weights,
    const spec::DrafterOptions& options) {
  MutexLock lock(&mu_);
  if (ranks_[0].drafter.drafter != nullptr) {
    return FailedPreconditionError("tensor parallel: the drafter is already attached");
  }
  const std::vector<uint8_t> msg = EncodeAttachDrafter(options);
  GANNET_RETURN_IF_ERROR(RunOnAll(
      [&](int r) -> absl::Status {
        Rank& rank = ranks_[r];
        absl::StatusOr<RankDrafter> made =
            CreateRankDrafter(config, weights, rank.parts.collectives.get(), rank.parts.backend,
                              rank.shard.runner.get(), options);
        if (made.ok()) rank.drafter = *std::move(made);
        if (remote_ == nullptr) return made.status();
        // Every process says whether its drafter exists: all go on, or none.
        return AgreeOverRanks(*rank.parts.collectives, made.status(), 0, "create its drafter")
            .status();
      },
      remote_ != nullptr ? &msg : nullptr));
  const uint64_t bytes = ranks_[0].drafter.drafter->weight_bytes() * world_;
  GANNET_LOG_INFO("tensor parallel: the drafter on {} ranks, {} weights per rank", world_,
                  FormatBytes(static_cast<int64_t>(ranks_[0].drafter.drafter->weight_bytes())));
  return std::unique_ptr<spec::DraftRunner>(new TpDrafter(this, config, bytes));
}

absl::Status TpRunner::Draft(std::span<const spec::DraftSeq> seqs, int steps,
                             spec::DraftResult* result) {
  MutexLock lock(&mu_);
  if (ranks_[0].drafter.drafter == nullptr) {
    return FailedPreconditionError("tensor parallel: a draft round before AttachDrafter");
  }
  std::vector<uint8_t> msg;
  if (remote_ != nullptr) msg = EncodeDraft(seqs, steps);
  return RunOnAll(
      [&](int r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        RankDrafter& d = ranks_[r].drafter;
        if (r != 0) return d.drafter->Draft(seqs, steps, &d.scratch);
        // Rank 0's device span, on its own thread (as Forward's).
        backend::Backend& be = *ranks_[0].parts.backend;
        GANNET_RETURN_IF_ERROR(be.BeginDeviceSpan());
        GANNET_RETURN_IF_ERROR(d.drafter->Draft(seqs, steps, result));
        GANNET_RETURN_IF_ERROR(be.EndDeviceSpan());
        GANNET_ASSIGN_OR_RETURN(const double span, be.DeviceSpanSeconds());
        draft_seconds_ += span;
        return absl::OkStatus();
      },
      remote_ != nullptr ? &msg : nullptr);
}

int TpRunner::num_graphs() {
  MutexLock lock(&mu_);  // no step in flight
  return ranks_[0].shard.runner->num_graphs();
}

double TpRunner::TakeDraftDeviceSeconds() {
  MutexLock lock(&mu_);
  const double s = draft_seconds_;
  draft_seconds_ = 0;
  return s;
}

std::vector<std::vector<int32_t>> TpRunner::RankDraftTokens(int r) {
  MutexLock lock(&mu_);
  if (r < 1 || r >= static_cast<int>(ranks_.size())) return {};
  return ranks_[r].drafter.scratch.tokens;
}

int64_t TpRunner::MinFreeMemoryBytes() {
  int64_t m = remote_free_bytes_;  // the other processes' least, when the runners were made
  for (Rank& rank : ranks_) m = std::min(m, rank.parts.backend->FreeMemoryBytes());
  return m;
}

uint64_t TpRunner::weight_bytes() const {
  uint64_t bytes = 0;
  for (const Rank& rank : ranks_) bytes += rank.shard.runner->weight_bytes();
  return bytes * (world_ / static_cast<int>(ranks_.size()));  // ranks elsewhere hold as much
}

absl::StatusOr<double> TpRunner::LastStepDeviceSeconds() {
  MutexLock lock(&mu_);
  return last_span_;
}

}  // namespace gannet::parallel
