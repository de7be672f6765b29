#include "lib/spec/verify.h"

#include <algorithm>

#include "lib/common/check.h"
#include "lib/sampling/row_policy.h"
#include "lib/sched/plan_inputs.h"
#include "lib/spec/speculative.h"

namespace gannet::spec {

sampling::DrawParams DraftDrawParams(const sampling::SamplingParams& p, int64_t num_output, int k) {
  if (p.greedy()) return sampling::DrawParams::Greedy();
  sampling::DrawParams d = p;  // the draw part of the request's params
  d.seed = DraftSeed(p.seed, num_output, k);
  return d;
}

VerifiedTokens VerifyChunk(const sched::ScheduledSeq& q, const runner::StepResult& result,
                           int first_row, VerifyScratch* scratch,
                           const AcceptOverride* override_accept) {
  GANNET_CHECK(q.num_drafts > 0);
  sched::Request& r = *q.request;
  const sampling::RowRequest row = sched::RowRequestOf(r);
  VerifiedTokens out;
  const int k = q.num_drafts;
  const std::span<const int32_t> drafts(r.drafts.data(), k);
  if (!result.has_logits(first_row)) {
    // Greedy on the device: compare arg-maxes.
    int n = 0;
    while (n < k && result.sampled[first_row + n] == drafts[n]) ++n;
    if (override_accept != nullptr && *override_accept) {
      n = std::clamp((*override_accept)(r.spec.id, row.num_output, n, k), 0, k);
    }
    for (int j = 0; j <= n; ++j) {
      sampling::SampleResult sr;
      sr.token = j < n ? drafts[j] : result.sampled[first_row + j];
      out.tokens.push_back(sr);
    }
    out.accepted = n;
    return out;
  }
  // The host: prepared target rows, the drafter's rows (sampled requests), speculative sampling.
  const int64_t vocab = result.vocab_size;
  scratch->rows.resize(k + 1);
  std::vector<const float*> target_rows(k + 1);
  std::vector<sampling::DrawParams> target_draws(k + 1);
  for (int j = 0; j <= k; ++j) {
    sampling::RowRequest rj = row;
    rj.num_output += j;
    sampling::PrepareRowLogits(result.Row(first_row + j), rj, &r.counts, drafts.first(j),
                               &scratch->rows[j]);
    target_rows[j] = scratch->rows[j].data();
    target_draws[j] = sampling::RowDrawParams(r.spec.sampling, rj.num_output);
  }
  std::vector<const float*> draft_rows;
  std::vector<sampling::DrawParams> draft_draws(k);
  std::vector<uint64_t> accept_seeds(k);
  for (int j = 0; j < k; ++j) {
    draft_draws[j] = DraftDrawParams(r.spec.sampling, row.num_output, j);
    accept_seeds[j] = AcceptSeed(r.spec.sampling.seed, row.num_output, j);
  }
  if (!r.spec.sampling.greedy()) {
    GANNET_CHECK(r.draft_logits.size() == static_cast<size_t>(k) * vocab);
    for (int j = 0; j < k; ++j) draft_rows.push_back(r.draft_logits.data() + j * vocab);
  }
  const VerifyOutcome v =
      VerifyDrafts(target_rows, vocab, target_draws, draft_rows, draft_draws, drafts, accept_seeds);
  out.accepted = v.accepted;
  for (int j = 0; j <= v.accepted; ++j) {
    sampling::SampleResult sr;
    sr.token = j < v.accepted ? drafts[j] : v.next;
    if (row.logprobs > 0) sampling::FillLogprobs(result.Row(first_row + j), row.logprobs, &sr);
    out.tokens.push_back(std::move(sr));
  }
  return out;
}

}  // namespace gannet::spec
