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
