// The tiny checkpoints of every Gemma-4 variant end to end through runner::ModelRunner on the CUDA
// backend, against the same runner on the CPU backend:
//  - prefill logits at every position within kLogitTolerance x max|logit| (per row);
//  - 64 greedy tokens identical; where bf16 turns a near-tie the other way, the test accepts the
//    divergence only if the CPU's own logits at that step put the two tokens within
//    kNearTie x max|logit| of each other (and reports it), and stops comparing there;
//  - chunked prefill (7-token chunks) and a two-sequence mixed batch match the CPU too;
//  - the same model loaded as synthetic weights (generated on the GPU) gives bit-identical logits
//    to the checkpoint, which was written by the same generator.
//
// Tolerance: the CUDA backend keeps activations and KV in bf16 (relative rounding 2^-9 per
// tensor, compounded over up to 12 layers and the 512-wide tied head) while the CPU runs f32
// throughout; 5e-2 of the largest logit bounds that with margin, and is still far below what a
// wrong op produces (O(1)).
#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/model/weights.h"
#include "tests/backend/cuda_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

using runner::SeqStep;
using runner::StepBatch;
using runner::StepResult;

constexpr double kLogitTolerance = 5e-2;
constexpr double kNearTie = 2e-2;
constexpr int kMaxLen = 160;
constexpr int kGreedyTokens = 64;

class CudaRunnerTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    if (!testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    auto [variant, page] = GetParam();
    auto m = testing::LoadTinyModel(variant);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    auto g = backend::CudaBackend::Create(0);
    ASSERT_TRUE(g.ok()) << g.status();
    gpu_be_ = std::move(*g);
    page_ = page;
    const auto opts = testing::SimpleRunnerOptions(model_->config, page, kMaxLen, 2, kMaxLen);
    auto c = runner::ModelRunner::Create(model_->config, model_->weights, &cpu_be_, opts);
    ASSERT_TRUE(c.ok()) << c.status();
    cpu_ = std::move(*c);
    auto r = runner::ModelRunner::Create(model_->config, model_->weights, gpu_be_.get(), opts);
    ASSERT_TRUE(r.ok()) << r.status();
    gpu_ = std::move(*r);
    pages_per_seq_ = (kMaxLen + page - 1) / page;
    for (int s = 0; s < 2; ++s) tables_[s] = testing::IdentityPageTable(s, pages_per_seq_);
  }

  SeqStep Seq(const std::vector<int32_t>& tokens, int begin, int end, SeqStep::Logits want, int s = 0) {
    SeqStep q;
    q.tokens = std::span<const int32_t>(tokens.data() + begin, end - begin);
    q.start_pos = begin;
    q.page_table[0] = tables_[s];
    q.page_table[1] = tables_[s];
    q.logits = want;
    return q;
  }
  StepResult Run(runner::ModelRunner& r, const StepBatch& b) {
    StepResult out;
    absl::Status st = r.Forward(b, &out);
    EXPECT_TRUE(st.ok()) << st;
    return out;
  }
  StepResult Step(runner::ModelRunner& r, const std::vector<int32_t>& t, int begin, int end,
                  SeqStep::Logits want) {
    StepBatch b;
    b.seqs.push_back(Seq(t, begin, end, want));
    return Run(r, b);
  }
  static int Argmax(std::span<const float> row) {
    return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
  }
  std::string Name() const { return std::get<0>(GetParam()) + "/page" + std::to_string(page_); }

  backend::CpuBackend cpu_be_;
  std::unique_ptr<backend::CudaBackend> gpu_be_;
  std::unique_ptr<testing::LoadedModel> model_;
  std::unique_ptr<runner::ModelRunner> cpu_, gpu_;
  std::vector<int32_t> tables_[2];
  int page_ = 0, pages_per_seq_ = 0;
};

TEST_P(CudaRunnerTest, PrefillLogitsMatchCpu) {
  for (const char* prompt : {"short", "long"}) {
    auto golden = testing::LoadGolden(std::get<0>(GetParam()), prompt);
    ASSERT_TRUE(golden.ok()) << golden.status();
    const int n = static_cast<int>(golden->input_ids.size());
    StepResult c = Step(*cpu_, golden->input_ids, 0, n, SeqStep::Logits::kAll);
    StepResult g = Step(*gpu_, golden->input_ids, 0, n, SeqStep::Logits::kAll);
    ASSERT_EQ(g.rows(), n);
    const double err = testing::MaxRelativeLogitError(g.logits.data(), c.logits.data(), n, c.vocab_size);
    EXPECT_LE(err, kLogitTolerance) << Name() << "/" << prompt;
    RecordProperty(std::string(prompt) + "_max_rel_err", std::to_string(err));
  }
}

