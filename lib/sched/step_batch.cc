#include "lib/sched/step_batch.h"

#include <algorithm>

#include "lib/common/status.h"
#include "lib/sampling/row_policy.h"

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

runner::StepBatch BuildStepBatch(const StepPlan& plan, const kv::KvManager& kv) {
  runner::StepBatch batch;
  batch.seqs.reserve(plan.seqs.size());
  for (const ScheduledSeq& q : plan.seqs) {
    runner::SeqStep step;
    step.tokens = std::span<const int32_t>(q.request->tokens.data() + q.start, q.num_tokens);
    step.start_pos = static_cast<int32_t>(q.start);
    for (kv::KvGroup g : kv::kAllKvGroups) {
      if (!kv.has_group(g)) continue;
      auto table = kv.PageTable(q.request->kv_id(), g);
      if (table.ok()) step.page_table[kv::GroupIndex(g)] = {table->data(), table->size()};
    }
    step.logits = q.sample ? runner::SeqStep::Logits::kLast : runner::SeqStep::Logits::kNone;
    if (q.num_drafts > 0) {
      // A verify chunk: the pending token and the drafts, a logits row for each.
      step.tokens = q.request->verify_input;
      step.logits = runner::SeqStep::Logits::kAll;
      batch.seqs.push_back(step);
      for (const sampling::RowChoice& c :
           sampling::ChooseVerifySampling(RowRequestOf(*q.request), q.num_drafts)) {
        batch.device_sampling.push_back(c.draw);
        batch.host_logits.push_back(c.host ? 1 : 0);
        batch.banned_tokens.push_back(c.banned);
      }
      continue;
    }
    batch.seqs.push_back(step);
    if (!q.sample) continue;
    const sampling::RowChoice c = sampling::ChooseRowSampling(RowRequestOf(*q.request));
    batch.device_sampling.push_back(c.draw);
    batch.host_logits.push_back(c.host ? 1 : 0);
    batch.banned_tokens.push_back(c.banned);
  }
  return batch;
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
