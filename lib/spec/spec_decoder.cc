#include "lib/spec/spec_decoder.h"

#include <algorithm>

#include "lib/common/status.h"
#include "lib/spec/verify.h"

namespace gannet::spec {

absl::StatusOr<std::unique_ptr<SpecDecoder>> SpecDecoder::Create(
    std::unique_ptr<DraftRunner> drafter, const SpecOptions& options) {
  if (drafter == nullptr) return InvalidArgumentError("spec: no drafter");
  if (options.num_speculative_tokens < 1 ||
      options.num_speculative_tokens > kMaxSpeculativeTokens) {
    return InvalidArgumentError("num_speculative_tokens must be 1 to {}, got {}",
                                kMaxSpeculativeTokens, options.num_speculative_tokens);
  }
  return std::unique_ptr<SpecDecoder>(new SpecDecoder(std::move(drafter), options));
}

absl::Status SpecDecoder::Propose(std::span<const ProposeFrom> from, const kv::KvManager& kv,
                                  int64_t max_model_len) {
  seqs_.clear();
  reqs_.clear();
  caps_.clear();
  int steps = 0;
  for (const ProposeFrom& f : from) {
    sched::Request& r = *f.request;
    r.ClearDrafts();
    if (!r.speculate || r.state != sched::RequestState::kRunning) continue;
    const int cap = static_cast<int>(std::min<int64_t>(options_.num_speculative_tokens,
                                                       sched::MaxUsefulDrafts(r, max_model_len)));
    if (cap < 1) continue;
    DraftSeq d;
    d.token = r.tokens.back();
    d.hidden_row = f.hidden_row;
    d.committed = r.num_computed;
    for (kv::KvGroup g : kv::kAllKvGroups) {
      if (!kv.has_group(g)) continue;
      GANNET_ASSIGN_OR_RETURN(absl::Span<const int32_t> table, kv.PageTable(r.kv_id(), g));
      d.page_table[kv::GroupIndex(g)] = {table.data(), table.size()};
    }
    for (int k = 0; k < options_.num_speculative_tokens; ++k) {
      d.draws.push_back(DraftDrawParams(r.spec.sampling, r.num_output(), k));
    }
    d.want_logits = !r.spec.sampling.greedy();
    seqs_.push_back(std::move(d));
    reqs_.push_back(&r);
    caps_.push_back(cap);
    steps = std::max(steps, cap);
  }
  // Rounds of at most max_seqs requests (the drafter's scratch).
  for (size_t b = 0; b < seqs_.size(); b += options_.max_seqs) {
    const size_t e = std::min(seqs_.size(), b + options_.max_seqs);
    const std::span<const DraftSeq> round(seqs_.data() + b, e - b);
    GANNET_RETURN_IF_ERROR(drafter_->Draft(round, steps, &result_));
    ++stats_.rounds;
    const int64_t vocab = drafter_->config().text.vocab_size;
    for (size_t i = b; i < e; ++i) {
      sched::Request& r = *reqs_[i];
      const std::vector<int32_t>& t = result_.tokens[i - b];
      int n = caps_[i];
      // Nothing after a draft that would end the output can be used.
      for (int k = 0; k < n; ++k) {
        if (r.spec.StopsAt(r.num_output() + k + 1) &&
            std::binary_search(r.spec.stop_token_ids.begin(), r.spec.stop_token_ids.end(), t[k])) {
          n = k + 1;
          break;
        }
      }
      r.drafts.assign(t.begin(), t.begin() + n);
      if (options_.override_drafts && r.spec.sampling.greedy()) {
        options_.override_drafts(r.spec.id, r.num_output(), &r.drafts);
        if (r.drafts.size() > static_cast<size_t>(caps_[i])) r.drafts.resize(caps_[i]);
      }
      if (seqs_[i].want_logits) {
        const std::vector<float>& l = result_.logits[i - b];
        r.draft_logits.assign(l.begin(), l.begin() + n * vocab);
      }
      stats_.drafted_tokens += n;
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::spec