TEST_P(CudaRunnerTest, Greedy64TokensMatchCpu) {
  auto golden = testing::LoadGolden(std::get<0>(GetParam()), "long");
  ASSERT_TRUE(golden.ok()) << golden.status();
  std::vector<int32_t> ct = golden->input_ids, gt = golden->input_ids;
  const int n = static_cast<int>(ct.size());
  StepResult c = Step(*cpu_, ct, 0, n, SeqStep::Logits::kLast);
  StepResult g = Step(*gpu_, gt, 0, n, SeqStep::Logits::kLast);
  for (int i = 0; i < kGreedyTokens; ++i) {
    const int cn = Argmax(c.Row(0)), gn = Argmax(g.Row(0));
    if (cn != gn) {
      // Same prefix so far: is this a near-tie in the CPU's own (f32) logits?
      const auto row = c.Row(0);
      double max_abs = 0;
      for (float v : row) max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
      const double gap = row[cn] - row[gn];
      EXPECT_LE(gap, kNearTie * max_abs) << Name() << ": token " << i << " cpu " << cn << " gpu " << gn;
      RecordProperty("near_tie_divergence_at", i);
      std::printf("[ note ] %s: bf16 near-tie at token %d (cpu %d, gpu %d, gap %.3g of max %.3g)\n",
                  Name().c_str(), i, cn, gn, gap, max_abs);
      return;
    }
    ct.push_back(cn);
    gt.push_back(gn);
    const int len = static_cast<int>(ct.size());
    c = Step(*cpu_, ct, len - 1, len, SeqStep::Logits::kLast);
    g = Step(*gpu_, gt, len - 1, len, SeqStep::Logits::kLast);
  }
  RecordProperty("identical_tokens", kGreedyTokens);
}

TEST_P(CudaRunnerTest, ChunkedPrefillAndMixedBatchMatchCpu) {
  auto golden = testing::LoadGolden(std::get<0>(GetParam()), "long");
  ASSERT_TRUE(golden.ok()) << golden.status();
  const std::vector<int32_t>& ids = golden->input_ids;
  const int n = static_cast<int>(ids.size());
  std::vector<float> cpu_logits, gpu_logits;
  for (int b = 0; b < n; b += 7) {
    const int e = std::min(n, b + 7);
    StepResult c = Step(*cpu_, ids, b, e, SeqStep::Logits::kAll);
    StepResult g = Step(*gpu_, ids, b, e, SeqStep::Logits::kAll);
    cpu_logits.insert(cpu_logits.end(), c.logits.begin(), c.logits.end());
    gpu_logits.insert(gpu_logits.end(), g.logits.begin(), g.logits.end());
  }
  const int vocab = static_cast<int>(model_->config.text.vocab_size);
  EXPECT_LE(testing::MaxRelativeLogitError(gpu_logits.data(), cpu_logits.data(), n, vocab), kLogitTolerance);

  // Sequence 1 prefills 20 tokens while sequence 0 decodes its next token (decode + prefill
  // kernels' rows in one step).
  auto short_golden = testing::LoadGolden(std::get<0>(GetParam()), "short");
  ASSERT_TRUE(short_golden.ok());
  std::vector<int32_t> seq0 = ids;
  seq0.push_back(7);
  const std::vector<int32_t>& seq1 = short_golden->input_ids;
  StepBatch batch;
  batch.seqs.push_back(Seq(seq0, n, n + 1, SeqStep::Logits::kLast, 0));
  batch.seqs.push_back(Seq(seq1, 0, static_cast<int>(seq1.size()), SeqStep::Logits::kAll, 1));
  StepResult c = Run(*cpu_, batch), g = Run(*gpu_, batch);
  ASSERT_EQ(c.rows(), g.rows());
  EXPECT_LE(testing::MaxRelativeLogitError(g.logits.data(), c.logits.data(), c.rows(), vocab), kLogitTolerance);
}

TEST_P(CudaRunnerTest, SyntheticWeightsReproduceTheCheckpoint) {
  const model::ModelWeights synth = model::SyntheticWeights(model_->config, 0x9a77e7);
  auto r = runner::ModelRunner::Create(model_->config, synth, gpu_be_.get(),
                                       testing::SimpleRunnerOptions(model_->config, page_, kMaxLen, 2, kMaxLen));
  ASSERT_TRUE(r.ok()) << r.status();
  auto golden = testing::LoadGolden(std::get<0>(GetParam()), "short");
  ASSERT_TRUE(golden.ok());
  const int n = static_cast<int>(golden->input_ids.size());
  StepResult a = Step(*gpu_, golden->input_ids, 0, n, SeqStep::Logits::kAll);
  StepResult b = Step(**r, golden->input_ids, 0, n, SeqStep::Logits::kAll);
  EXPECT_EQ(a.logits, b.logits) << "GPU-generated weights differ from the checkpoint's";
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  std::string v = std::get<0>(info.param);
  std::replace(v.begin(), v.end(), '-', '_');
  return v + "_page" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(TinyModels, CudaRunnerTest,
                         ::testing::Combine(::testing::ValuesIn(testing::TargetVariants()),
                                            ::testing::Values(16, 32)),
                         ParamName);

}  // namespace
}  // namespace gannet
