#include "lib/engine/step_batch.h"

#include <algorithm>

#include "lib/sampling/row_policy.h"
#include "lib/sched/plan_inputs.h"

namespace gannet::engine {
namespace {

// The features of the image tokens in [start, start + n): request.image_features holds one row
// per image token of the prompt, in position order.
std::span<const float> ImageEmbedsOf(const sched::Request& r, int64_t start, int64_t n) {
  if (r.image_features.empty()) return {};
  int64_t before = 0, inside = 0, total = 0;
  for (const ImageBlock& b : r.spec.image_blocks) {
    total += b.size();
    before += std::clamp<int64_t>(start - b.begin, 0, b.size());
    inside +=
        std::clamp<int64_t>(std::min(start + n, b.end) - std::max(start, b.begin), 0, b.size());
  }
  if (inside == 0) return {};
  const int64_t width = static_cast<int64_t>(r.image_features.size()) / total;
  return {r.image_features.data() + before * width, static_cast<size_t>(inside * width)};
}

}  // namespace

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
      step.image_embeds = ImageEmbedsOf(*q.request, q.start, q.num_tokens);
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
