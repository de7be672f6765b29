// Shared by the tensor-parallel tests (CPU threads, one GPU, several GPUs): the runner steps
// every test compares, and the group builders.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/common/status.h"
#include "lib/parallel/host_collectives.h"
#include "lib/parallel/tp_runner.h"
#include "lib/runner/step_runner.h"
#include "tests/testing/tiny_models.h"

namespace gannet::testing {

inline constexpr int kTpMaxLen = 64;
inline constexpr int kTpSeqs = 3;

inline std::vector<int32_t> TpPrompt(int seed, int n) {
  std::vector<int32_t> p = {2};
  for (int i = 1; i < n; ++i) p.push_back(108 + (seed * 131 + i * 37) % 400);
  return p;
}

// What a run of steps produced: every decode step's logits rows and the greedy tokens.
struct TpRun {
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<int32_t>> tokens;  // per sequence, prompt + generated
};

// Prefills kTpSeqs prompts of different lengths (one step, several chunks' worth), then decodes
// `steps` greedy tokens for all of them, one step each.
inline TpRun RunGreedySteps(runner::StepRunner& r, int steps, int page_size) {
  const int pages = (kTpMaxLen + page_size - 1) / page_size;
  TpRun run;
  std::vector<std::vector<int32_t>> tables;
  for (int s = 0; s < kTpSeqs; ++s) {
    run.tokens.push_back(TpPrompt(s, 7 + 5 * s));
    tables.push_back(IdentityPageTable(s, pages));
  }
  auto step = [&](bool prefill, runner::StepResult* res) {
    runner::StepBatch b;
    for (int s = 0; s < kTpSeqs; ++s) {
      runner::SeqStep q;
      const int n = static_cast<int>(run.tokens[s].size());
      q.tokens = prefill ? std::span<const int32_t>(run.tokens[s])
                         : std::span<const int32_t>(&run.tokens[s][n - 1], 1);
      q.start_pos = prefill ? 0 : n - 1;
      q.page_table[0] = tables[s];
      q.page_table[1] = tables[s];
      b.seqs.push_back(q);
    }
    absl::Status st = r.Forward(b, res);
    EXPECT_TRUE(st.ok()) << st;
    return st.ok();
  };
  runner::StepResult res;
  if (!step(true, &res)) return run;
  for (int i = 0; i < steps; ++i) {
    for (int s = 0; s < kTpSeqs; ++s) {
      auto row = res.Row(s);
      run.tokens[s].push_back(
          static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    }
    if (!step(false, &res)) return run;
    run.logits.push_back(res.logits);
  }
  return run;
}

// One device's run on the CPU backend: the reference the groups are compared with.
inline TpRun RunOneDeviceReference(const LoadedModel& m, int steps, int page_size) {
  backend::CpuBackend be;
  auto opts = SimpleRunnerOptions(m.config, page_size, kTpMaxLen, kTpSeqs, 256);
  auto r = CreateTinyRunner(m.config, m.weights, &be, opts, kTpMaxLen, kTpSeqs);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? RunGreedySteps(**r, steps, page_size) : TpRun{};
}

// Every decode step's logits within `tolerance` of max |logit| of the reference's, same tokens.
inline void ExpectSameRun(const TpRun& got, const TpRun& want, int vocab, double tolerance) {
  EXPECT_EQ(got.tokens, want.tokens);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  for (size_t i = 0; i < want.logits.size(); ++i) {
    ASSERT_EQ(got.logits[i].size(), want.logits[i].size());
    EXPECT_LT(MaxRelativeLogitError(got.logits[i].data(), want.logits[i].data(),
                                    static_cast<int>(want.logits[i].size() / vocab), vocab),
              tolerance)
        << "decode step " << i;
  }
}

// A one-sequence prefill step of `tokens` (the caller keeps both vectors alive).
inline runner::StepBatch OneSequenceStep(const std::vector<int32_t>& tokens,
                                         const std::vector<int32_t>& table) {
  runner::StepBatch b;
  runner::SeqStep q;
  q.tokens = tokens;
  q.page_table[0] = table;
  q.page_table[1] = table;
  b.seqs.push_back(q);
  return b;
}

// A TpRunner over `backends` joined by `collectives`, KV attached for kTpSeqs sequences.
inline absl::StatusOr<std::unique_ptr<parallel::TpRunner>> CreateTinyTpRunner(
    const LoadedModel& m, std::vector<backend::Backend*> backends,
    std::vector<std::unique_ptr<backend::Collectives>> collectives, std::shared_ptr<void> shared,
    int page_size, model::MoeSplit moe_split = model::MoeSplit::kAuto) {
  const int world = static_cast<int>(backends.size());
  std::vector<parallel::TpRankParts> ranks(world);
  for (int r = 0; r < world; ++r) {
    ranks[r].backend = backends[r];
    ranks[r].collectives = std::move(collectives[r]);
  }
  runner::RunnerOptions o = SimpleRunnerOptions(m.config, page_size, kTpMaxLen, kTpSeqs, 256);
  o.moe_split = moe_split;
  GANNET_ASSIGN_OR_RETURN(auto tp, parallel::TpRunner::Create(m.config, m.weights, std::move(ranks),
                                                              std::move(shared), o));
  GANNET_RETURN_IF_ERROR(tp->AttachKv(
      SimpleKvLayout(tp->shard_config(), *backends[0], page_size, kTpMaxLen, kTpSeqs)));
  return tp;
}

// A group of `world` ranks as threads on the host: rank r computes on make(r), the ranks joined
// by the host collectives (parallel::HostGroup, rank-order sums), KV attached.
struct HostTpGroup {
  std::vector<std::unique_ptr<backend::Backend>> backends;
  std::unique_ptr<parallel::TpRunner> runner;
};

inline HostTpGroup MakeHostTpGroup(
    const LoadedModel& m, int world, int page_size,
    const std::function<std::unique_ptr<backend::Backend>(int)>& make,
    model::MoeSplit moe_split = model::MoeSplit::kAuto) {
  HostTpGroup g;
  auto group = std::make_shared<parallel::HostGroup>(world);
  std::vector<backend::Backend*> raw;
  std::vector<std::unique_ptr<backend::Collectives>> comms;
  for (int r = 0; r < world; ++r) {
    g.backends.push_back(make(r));
    raw.push_back(g.backends.back().get());
    comms.push_back(group->Rank(r));
  }
  auto tp = CreateTinyTpRunner(m, raw, std::move(comms), group, page_size, moe_split);
  EXPECT_TRUE(tp.ok()) << tp.status();
  if (tp.ok()) g.runner = std::move(*tp);
  return g;
}

}  // namespace gannet::testing
