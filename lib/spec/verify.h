// The tokens a speculative verify chunk ([pending token, drafts], one logits row per token) emits;
// the engine samples every other row itself (lib/engine/engine.cc) and calls this only for rows
// with drafts:
//  - greedy requests on the device path: the longest prefix of drafts equal to the rows'
//    arg-maxes (each row's draw applies that output index's stop-id ban), plus the arg-max after
//    it -- token for token what decoding without drafts produces;
//  - every other verify chunk on the host: each row prepared exactly as the plain host path
//    prepares it (stop ids masked before min_tokens, penalties counting the drafts before it),
//    then speculative sampling (spec/speculative.h): the emitted tokens are distributed as
//    plain sampling's are, with top-k/top-p/min-p/temperature applied to both the target's and
//    the drafter's rows.
// Logprobs, when asked for, come from each emitted token's own target row.
// Engine thread only.
#pragma once

#include <functional>
#include <vector>

#include "lib/runner/step.h"
#include "lib/sampling/sampling.h"
#include "lib/sched/scheduler.h"

namespace gannet::spec {

struct VerifiedTokens {
  int accepted = 0;                            // drafts accepted
  std::vector<sampling::SampleResult> tokens;  // accepted drafts, then one more token
};

// Reusable buffers of one engine thread: the prepared target rows.
struct VerifyScratch {
  std::vector<std::vector<float>> rows;
};

// The acceptance-sweep benchmark only (bench/spec): replaces the number of drafts a greedy verify
// chunk accepts (request id, output index of the first draft, accepted, drafts) -> accepted, in
// [0, drafts]. The chunk then emits the drafts up to there and the target's arg-max after them:
// a consistent output (the chunk computed exactly those tokens' KV), though not the target's
// own greedy one, so it measures what a given acceptance rate costs and buys.
using AcceptOverride =
    std::function<int(uint64_t request_id, int64_t first_output, int accepted, int num_drafts)>;

// `q` has q.num_drafts > 0 (GANNET_CHECK); `first_row`: its first logits row in `result` (rows
// are in plan order).
VerifiedTokens VerifyChunk(const sched::ScheduledSeq& q, const runner::StepResult& result,
                           int first_row, VerifyScratch* scratch,
                           const AcceptOverride* override_accept = nullptr);

// The draw parameters of draft step k of a round that starts at output index `num_output`
// (greedy requests draw greedily; the others with their own filters and a draft seed).
sampling::DrawParams DraftDrawParams(const sampling::SamplingParams& params, int64_t num_output,
                                     int k);

}  // namespace gannet::spec
