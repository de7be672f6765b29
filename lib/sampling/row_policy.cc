#include "lib/sampling/row_policy.h"

#include <cmath>

namespace gannet::sampling {

RowChoice ChooseRowSampling(const RowRequest& row) {
  const SamplingParams& p = *row.params;
  const bool ban = row.num_output < row.min_tokens && !row.stop_token_ids.empty();
  RowChoice c;
  c.host = p.needs_penalties() || row.logprobs > 0 ||
           (ban && row.stop_token_ids.size() > static_cast<size_t>(kBanSlots));
  c.draw = RowDrawParams(p, static_cast<uint64_t>(row.num_output));
  if (ban && !c.host) c.banned = row.stop_token_ids;
  return c;
}

std::vector<RowChoice> ChooseVerifySampling(const RowRequest& row, int num_drafts) {
  std::vector<RowChoice> out;
  bool host = !row.params->greedy();
  for (int j = 0; j <= num_drafts; ++j) {
    RowRequest r = row;
    r.num_output += j;
    out.push_back(ChooseRowSampling(r));
    host = host || out.back().host;
  }
  for (RowChoice& c : out) {
    c.host = host;
    if (host) c.banned = {};  // the host path masks stop ids itself
  }
  return out;
}

void PrepareRowLogits(std::span<const float> logits, const RowRequest& row,
                      const TokenCounts* counts, std::span<const int32_t> pending,
                      std::vector<float>* out) {
  out->assign(logits.begin(), logits.end());
  if (row.num_output < row.min_tokens) {
    for (int32_t id : row.stop_token_ids) {
      if (id >= 0 && id < static_cast<int32_t>(out->size())) (*out)[id] = -INFINITY;
    }
  }
  if (counts == nullptr || !row.params->needs_penalties()) return;
  if (pending.empty()) {
    ApplyPenalties(*row.params, *counts, out);
    return;
  }
  TokenCounts with_pending = *counts;
  for (int32_t t : pending) with_pending.AddOutput(t);
  ApplyPenalties(*row.params, with_pending, out);
}

SampleResult SampleOnHost(std::span<const float> logits, const RowRequest& row,
                          const TokenCounts* counts, std::vector<float>* row_scratch,
                          std::vector<float>* scratch) {
  if (row.num_output < row.min_tokens && !row.stop_token_ids.empty()) {
    // Stop tokens cannot end the output before min_tokens.
    row_scratch->assign(logits.begin(), logits.end());
    for (int32_t id : row.stop_token_ids) {
      if (id >= 0 && id < static_cast<int32_t>(row_scratch->size())) (*row_scratch)[id] = -INFINITY;
    }
    logits = *row_scratch;
  }
  return Sample(logits, *row.params, counts, static_cast<uint64_t>(row.num_output), row.logprobs,
                scratch);
}

}  // namespace gannet::sampling
