#include "lib/sched/plan_inputs.h"

#include <algorithm>

#include "lib/common/status.h"

namespace gannet::sched {

sampling::RowRequest RowRequestOf(const Request& r) {
  sampling::RowRequest row;
  row.params = &r.spec.sampling;
  row.logprobs = r.spec.logprobs;
  row.num_output = r.num_output();
  row.min_tokens = r.spec.min_tokens;
  row.stop_token_ids = r.spec.stop_token_ids;
  return row;
}

absl::Status ValidatePlanReads(const StepPlan& plan, const kv::KvManager& kv) {
  const int64_t w = kv.sliding_window();
  for (const ScheduledSeq& q : plan.seqs) {
    const int64_t last = q.start + q.num_tokens - 1;
    if (kv.has_group(kv::KvGroup::kSliding)) {
      GANNET_RETURN_IF_ERROR(kv.ValidateRead(q.request->kv_id(), kv::KvGroup::kSliding,
                                             std::max<int64_t>(0, q.start - w + 1), last));
    }
    if (kv.has_group(kv::KvGroup::kFull)) {
      GANNET_RETURN_IF_ERROR(kv.ValidateRead(q.request->kv_id(), kv::KvGroup::kFull, 0, last));
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::sched
