#include "lib/parallel/tp_worker.h"

#include <chrono>

#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/parallel/step_message.h"

namespace gannet::parallel {

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::unique_ptr<TpWorker> TpWorker::Start(const model::ModelConfig& config,
                                          const model::ModelWeights& weights,
                                          backend::Backend* backend,
                                          std::unique_ptr<backend::Collectives> collectives,
                                          std::unique_ptr<StepChannel> channel,
                                          DraftModelRef draft) {
  std::unique_ptr<TpWorker> w(new TpWorker());
  w->draft_ = draft;
  w->config_ = &config;
  w->weights_ = &weights;
  w->backend_ = backend;
  w->rank_ = collectives->rank();
  w->collectives_ = std::move(collectives);
  w->channel_ = std::move(channel);
  TpWorker* raw = w.get();
  w->watchdog_ = std::thread([raw] { raw->Watchdog(); });
  w->thread_ = std::thread([raw] {
    absl::Status st = raw->Serve();
    if (!st.ok()) {
      GANNET_LOG_ERROR("tensor parallel rank {}: {}", raw->rank_, st.message());
      raw->collectives_->Abort();
    }
    MutexLock lock(&raw->mu_);
    raw->finished_ = true;
    raw->result_ = st;
    raw->cv_.NotifyAll();
  });
  return w;
}

TpWorker::~TpWorker() {
  {
    MutexLock lock(&mu_);
    if (!finished_) collectives_->Abort();  // leaving a live group: the others fail, not hang
  }
  thread_.join();
  stop_watchdog_ = true;
  watchdog_.join();
  drafter_.drafter.reset();  // it reads the runner's KV
  shard_.runner.reset();
  // Recorded steps go before the collectives they captured (backend.h, ReleaseGraphs).
  if (backend_ != nullptr) backend_->ReleaseGraphs();
  collectives_.reset();
}

absl::Status TpWorker::Wait(double timeout_s) {
  MutexLock lock(&mu_);
  auto finished = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_; };
  if (timeout_s < 0) {
    cv_.Wait(mu_, finished);
  } else if (!cv_.WaitFor(mu_, std::chrono::duration<double>(timeout_s), finished)) {
    return absl::DeadlineExceededError("the tensor-parallel group is still serving");
  }
  return result_;
}

void TpWorker::Watchdog() {
  const int64_t limit = static_cast<int64_t>(GroupTimeoutSeconds() * 1e9);
  while (!stop_watchdog_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t started = step_started_ns_.load();
    if (started != 0 && NowNs() - started > limit) {
      GANNET_LOG_ERROR(
          "tensor parallel rank {}: a step did not finish within {} s; leaving the "
          "group",
          rank_, GroupTimeoutSeconds());
      collectives_->Abort();
      step_started_ns_ = 0;
    }
  }
}

absl::Status TpWorker::Serve() {
  GANNET_RETURN_IF_ERROR(backend_->BindThread());
  for (bool done = false; !done;) {
    GANNET_ASSIGN_OR_RETURN(std::vector<uint8_t> msg, channel_->Receive(GroupTimeoutSeconds()));
    step_started_ns_ = NowNs();
    absl::Status st = Handle(msg, &done);
    step_started_ns_ = 0;
    GANNET_RETURN_IF_ERROR(st);
  }
  return absl::OkStatus();
}

absl::Status TpWorker::Handle(std::span<const uint8_t> msg, bool* done) {
  GANNET_ASSIGN_OR_RETURN(StepOp op, MessageOp(msg));
  switch (op) {
    case StepOp::kInit: {
      runner::RunnerOptions o;
      GANNET_RETURN_IF_ERROR(DecodeInit(msg, &o));
      absl::StatusOr<RankRunner> made =
          CreateRankRunner(*config_, *weights_, collectives_.get(), backend_, o);
      if (made.ok()) shard_ = *std::move(made);
      // Rank 0 learns whether every rank has its runner (and the least free memory).
      return AgreeOverRanks(*collectives_, made.status(),
                            made.ok() ? backend_->FreeMemoryBytes() : 0, "create its runner")
          .status();
    }
    case StepOp::kAttachKv: {
      if (shard_.runner == nullptr) return InternalError("tensor parallel: KV before the runner");
      absl::StatusOr<kv::KvLayout> layout = DecodeAttachKv(msg);
      absl::Status st = layout.ok() ? shard_.runner->AttachKv(*layout) : layout.status();
      return AgreeOverRanks(*collectives_, st, 0, "allocate its KV storage").status();
    }
    case StepOp::kStep: {
      if (shard_.runner == nullptr)
        return InternalError("tensor parallel: a step before the runner");
      DecodedStep step;
      GANNET_RETURN_IF_ERROR(DecodeStep(msg, &step));
      absl::Status st = shard_.runner->Forward(step.batch, nullptr);
      // A step every rank rejects alike (its batch) leaves the group usable; anything else not.
      if (!st.ok() && IsDeviceLost(st)) return st;
      if (!st.ok())
        GANNET_LOG_WARNING("tensor parallel rank {}: step failed: {}", rank_, st.message());
      return absl::OkStatus();
    }
    case StepOp::kAttachDrafter: {
      absl::StatusOr<spec::DrafterOptions> o = DecodeAttachDrafter(msg);
      absl::StatusOr<RankDrafter> made =
          !o.ok() ? absl::StatusOr<RankDrafter>(o.status())
          : draft_.config == nullptr
              ? absl::StatusOr<RankDrafter>(FailedPreconditionError(
                    "tensor parallel rank {}: rank 0 drafts but this process has no draft model "
                    "(give every rank the same draft_model_dir)",
                    rank_))
              : CreateRankDrafter(*draft_.config, *draft_.weights, collectives_.get(), backend_,
                                  shard_.runner.get(), *o);
      if (made.ok()) drafter_ = *std::move(made);
      return AgreeOverRanks(*collectives_, made.status(), 0, "create its drafter").status();
    }
    case StepOp::kDraft: {
      if (drafter_.drafter == nullptr) {
        return InternalError("tensor parallel: a draft round before the drafter");
      }
      DecodedDraft round;
      GANNET_RETURN_IF_ERROR(DecodeDraft(msg, &round));
      absl::Status st = drafter_.drafter->Draft(round.seqs, round.steps, &drafter_.scratch);
      // As a step: a round every rank rejects alike leaves the group usable; anything else not.
      if (!st.ok() && IsDeviceLost(st)) return st;
      if (!st.ok()) {
        GANNET_LOG_WARNING("tensor parallel rank {}: draft round failed: {}", rank_, st.message());
      }
      return absl::OkStatus();
    }
    case StepOp::kHeartbeat:
      return absl::OkStatus();
    case StepOp::kShutdown:
      *done = true;
      return absl::OkStatus();
  }
  return InternalError("tensor parallel: unhandled message");
}

}  // namespace gannet::parallel
