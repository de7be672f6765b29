// The start-up warm-up (runner/warmup.h): which steps it plans, that they run on every variant's
// runner, and that a sequence served after it computes what it computes without it.
#include "lib/runner/warmup.h"

#include <algorithm>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/runner/graph_cache.h"
#include "tests/testing/tiny_models.h"

namespace gannet::runner {
namespace {

WarmupLimits Limits(int max_seqs, int max_tokens, int max_logit_rows, int64_t max_model_len) {
  WarmupLimits l;
  l.max_seqs = max_seqs;
  l.max_tokens = max_tokens;
  l.max_logit_rows = max_logit_rows;
  l.max_model_len = max_model_len;
  return l;
}

TEST(PlanWarmupTest, EveryRowKeyOnceThenEveryDecodeShape) {
  WarmupLimits l = Limits(64, 2048, 64, 1500);
  const std::vector<int> rows = {1, 2, 3, 16, 24, 64, 80, 256, 2048, 4096};
  const std::vector<WarmupStep> steps = PlanWarmup(l, rows, /*graphs=*/true);
  // Row keys first: M tokens in all, within the context, a logits row per token while they fit.
  std::vector<int> ms;
  size_t i = 0;
  for (; i < steps.size() && !(steps[i].tokens_per_seq == 1 && steps[i].context >= 256); ++i) {
    const WarmupStep& s = steps[i];
    ms.push_back(s.num_seqs * s.tokens_per_seq);
    EXPECT_LE(s.context, l.max_model_len);
    EXPECT_EQ(s.context, s.tokens_per_seq);
    EXPECT_EQ(s.all_logits, s.num_seqs * s.tokens_per_seq <= l.max_logit_rows);
  }
  // 4096 is past the step's tokens; 2048 needs two sequences of 1024 (context 1500).
  EXPECT_EQ(ms, (std::vector<int>{1, 2, 3, 16, 24, 64, 80, 256, 2048}));
  EXPECT_EQ(steps[i - 1].num_seqs, 2);
  // Then the decode shapes, twice (eager, then recorded): every batch bucket at every
  // context-length bucket, the last bucket at the longest context.
  std::set<std::pair<int, int>> first, second;
  const size_t decode = steps.size() - i;
  ASSERT_EQ(decode % 2, 0u);
  for (size_t j = i; j < steps.size(); ++j) {
    const WarmupStep& s = steps[j];
    EXPECT_EQ(s.tokens_per_seq, 1);
    EXPECT_TRUE(s.greedy);
    EXPECT_FALSE(s.all_logits);
    EXPECT_EQ(BatchBucket(s.num_seqs, l.max_seqs), s.num_seqs);
    (j - i < decode / 2 ? first : second).insert({s.num_seqs, LengthBucket(s.context)});
  }
  EXPECT_EQ(first, second);
  std::set<std::pair<int, int>> want;
  for (int n = 1; n <= l.max_seqs; ++n) {
    for (int c : {256, 512, 1024, 1500}) want.insert({BatchBucket(n, l.max_seqs), LengthBucket(c)});
  }
  EXPECT_EQ(first, want);
  EXPECT_EQ(first.size() * 2, decode);

  // Without graphs each decode shape runs once; a tensor-parallel group adds the sampled ones.
  const size_t once = PlanWarmup(l, rows, false).size() - i;
  EXPECT_EQ(once, decode / 2);
  l.both_sample_modes = true;
  const std::vector<WarmupStep> both = PlanWarmup(l, rows, true);
  EXPECT_EQ(both.size() - i, 2 * decode);
  EXPECT_EQ(std::count_if(both.begin(), both.end(), [](const WarmupStep& s) { return !s.greedy; }),
            static_cast<long>(decode));
}

TEST(PlanWarmupTest, SmallLimits) {
  const WarmupLimits l = Limits(3, 5, 3, 4);
  const std::vector<WarmupStep> steps = PlanWarmup(l, {1, 2, 3, 4, 5}, false);
  std::vector<std::pair<int, int>> shapes;  // (sequences, tokens each)
  for (const WarmupStep& s : steps) {
    EXPECT_LE(s.context, 4);
    EXPECT_LE(s.num_seqs, 3);
    EXPECT_LE(s.num_seqs * s.tokens_per_seq, 5);
    shapes.push_back({s.num_seqs, s.tokens_per_seq});
  }
  // 5 tokens fit no split into at most 3 sequences of at most 4: left out. Decode: buckets 1, 2, 3
  // (4 capped at max_seqs) at context 4.
  EXPECT_EQ(shapes, (std::vector<std::pair<int, int>>{
                        {1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 1}, {2, 1}, {3, 1}}));
  EXPECT_TRUE(PlanWarmup(WarmupLimits{}, {1, 2}, true).empty());
}

// Serving cannot run more sequences at a context than the pools hold side by side: such decode
// shapes (and prompt steps) are left out, the rest stay.
TEST(PlanWarmupTest, LeavesOutShapesThePoolsCannotHold) {
  WarmupLimits l = Limits(64, 2048, 64, 32768);
  l.page_size = 16;
  l.sliding_window = 1024;
  // 64 sequences' windows: a decode step holds the blocks of 1024 positions, 65 at the worst
  // alignment (kv::SlidingPagesHeld), 64 while the whole context is 1024.
  l.pool_pages[0] = 64 * 65;
  l.pool_pages[1] = 10000;  // 160000 tokens
  std::set<std::pair<int, int>> shapes;
  for (const WarmupStep& s : PlanWarmup(l, {1, 256, 2048}, false)) {
    EXPECT_LE(static_cast<int64_t>(s.num_seqs) * ((s.context + 15) / 16), 10000);
    if (s.tokens_per_seq == 1) shapes.insert({s.num_seqs, s.context});
  }
  EXPECT_TRUE(shapes.count({1, 32768}));
  EXPECT_TRUE(shapes.count({64, 2048}));
  EXPECT_FALSE(shapes.count({64, 4096}));
  EXPECT_TRUE(shapes.count({32, 4096}));
  EXPECT_FALSE(shapes.count({32, 8192}));
  l.pool_pages[0] = 64 * 65 - 1;  // one page short of 64 whole windows
  bool full_context_1024 = false;
  for (const WarmupStep& s : PlanWarmup(l, {1, 256, 2048}, false)) {
    if (s.num_seqs == 64) {
      EXPECT_LT(s.context, 1025);
    }
    full_context_1024 |= s.num_seqs == 64 && s.context == 1024;
  }
  EXPECT_TRUE(full_context_1024);
}

// The logits of two sequences decoded greedily after `warm` (or not): the warm-up's steps write
// pages the sequences then use, and must leave no trace in what they compute.
std::vector<float> Generate(const std::string& variant, bool warm) {
  auto m = testing::LoadTinyModel(variant);
  EXPECT_TRUE(m.ok());
  backend::CpuBackend be;
  constexpr int kMaxLen = 64, kSeqs = 4, kPage = 8;
  auto opts = testing::SimpleRunnerOptions((*m)->config, kPage, kMaxLen, kSeqs, 32);
  auto r = testing::CreateTinyRunner((*m)->config, (*m)->weights, &be, opts, kMaxLen, kSeqs);
  EXPECT_TRUE(r.ok()) << r.status();
  if (warm) {
    const kv::KvLayout layout = testing::SimpleKvLayout((*m)->config, be, kPage, kMaxLen, kSeqs);
    WarmupLimits l = Limits(kSeqs, 32, kSeqs, kMaxLen);
    SetPools(layout, &l);
    // The CPU tunes nothing: the row keys CUDA would warm, to run those steps too.
    const std::vector<WarmupStep> steps = PlanWarmup(l, {1, 2, 3, 5, 8, 16, 24, 32}, false);
    absl::Status st = WarmUp(r->get(), layout, steps, (*m)->config.text.vocab_size);
    EXPECT_TRUE(st.ok()) << st;
  }
  const int pages = kMaxLen / kPage;
  std::vector<std::vector<int32_t>> tokens = {{2, 140, 151, 162, 173, 184}, {2, 300, 301}};
  std::vector<std::vector<int32_t>> tables = {testing::IdentityPageTable(0, pages),
                                              testing::IdentityPageTable(1, pages)};
  std::vector<float> out;
  for (int step = 0; step < 12; ++step) {
    StepBatch b;
    for (size_t s = 0; s < tokens.size(); ++s) {
      SeqStep q;
      const int n = static_cast<int>(tokens[s].size());
      q.tokens = step == 0 ? std::span<const int32_t>(tokens[s])
                           : std::span<const int32_t>(&tokens[s][n - 1], 1);
      q.start_pos = step == 0 ? 0 : n - 1;
      q.page_table[0] = tables[s];
      q.page_table[1] = tables[s];
      b.seqs.push_back(q);
    }
    StepResult res;
    absl::Status st = (*r)->Forward(b, &res);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok()) return out;
    for (size_t s = 0; s < tokens.size(); ++s) {
      auto row = res.Row(static_cast<int>(s));
      tokens[s].push_back(
          static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
      out.insert(out.end(), row.begin(), row.end());
    }
  }
  return out;
}

TEST(WarmUpTest, LeavesNoTraceInWhatIsServedAfter) {
  for (const char* variant : {"e2b", "e4b", "26b-a4b", "31b"}) {
    SCOPED_TRACE(variant);
    const std::vector<float> cold = Generate(variant, false);
    ASSERT_FALSE(cold.empty());
    EXPECT_EQ(Generate(variant, true), cold);  // bit for bit: the CPU computes each row alone
  }
}

TEST(WarmUpTest, RejectsAMissingLayout) {
  EXPECT_FALSE(WarmUp(nullptr, kv::KvLayout{}, {}, 100).ok());
}

}  // namespace
}  // namespace gannet::runner
