// Shared by the tensor-parallel drafter tests (CPU threads, one GPU, several GPUs): a tiny
// target/assistant pair, and a draft round planned after one prefill step of kTpSeqs prompts.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/runner/step_runner.h"
#include "lib/spec/drafter.h"
#include "tests/parallel/tp_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet::testing {

inline constexpr int kTpDraftPage = 16;
inline constexpr int kTpDraftSteps = 3;

struct TinyPair {
  std::unique_ptr<LoadedModel> target, drafter;
};

inline TinyPair LoadPair(const std::string& variant) {
  TinyPair p;
  auto t = LoadTinyModel(variant);
  auto d = LoadTinyModel(variant + "-assistant");
  EXPECT_TRUE(t.ok() && d.ok());
  if (t.ok()) p.target = std::move(*t);
  if (d.ok()) p.drafter = std::move(*d);
  return p;
}

inline spec::DrafterOptions TpDrafterOptions() {
  spec::DrafterOptions o;
  o.max_seqs = kTpSeqs;
  o.max_steps = kTpDraftSteps;
  return o;
}

// kTpSeqs prompts prefilled in one step (a logits row each), then the round that drafts from it:
// each sequence's bonus token is its row's arg-max.
struct DraftRound {
  std::vector<std::vector<int32_t>> prompts, tables;
  std::vector<spec::DraftSeq> seqs;
};

inline DraftRound PrefillAndPlan(runner::StepRunner& r, bool sampled) {
  DraftRound round;
  const int pages = kTpMaxLen / kTpDraftPage;
  runner::StepBatch b;
  for (int s = 0; s < kTpSeqs; ++s) {
    round.prompts.push_back(TpPrompt(s, 6 + 7 * s));
    round.tables.push_back(IdentityPageTable(s, pages));
  }
  for (int s = 0; s < kTpSeqs; ++s) {
    b.seqs.push_back(OneSequenceStep(round.prompts[s], round.tables[s]).seqs[0]);
  }
  runner::StepResult res;
  absl::Status st = r.Forward(b, &res);
  EXPECT_TRUE(st.ok()) << st;
  if (!st.ok()) return round;
  for (int s = 0; s < kTpSeqs; ++s) {
    const auto row = res.Row(s);
    spec::DraftSeq d;
    d.token = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    d.hidden_row = s;
    d.committed = static_cast<int64_t>(round.prompts[s].size());
    d.page_table[0] = round.tables[s];
    d.page_table[1] = round.tables[s];
    for (int k = 0; k < kTpDraftSteps; ++k) {
      d.draws.push_back(sampled && s != 1 ? sampling::DrawParams{1.0f, 0, 1.0f, 0.0f, 77u + s}
                                          : sampling::DrawParams::Greedy());
    }
    d.want_logits = sampled && s != 1;
    round.seqs.push_back(d);
  }
  return round;
}

}  // namespace gannet::testing
