// Parity of the CPU reference backend with HF transformers (tools/golden/make_golden.py dumps),
// for every Gemma-4 target variant and several KV page sizes:
//  - one-shot prefill logits at every position within 1e-3 x max|logit| of HF's;
//  - the 16-token greedy continuation identical to HF's;
//  - step-by-step decode and chunked prefill giving the logits of one-shot prefill.
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/kv/kv_manager.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

using runner::SeqStep;
using runner::StepBatch;
using runner::StepResult;

constexpr double kHfTolerance = 1e-3;    // issue requirement, relative to max |logit|
constexpr double kSelfTolerance = 2e-5;  // decode vs prefill on the same backend (fp32 order)
constexpr int kMaxLen = 64;

class ParityTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    auto [variant, page_size] = GetParam();
    auto m = testing::LoadTinyModel(variant);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    page_size_ = page_size;
    pages_per_seq_ = (kMaxLen + page_size - 1) / page_size;
    auto r = testing::CreateTinyRunner(
        model_->config, model_->weights, &backend_,
        testing::SimpleRunnerOptions(model_->config, page_size, kMaxLen, /*max_seqs=*/2,
                                     /*max_tokens=*/kMaxLen),
        kMaxLen, /*max_seqs=*/2);
    ASSERT_TRUE(r.ok()) << r.status();
    runner_ = std::move(*r);
    table_ = testing::IdentityPageTable(0, pages_per_seq_);
  }

  // Runs tokens[begin, end) of one sequence as a single step.
  StepResult Step(const std::vector<int32_t>& tokens, int begin, int end, SeqStep::Logits want) {
    StepBatch batch;
    SeqStep s;
    s.tokens = std::span<const int32_t>(tokens.data() + begin, end - begin);
    s.start_pos = begin;
    s.page_table[0] = table_;
    s.page_table[1] = table_;
    s.logits = want;
    batch.seqs.push_back(s);
    StepResult r;
    absl::Status st = runner_->Forward(batch, &r);
    EXPECT_TRUE(st.ok()) << st;
    return r;
  }

  static int Argmax(std::span<const float> row) {
    return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
  }

  backend::CpuBackend backend_;
  std::unique_ptr<testing::LoadedModel> model_;
  std::unique_ptr<runner::ModelRunner> runner_;
  std::vector<int32_t> table_;
  int page_size_ = 0;
  int pages_per_seq_ = 0;
};

TEST_P(ParityTest, PrefillLogitsMatchHf) {
  const std::string variant = std::get<0>(GetParam());
  for (const char* prompt : {"short", "long"}) {
    auto golden = testing::LoadGolden(variant, prompt);
    ASSERT_TRUE(golden.ok()) << golden.status();
    const int n = static_cast<int>(golden->input_ids.size());
    StepResult r = Step(golden->input_ids, 0, n, SeqStep::Logits::kAll);
    ASSERT_EQ(r.rows(), n);
    double err =
        testing::MaxRelativeLogitError(r.logits.data(), golden->logits.data(), n, r.vocab_size);
    EXPECT_LE(err, kHfTolerance) << variant << "/" << prompt;
    RecordProperty(std::string(prompt) + "_max_rel_err", std::to_string(err));
  }
}

TEST_P(ParityTest, GreedyContinuationMatchesHf) {
  const std::string variant = std::get<0>(GetParam());
  for (const char* prompt : {"short", "long"}) {
    auto golden = testing::LoadGolden(variant, prompt);
    ASSERT_TRUE(golden.ok()) << golden.status();
    std::vector<int32_t> tokens = golden->input_ids;
    const int n = static_cast<int>(tokens.size());
    tokens.reserve(n + golden->greedy.size());
    StepResult r = Step(tokens, 0, n, SeqStep::Logits::kLast);
    std::vector<int32_t> generated;
    for (size_t i = 0; i < golden->greedy.size(); ++i) {
      int next = Argmax(r.Row(0));
      generated.push_back(next);
      tokens.push_back(next);
      if (i + 1 < golden->greedy.size()) {
        r = Step(tokens, static_cast<int>(tokens.size()) - 1, static_cast<int>(tokens.size()),
                 SeqStep::Logits::kLast);
      }
    }
    EXPECT_EQ(generated, golden->greedy) << variant << "/" << prompt;
  }
}

