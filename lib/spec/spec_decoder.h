// The engine's speculative decoder: after every step, the MTP drafter (drafter.h) proposes up to
// K tokens for each speculating request that just got a new token; the scheduler verifies them in
// the request's next chunk ([pending token, drafts]) and verify.h turns the rows into tokens.
//
// One round per step for all proposing requests together (batched drafter steps). Drafts are
// capped where they could not be used (max_tokens, the context: sched::MaxUsefulDrafts) and cut
// after a draft that is a stop token. Sampling requests get the drafter's rows on the host, for
// rejection sampling. Engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/kv/kv_manager.h"
#include "lib/sched/request.h"
#include "lib/spec/drafter.h"

namespace gannet::spec {

// Tests and the acceptance-sweep benchmark replace a greedy request's drafts (request id, the
// output index of drafts[0], the drafts, editable in place; resizing is allowed up to K). Greedy
// verification accepts whatever matches, so the output is unchanged; sampled requests never
// see it (their drafts must come from the drafter's distribution).
using DraftOverride =
    std::function<void(uint64_t request_id, int64_t first_output, std::vector<int32_t>* drafts)>;

struct SpecOptions {
  int num_speculative_tokens = 3;  // K, 1 to kMaxSpeculativeTokens
  int max_seqs = 16;               // requests per round
  DraftOverride override_drafts;   // tests and benchmarks only
};
inline constexpr int kMaxSpeculativeTokens = 8;

// A request that got a new token this step, and the logits row (of the step's StepResult) that
// produced it: the drafter starts from that row's hidden state.
struct ProposeFrom {
  sched::Request* request = nullptr;
  int hidden_row = 0;
};

struct SpecStats {
  int64_t rounds = 0;          // drafter rounds run
  int64_t drafted_tokens = 0;  // drafts proposed
};

class SpecDecoder {
 public:
  static absl::StatusOr<std::unique_ptr<SpecDecoder>> Create(std::unique_ptr<DraftRunner> drafter,
                                                             const SpecOptions& options);

  // Sets request->drafts (and draft_logits) for every listed request, from the target step that
  // just ran. Requests that cannot use a draft get none.
  absl::Status Propose(std::span<const ProposeFrom> from, const kv::KvManager& kv,
                       int64_t max_model_len);

  int num_speculative_tokens() const { return options_.num_speculative_tokens; }
  const DraftRunner& drafter() const { return *drafter_; }
  // DraftRunner::TakeDeviceSeconds of the drafter.
  absl::StatusOr<double> TakeDeviceSeconds() { return drafter_->TakeDeviceSeconds(); }
  const SpecStats& stats() const { return stats_; }

 private:
  SpecDecoder(std::unique_ptr<DraftRunner> drafter, const SpecOptions& options)
      : drafter_(std::move(drafter)), options_(options) {}

  std::unique_ptr<DraftRunner> drafter_;
  SpecOptions options_;
  SpecStats stats_;
  std::vector<DraftSeq> seqs_;
  std::vector<sched::Request*> reqs_;
  std::vector<int> caps_;
  DraftResult result_;
};

}  // namespace gannet::spec
