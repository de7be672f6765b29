#include "lib/runner/warmup.h"

#include <algorithm>

#include "lib/common/status.h"
#include "lib/kv/kv_pool_plan.h"
#include "lib/runner/graph_cache.h"

namespace gannet::runner {
namespace {

// k sequences of M / k tokens each, the fewest that keep every sequence within the context; 0
// when none divides M (the key is then left to the steps that serve).
int SeqsFor(int m, const WarmupLimits& l) {
  const int64_t least = (m + l.max_model_len - 1) / l.max_model_len;
  for (int64_t k = std::max<int64_t>(1, least); k <= std::min(m, l.max_seqs); ++k) {
    if (m % k == 0) return static_cast<int>(k);
  }
  return 0;
}

// Whether `seqs` sequences that hold `context` positions and write their last `tokens` this step
// fit the pools side by side, as the KV manager would give them pages: every block of the context
// in the full pool, the window's blocks and the step's in the sliding pool (kv_pool_plan.h).
bool Fits(const WarmupLimits& l, int64_t seqs, int64_t context, int64_t tokens) {
  const int64_t page = std::max(1, l.page_size);
  const int64_t full = (context + page - 1) / page;
  const int64_t sliding = kv::SlidingPagesHeld(l.sliding_window, page, tokens, context);
  return (l.pool_pages[1] <= 0 || seqs * full <= l.pool_pages[1]) &&
         (l.pool_pages[0] <= 0 || seqs * sliding <= l.pool_pages[0]);
}

}  // namespace

void SetPools(const kv::KvLayout& layout, WarmupLimits* l) {
  l->page_size = layout.page_size;
  l->sliding_window = layout.sliding_window;
  for (kv::KvGroup g : kv::kAllKvGroups) {
    l->pool_pages[kv::GroupIndex(g)] = layout.num_pages[kv::GroupIndex(g)];
  }
}

std::vector<WarmupStep> PlanWarmup(const WarmupLimits& l, const std::vector<int>& linear_rows,
                                   bool graphs) {
  std::vector<WarmupStep> steps;
  if (l.max_seqs < 1 || l.max_tokens < 1 || l.max_model_len < 1) return steps;
  // Row keys: a step of M tokens, a logits row per token while the rows allow.
  for (const int m : linear_rows) {
    if (m < 1 || m > l.max_tokens) continue;
    const int k = SeqsFor(m, l);
    if (k == 0 || !Fits(l, k, m / k, m / k)) continue;
    WarmupStep s;
    s.num_seqs = k;
    s.tokens_per_seq = m / k;
    s.context = m / k;
    s.all_logits = m <= l.max_logit_rows;
    steps.push_back(s);
  }
  // Decode shapes: every batch bucket at every context-length bucket, eagerly first, then again
  // to record (graphs only).
  std::vector<int> batches;
  for (int n = 1; n <= l.max_seqs; ++n) {
    const int b = BatchBucket(n, l.max_seqs);
    if (b <= l.max_tokens && b <= l.max_logit_rows && (batches.empty() || batches.back() != b)) {
      batches.push_back(b);
    }
  }
  std::vector<int> contexts;
  for (int64_t c = 256;; c *= 2) {  // LengthBucket's values; the last one holds max_model_len
    contexts.push_back(static_cast<int>(std::min<int64_t>(c, l.max_model_len)));
    if (c >= l.max_model_len) break;
  }
  for (int pass = 0; pass < (graphs ? 2 : 1); ++pass) {
    for (const bool greedy : {true, false}) {
      if (!greedy && !l.both_sample_modes) continue;
      for (const int b : batches) {
        for (const int c : contexts) {
          if (!Fits(l, b, c, 1)) continue;
          WarmupStep s;
          s.num_seqs = b;
          s.context = c;
          s.greedy = greedy;
          steps.push_back(s);
        }
      }
    }
  }
  return steps;
}

absl::Status WarmUp(StepRunner* runner, const kv::KvLayout& layout,
                    const std::vector<WarmupStep>& steps, int32_t vocab_size) {
  const int page = layout.page_size;
  if (page < 1 || vocab_size < 1) {
    return InvalidArgumentError("warm-up: no KV layout or vocabulary");
  }
  StepResult result;
  std::vector<int32_t> tokens, tables[2];
  for (size_t i = 0; i < steps.size(); ++i) {
    const WarmupStep& w = steps[i];
    const int start = w.context - w.tokens_per_seq;
    const int blocks = (w.context + page - 1) / page;
    // One page table for every sequence: block b on page b mod the pool's pages.
    for (kv::KvGroup g : kv::kAllKvGroups) {
      std::vector<int32_t>& t = tables[kv::GroupIndex(g)];
      t.clear();
      const int32_t pages = layout.num_pages[kv::GroupIndex(g)];
      for (int b = 0; pages > 0 && b < blocks; ++b) t.push_back(b % pages);
    }
    tokens.resize(static_cast<size_t>(w.num_seqs) * w.tokens_per_seq);
    for (size_t t = 0; t < tokens.size(); ++t) {
      tokens[t] = static_cast<int32_t>((t * 7919 + i) % vocab_size);
    }
    StepBatch batch;
    const int rows_per_seq = w.all_logits ? w.tokens_per_seq : 1;
    for (int s = 0; s < w.num_seqs; ++s) {
      SeqStep seq;
      seq.tokens = {tokens.data() + static_cast<size_t>(s) * w.tokens_per_seq,
                    static_cast<size_t>(w.tokens_per_seq)};
      seq.start_pos = start;
      seq.page_table[0] = tables[0];
      seq.page_table[1] = tables[1];
      seq.logits = w.all_logits ? SeqStep::Logits::kAll : SeqStep::Logits::kLast;
      batch.seqs.push_back(seq);
      for (int r = 0; r < rows_per_seq; ++r) {
        sampling::DrawParams p;
        p.temperature = w.greedy ? 0.0f : 1.0f;
        p.seed = static_cast<uint64_t>(s);
        batch.device_sampling.push_back(p);
        batch.host_logits.push_back(0);
      }
    }
    absl::Status st = runner->Forward(batch, &result);
    if (!st.ok()) {
      return Annotate(
          st, fmt::format("warm-up step {} of {} ({} sequences of {} tokens, context {})", i + 1,
                          steps.size(), w.num_seqs, w.tokens_per_seq, w.context));
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::runner