TEST_P(ParityTest, DecodeAndChunkedPrefillMatchOneShotPrefill) {
  const std::string variant = std::get<0>(GetParam());
  auto golden = testing::LoadGolden(variant, "long");
  ASSERT_TRUE(golden.ok()) << golden.status();
  const std::vector<int32_t>& ids = golden->input_ids;
  const int n = static_cast<int>(ids.size());
  StepResult full = Step(ids, 0, n, SeqStep::Logits::kAll);
  const int vocab = full.vocab_size;

  // One token per step: every step's logits equal the one-shot row of that position.
  std::vector<float> stepwise;
  for (int i = 0; i < n; ++i) {
    StepResult r = Step(ids, i, i + 1, SeqStep::Logits::kLast);
    stepwise.insert(stepwise.end(), r.logits.begin(), r.logits.end());
  }
  EXPECT_LE(testing::MaxRelativeLogitError(stepwise.data(), full.logits.data(), n, vocab),
            kSelfTolerance);

  // Chunks of 7 tokens (not aligned to pages or the 16-token window).
  std::vector<float> chunked;
  for (int b = 0; b < n; b += 7) {
    int e = std::min(n, b + 7);
    StepResult r = Step(ids, b, e, SeqStep::Logits::kAll);
    chunked.insert(chunked.end(), r.logits.begin(), r.logits.end());
  }
  EXPECT_LE(testing::MaxRelativeLogitError(chunked.data(), full.logits.data(), n, vocab),
            kSelfTolerance);
}

// Pages from the KV manager (holes where sliding pages were released) and a prefix-cache hit:
// a request served from a cached prefix gets exactly the logits of a cold run.
TEST_P(ParityTest, PrefixCacheHitMatchesColdRun) {
  const std::string variant = std::get<0>(GetParam());
  auto golden = testing::LoadGolden(variant, "long");
  ASSERT_TRUE(golden.ok()) << golden.status();
  const std::vector<int32_t>& ids = golden->input_ids;
  const int n = static_cast<int>(ids.size());
  const model::TextConfig& c = model_->config.text;
  // The manager hands out the pages of the runner's own layout (one layout value for both).
  auto kv = kv::KvManager::Create(runner_->kv()->layout());
  ASSERT_TRUE(kv.ok()) << kv.status();
  kv::KvManager& m = **kv;

  // Runs ids[begin, end) of sequence `seq` with the manager's tables; returns all logits rows.
  auto run = [&](int64_t seq, int begin, int end) {
    EXPECT_TRUE(m.ReleaseSlidingBefore(seq, begin - c.sliding_window + 1).ok());
    EXPECT_TRUE(m.Grow(seq, end).ok());
    StepBatch batch;
    SeqStep s;
    s.tokens = std::span<const int32_t>(ids.data() + begin, end - begin);
    s.start_pos = begin;
    auto sliding = m.PageTable(seq, kv::KvGroup::kSliding);
    auto full = m.PageTable(seq, kv::KvGroup::kFull);
    s.page_table[0] = {sliding->data(), sliding->size()};
    s.page_table[1] = {full->data(), full->size()};
    s.logits = SeqStep::Logits::kAll;
    batch.seqs.push_back(s);
    StepResult r;
    absl::Status st = runner_->Forward(batch, &r);
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_TRUE(m.CommitPages(seq, ids, end).ok());
    return r;
  };

  // Cold: chunks of 5 so sliding pages are released (holes) along the way.
  ASSERT_TRUE(m.AddSequence(1).ok());
  std::vector<float> cold;
  for (int b = 0; b < n; b += 5) {
    StepResult r = run(1, b, std::min(n, b + 5));
    cold.insert(cold.end(), r.logits.begin(), r.logits.end());
  }
  ASSERT_TRUE(m.Free(1).ok());

  // Warm: attach the cached prefix and compute only the rest.
  const int64_t hit = m.MatchPrefix(ids, n - 1);
  if (page_size_ < n) {
    EXPECT_GT(hit, 0) << "nothing reused";
  }
  ASSERT_TRUE(m.AddSequence(2).ok());
  if (hit > 0) {
    ASSERT_TRUE(m.AttachPrefix(2, ids, hit).ok());
  }
  StepResult warm = run(2, static_cast<int>(hit), n);
  const int vocab = warm.vocab_size;
  ASSERT_EQ(warm.rows(), n - hit);
  EXPECT_LE(testing::MaxRelativeLogitError(warm.logits.data(), cold.data() + hit * vocab,
                                           static_cast<int>(n - hit), vocab),
            kSelfTolerance);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  std::string v = std::get<0>(info.param);
  std::replace(v.begin(), v.end(), '-', '_');
  return v + "_page" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ParityTest,
                         ::testing::Combine(::testing::ValuesIn(testing::TargetVariants()),
                                            ::testing::Values(1, 16, 32)),
                         ParamName);

}  // namespace
}  // namespace gannet
