#include "lib/engine/step_batch.h"

#include "lib/sampling/row_policy.h"
#include "lib/sched/plan_inputs.h"

namespace gannet::engine {

runner::StepBatch BuildStepBatch(const sched::StepPlan& plan, const kv::KvManager& kv) {
  runner::StepBatch batch;
  batch.seqs.reserve(plan.seqs.size());
  for (const sched::ScheduledSeq& q : plan.seqs) {
    runner::SeqStep step;
    step.tokens = std::span<const int32_t>(q.request->tokens.data() + q.start, q.num_tokens);
    step.start_pos = static_cast<int32_t>(q.start);
    const std::vector<int32_t>& blocks = q.request->image_block_ids;
    if (!blocks.empty() && q.start < q.request->prompt_len) {
      step.image_block = std::span<const int32_t>(blocks.data() + q.start, q.num_tokens);
    }
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
           sampling::ChooseVerifySampling(sched::RowRequestOf(*q.request), q.num_drafts)) {
        batch.device_sampling.push_back(c.draw);
        batch.host_logits.push_back(c.host ? 1 : 0);
        batch.banned_tokens.push_back(c.banned);
      }
      continue;
    }
    batch.seqs.push_back(step);
    if (!q.sample) continue;
    const sampling::RowChoice c = sampling::ChooseRowSampling(sched::RowRequestOf(*q.request));
    batch.device_sampling.push_back(c.draw);
    batch.host_logits.push_back(c.host ? 1 : 0);
    batch.banned_tokens.push_back(c.banned);
  }
  return batch;
}

}  // namespace gannet::engine
