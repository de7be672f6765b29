// Continuous batching with chunked prefill (docs/request-path.md, step 3).
//
// Every step the scheduler builds a plan under a token budget: first one token (or a verify chunk)
// for each running sequence that is decoding, then prefill chunks for running sequences still
// prefilling, then new sequences admitted from the queue (priority, then arrival order) while the
// running limit, the budget and free KV pages allow — prefill and decode mixed in one step, decodes
// first, and prompt tokens capped while decodes share the step (max_prefill_tokens_while_decoding).
// It asks the KV manager for pages before a sequence enters the plan, so a plan never references a
// page it does not own. When pages run out for a running sequence, the lowest-priority,
// latest-arrived running sequence is preempted by recompute: its pages are freed (full blocks stay
// in the prefix cache) and it re-enters the queue with its output so far, to be recomputed and
// continued later with the same tokens (sampling is counter-based, sampling.h). A request that
// could not run even alone on the whole pool fails with ResourceExhausted instead of waiting
// forever.
//
// Cancellation frees a request's pages at once. Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "lib/kv/kv_manager.h"
#include "lib/sched/request.h"

namespace gannet::sched {

struct SchedulerOptions {
  int32_t max_running_seqs = 16;
  int32_t max_step_tokens = 256;
  int64_t max_model_len = 4096;
  // The most prompt tokens (prefill chunks and admissions) a step carries when it also decodes;
  // 0: no limit beyond max_step_tokens. Steps with no decode use the whole budget.
  int32_t max_prefill_tokens_while_decoding = 0;
};

struct ScheduledSeq {
  Request* request = nullptr;
  int64_t start = 0;  // first position computed this step
  int32_t num_tokens = 0;
  bool sample = false;  // this step completes the known tokens: sample the next one
  // > 0: a verify chunk, [tokens.back(), request->drafts...] (request->verify_input), with a
  // logits row per token; the engine completes it with CompleteVerify.
  int32_t num_drafts = 0;
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;
  int32_t num_tokens = 0;
  bool empty() const { return seqs.empty(); }
};

// A request that left the scheduler during Plan/Cancel/Complete, for the engine to report.
struct Retired {
  std::unique_ptr<Request> request;
  absl::Status error;  // set for kError
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, kv::KvManager* kv);

  // Validates the request against the limits; errors (prompt too long, empty) are reported to the
  // caller, who turns them into events.
  absl::Status Add(std::unique_ptr<Request> request);
  // True if the request was known; it is retired with kCancelled and its pages are freed.
  bool Cancel(uint64_t id);
  // Fails requests whose deadline passed (kError, DeadlineExceeded).
  void ExpireDeadlines(Clock::time_point now);

  StepPlan Plan();
  // After the step ran: every scheduled sequence's tokens are computed; commits full pages to the
  // prefix cache. Sampled tokens are appended by the engine through Append. Verify chunks are
  // left to CompleteVerify.
  void StepCompleted(const StepPlan& plan);
  // After the engine appended a verify chunk's outcome (the accepted drafts and one more token):
  // the KV of the pending token and the accepted drafts is kept, the rejected drafts' KV is
  // rolled back (KvManager::Truncate), full pages go to the prefix cache and the drafts are
  // cleared. A no-op for a request no longer running (it stopped inside the accepted run).
  absl::Status CompleteVerify(const ScheduledSeq& verify, int accepted);
  // Appends a sampled token; retires the request if it hit a stop condition: a stop id past
  // min_tokens, or stop_string_hit, a stop string the engine's text output found (it looks for
  // none before min_tokens, engine::TextOutput::Push).
  void Append(Request* request, int32_t token, bool stop_string_hit = false);
  // Finishes a running request with the given reason (stop strings detected by the engine).
  void Finish(Request* request, FinishReason reason);

  // Requests that left since the last call (finished, cancelled, failed).
  std::vector<Retired> TakeRetired();

  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  int64_t num_preemptions() const { return num_preemptions_; }
  int64_t max_model_len() const { return options_.max_model_len; }
  const kv::KvManager& kv() const { return *kv_; }

 private:
  // One pass over the running sequences: the decoding ones, or the prefilling ones.
  void PlanRunning(bool decoding, int32_t* budget, StepPlan* plan,
                   absl::flat_hash_set<const Request*>* planned);
  absl::Status EnsurePages(Request* r, int64_t new_len);
  void Preempt(Request* r);
  void Retire(Request* r, FinishReason reason, absl::Status error = absl::OkStatus());
  void ReleaseKv(Request* r);
  int64_t SlidingFirstNeeded(int64_t next_pos) const;
  // The length of a prompt chunk of r from `start` that wants n tokens, moved so that it does not
  // end inside an image block: cut before the block, or grown to the block's end when the chunk
  // starts in it and `room` (tokens the step can still take) allows; 0 when it must wait.
  static int32_t FitImageBlocks(const Request& r, int64_t start, int32_t n, int32_t room);
  // Order: higher priority first, then earlier arrival.
  static bool Before(const Request* a, const Request* b);

  SchedulerOptions options_;
  kv::KvManager* kv_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Request>> requests_;
  std::vector<Request*> running_;
  std::vector<Request*> waiting_;
  std::vector<Retired> retired_;
  std::vector<Request*> preempted_now_;  // preempted during the current Plan()
  uint64_t next_arrival_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace gannet::sched
