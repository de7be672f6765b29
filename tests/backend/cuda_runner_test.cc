// The tiny checkpoints of every Gemma-4 variant end to end through runner::ModelRunner on the CUDA
// backend, against the f32 CPU backend, with the CPU backend rounding its activations to bf16
// where the CUDA backend stores bf16 (bf16_cpu_backend.h) as the yardstick of what bf16 alone does:
//  - prefill logits at every position: the GPU's max relative error against the f32 CPU (per row,
//    relative to max|logit|) must stay within max(kAbsFloor, kGapFactor x the bf16 CPU's own
//    error against the f32 CPU), and under kF32Cap;
//  - 64 greedy tokens identical to the f32 CPU's; where a near-tie goes the other way the test
//    accepts it only if the CPU's own logits at that step put the two tokens within
//    kNearTie x max|logit| (reported), and stops comparing there;
//  - chunked prefill (7-token chunks) and a two-sequence mixed batch, same bound;
//  - the same model loaded as synthetic weights (generated on the GPU) gives bit-identical logits
//    to the checkpoint, which was written by the same generator.
// Every test runs on the default bf16 compute path at page sizes 16 and 32, and on the fp16
// compute path (compute_dtype f16, what a V100 runs: fp16 weights and activations, f32 residual,
// norm inputs and logits) at page size 16 against the same bounds: fp16's 10-bit mantissa rounds
// less than bf16's 8, so the bf16 yardstick bounds it too.
//
// Why a relative bound: bf16 activations round every GEMM input to 8 mantissa bits and the tiny
// models (hidden 24-48, PLE groups of 16, attention scale 1, top-2 of 8 experts) amplify it very
// differently. Measured on H100 (max rel logit error vs f32 CPU): 31B 0.012-0.022, 26B-A4B 0.016-
// 0.022, E2B 0.049-0.058, E4B 0.096-0.098 -- and the bf16-rounding CPU reference, built from the
// reference ops themselves, lands at 0.01-0.08 (0.43 on 26B-A4B, where a bf16 flip changes an
// expert choice). Two bf16 pipelines that round at the same places still differ by accumulation
// order, and these models magnify that, so the GPU is checked to be no worse than a small multiple
// of what bf16 does to the model, while a wrong op (errors O(1)) still fails every bound.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/model/weights.h"
#include "tests/backend/bf16_cpu_backend.h"
#include "tests/backend/cuda_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

using runner::SeqStep;
using runner::StepBatch;
using runner::StepResult;

using testing::kAbsFloor;
using testing::kGapFactor;
constexpr double kNearTie = 2e-2;
constexpr int kMaxLen = 160;
constexpr int kGreedyTokens = 64;

// (variant, page size, compute type of the CUDA backend).
class CudaRunnerTest : public ::testing::TestWithParam<std::tuple<std::string, int, DType>> {
 public:
  // The linear layers take the heuristic's first pick, untimed, unless the caller set
  // GANNET_LINEAR_TUNE: timed picks change from run to run with the GPU's clocks, and E2B's 7-row
  // chunked prefill lands 0.0895 or 0.1550 from the f32 CPU depending on which GEMM wins (same
  // binary, H100, 2026-12-07), across the 0.15 cap. Every candidate is checked against the CPU op
  // by op (cuda_ops_test EveryCublasCandidateMatchesCpu); this test checks the model end to end,
  // which must not depend on a timing race.
  static void SetUpTestSuite() { setenv("GANNET_LINEAR_TUNE", "0", /*overwrite=*/0); }

  void SetUp() override {
    if (!testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    auto [variant, page, compute] = GetParam();
    auto m = testing::LoadTinyModel(variant);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    auto g = backend::CudaBackend::Create(0, compute);
    ASSERT_TRUE(g.ok()) << g.status();
    gpu_be_ = std::move(*g);
    ASSERT_EQ(gpu_be_->activation_dtype(), compute);
    page_ = page;
    const auto opts = testing::SimpleRunnerOptions(model_->config, page, kMaxLen, 2, kMaxLen);
    auto c = testing::CreateTinyRunner(model_->config, model_->weights, &cpu_be_, opts, kMaxLen, 2);
    ASSERT_TRUE(c.ok()) << c.status();
    cpu_ = std::move(*c);
    bf16_be_ = std::make_unique<testing::Bf16ActivationCpuBackend>(model_->config.text.hidden_size,
                                                                   model_->config.text.vocab_size);
    auto b = testing::CreateTinyRunner(model_->config, model_->weights, bf16_be_.get(), opts,
                                       kMaxLen, 2);
    ASSERT_TRUE(b.ok()) << b.status();
    bf16_ = std::move(*b);
    auto r =
        testing::CreateTinyRunner(model_->config, model_->weights, gpu_be_.get(), opts, kMaxLen, 2);
    ASSERT_TRUE(r.ok()) << r.status();
    gpu_ = std::move(*r);
    pages_per_seq_ = (kMaxLen + page - 1) / page;
    for (int s = 0; s < 2; ++s) tables_[s] = testing::IdentityPageTable(s, pages_per_seq_);
  }

  SeqStep Seq(const std::vector<int32_t>& tokens, int begin, int end, SeqStep::Logits want,
              int s = 0) {
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
  // The allowed GPU error given the bf16 CPU reference's own distance from the f32 CPU.
  static double Bound(double bf16_gap) { return testing::Bf16GapBound(bf16_gap); }
  static int Argmax(std::span<const float> row) {
    return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
  }
  std::string Name() const {
    return std::get<0>(GetParam()) + "/page" + std::to_string(page_) +
           (std::get<2>(GetParam()) == DType::kF16 ? "/f16" : "");
  }

  backend::CpuBackend cpu_be_;
  std::unique_ptr<testing::Bf16ActivationCpuBackend> bf16_be_;
  std::unique_ptr<backend::CudaBackend> gpu_be_;
  std::unique_ptr<testing::LoadedModel> model_;
  std::unique_ptr<runner::ModelRunner> cpu_, bf16_, gpu_;
  std::vector<int32_t> tables_[2];
  int page_ = 0, pages_per_seq_ = 0;
};

TEST_P(CudaRunnerTest, PrefillLogitsMatchCpu) {
  // K=V models: the GPU with K and V stored apart too, for the notes.
  std::unique_ptr<runner::ModelRunner> separate;
  if (model_->config.text.attention_k_eq_v) {
    const auto opts = testing::SimpleRunnerOptions(model_->config, page_, kMaxLen, 2, kMaxLen);
    auto r =
        testing::CreateTinyRunner(model_->config, model_->weights, gpu_be_.get(), opts, kMaxLen, 2,
                                  kv::KvQuant::kNone, /*k_eq_v_single_store=*/false);
    ASSERT_TRUE(r.ok()) << r.status();
    separate = std::move(*r);
  }
  for (const char* prompt : {"short", "long"}) {
    auto golden = testing::LoadGolden(std::get<0>(GetParam()), prompt);
    ASSERT_TRUE(golden.ok()) << golden.status();
    const int n = static_cast<int>(golden->input_ids.size());
    StepResult c = Step(*cpu_, golden->input_ids, 0, n, SeqStep::Logits::kAll);
    StepResult b = Step(*bf16_, golden->input_ids, 0, n, SeqStep::Logits::kAll);
    StepResult g = Step(*gpu_, golden->input_ids, 0, n, SeqStep::Logits::kAll);
    ASSERT_EQ(g.rows(), n);
    const double err =
        testing::MaxRelativeLogitError(g.logits.data(), c.logits.data(), n, c.vocab_size);
    const double err_bf16 =
        testing::MaxRelativeLogitError(g.logits.data(), b.logits.data(), n, c.vocab_size);
    const double ref_gap =
        testing::MaxRelativeLogitError(b.logits.data(), c.logits.data(), n, c.vocab_size);
    std::printf(
        "[ note ] %s/%s: max rel logit error vs f32 CPU %.4f, vs bf16 CPU %.4f (bf16 CPU vs f32 "
        "CPU %.4f)\n",
        Name().c_str(), prompt, err, err_bf16, ref_gap);
    if (separate != nullptr) {
      StepResult s = Step(*separate, golden->input_ids, 0, n, SeqStep::Logits::kAll);
      std::printf(
          "[ note ] %s/%s: K and V stored apart: max rel logit error vs f32 CPU %.4f\n",
          Name().c_str(), prompt,
          testing::MaxRelativeLogitError(s.logits.data(), c.logits.data(), n, c.vocab_size));
    }
    EXPECT_LE(err, Bound(ref_gap)) << Name() << "/" << prompt;
    RecordProperty(std::string(prompt) + "_max_rel_err_f32", std::to_string(err));
    RecordProperty(std::string(prompt) + "_bf16_cpu_gap", std::to_string(ref_gap));
  }
}

// The FP8 KV cache end to end: a GPU runner over an FP8 cache against the bf16-rounding CPU runner
// over the same FP8 storage. Both quantise the same rows with the same formula, but a row whose
// inputs differ in the last bit (accumulation order) can land one FP8 step (6-12%) apart on an
// element, which these tiny models amplify: with FP8 KV the bf16-rounding CPU is 0.06-0.9 from the
// f32 CPU (H200: 31B 0.06/0.13, 26B-A4B 0.40/0.88, E4B 0.30/0.40, E2B 0.15/0.69 for the short/long
// prompt). So the GPU must stay within kGapFactor x that gap (no kF32Cap: FP8 itself passes it);
// the FP8 kernels themselves are held to rel-L2 1e-2 by cuda_attention_test and cuda_ops_test.
TEST_P(CudaRunnerTest, Fp8KvPrefillLogitsMatchCpuFp8) {
  const auto opts = testing::SimpleRunnerOptions(model_->config, page_, kMaxLen, 2, kMaxLen);
  auto make = [&](backend::Backend* be) {
    auto r = testing::CreateTinyRunner(model_->config, model_->weights, be, opts, kMaxLen, 2,
                                       kv::KvQuant::kFp8E4M3);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(*r) : nullptr;
  };
  auto cpu8 = make(&cpu_be_), bf168 = make(bf16_be_.get()), gpu8 = make(gpu_be_.get());
  ASSERT_TRUE(cpu8 && bf168 && gpu8);
  for (const char* prompt : {"short", "long"}) {
    auto golden = testing::LoadGolden(std::get<0>(GetParam()), prompt);
    ASSERT_TRUE(golden.ok()) << golden.status();
    const int n = static_cast<int>(golden->input_ids.size());
    StepResult c = Step(*cpu8, golden->input_ids, 0, n, SeqStep::Logits::kAll);
    StepResult b = Step(*bf168, golden->input_ids, 0, n, SeqStep::Logits::kAll);
    StepResult g = Step(*gpu8, golden->input_ids, 0, n, SeqStep::Logits::kAll);
    StepResult c16 = Step(*cpu_, golden->input_ids, 0, n, SeqStep::Logits::kAll);
    ASSERT_EQ(g.rows(), n);
    const double err =
        testing::MaxRelativeLogitError(g.logits.data(), b.logits.data(), n, c.vocab_size);
    const double ref_gap =
        testing::MaxRelativeLogitError(b.logits.data(), c.logits.data(), n, c.vocab_size);
    const double fp8_cost =
        testing::MaxRelativeLogitError(c.logits.data(), c16.logits.data(), n, c.vocab_size);
    std::printf(
        "[ note ] %s/%s FP8 KV: GPU vs bf16 CPU %.4f (bf16 CPU vs f32 CPU, both FP8 KV: %.4f); "
        "FP8 vs f32 KV on the CPU %.4f\n",
        Name().c_str(), prompt, err, ref_gap, fp8_cost);
    EXPECT_LE(err, std::max(kAbsFloor, kGapFactor * ref_gap)) << Name() << "/" << prompt;
  }
}

// Greedy continuation of `ref` and the GPU from the same prompt; returns the first step where they
// part (kGreedyTokens if never), checking that a parting is a near-tie in ref's own logits.
int CompareGreedy(CudaRunnerTest* t, runner::ModelRunner& ref, runner::ModelRunner& gpu,
                  const std::vector<int32_t>& prompt, bool expect_near_tie,
                  const std::string& what);

TEST_P(CudaRunnerTest, Greedy64TokensMatchCpu) {
  auto golden = testing::LoadGolden(std::get<0>(GetParam()), "long");
  ASSERT_TRUE(golden.ok()) << golden.status();
  const int vs_bf16 = CompareGreedy(this, *bf16_, *gpu_, golden->input_ids, false, "bf16 CPU");
  // A divergence from the f32 CPU must be a near-tie, unless the GPU gives every token of the
  // bf16 CPU (which rounds as the GPU does): then the divergence is bf16 rounding's own (the
  // 26B-A4B router near-ties of Bound).
  const int vs_f32 =
      CompareGreedy(this, *cpu_, *gpu_, golden->input_ids, vs_bf16 < kGreedyTokens, "f32 CPU");
  std::printf(
      "[ note ] %s: greedy tokens identical to the f32 CPU for %d of %d, to the bf16 CPU for %d\n",
      Name().c_str(), vs_f32, kGreedyTokens, vs_bf16);
  RecordProperty("identical_tokens_bf16_cpu", vs_bf16);
  RecordProperty("identical_tokens_f32_cpu", vs_f32);
}

int CompareGreedy(CudaRunnerTest* t, runner::ModelRunner& ref, runner::ModelRunner& gpu,
                  const std::vector<int32_t>& prompt, bool expect_near_tie,
                  const std::string& what) {
  std::vector<int32_t> rt = prompt, gt = prompt;
  const int n = static_cast<int>(rt.size());
  StepResult r = t->Step(ref, rt, 0, n, SeqStep::Logits::kLast);
  StepResult g = t->Step(gpu, gt, 0, n, SeqStep::Logits::kLast);
  for (int i = 0; i < kGreedyTokens; ++i) {
    if (r.rows() == 0 || g.rows() == 0) {  // a failed step (reported by Step): no logits to read
      ADD_FAILURE() << t->Name() << " vs " << what << ": no logits at token " << i;
      return i;
    }
    const auto row = r.Row(0);
    const int rn = CudaRunnerTest::Argmax(row), gn = CudaRunnerTest::Argmax(g.Row(0));
    if (rn != gn) {
      double max_abs = 0;
      for (float v : row) max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
      const double gap = row[rn] - row[gn];
      std::printf(
          "[ note ] %s: vs %s, near-tie at token %d (ref %d, gpu %d, gap %.3g of max %.3g)\n",
          t->Name().c_str(), what.c_str(), i, rn, gn, gap, max_abs);
      if (expect_near_tie) {
        EXPECT_LE(gap, kNearTie * max_abs) << t->Name() << " token " << i;
      }
      return i;
    }
    rt.push_back(rn);
    gt.push_back(gn);
    const int len = static_cast<int>(rt.size());
    r = t->Step(ref, rt, len - 1, len, SeqStep::Logits::kLast);
    g = t->Step(gpu, gt, len - 1, len, SeqStep::Logits::kLast);
  }
  return kGreedyTokens;
}

TEST_P(CudaRunnerTest, ChunkedPrefillAndMixedBatchMatchCpu) {
  auto golden = testing::LoadGolden(std::get<0>(GetParam()), "long");
  ASSERT_TRUE(golden.ok()) << golden.status();
  const std::vector<int32_t>& ids = golden->input_ids;
  const int n = static_cast<int>(ids.size());
  const int vocab = static_cast<int>(model_->config.text.vocab_size);
  std::vector<float> logits[3];  // f32 CPU, bf16 CPU, GPU
  runner::ModelRunner* runners[3] = {cpu_.get(), bf16_.get(), gpu_.get()};
  for (int b = 0; b < n; b += 7) {
    const int e = std::min(n, b + 7);
    for (int k = 0; k < 3; ++k) {
      StepResult r = Step(*runners[k], ids, b, e, SeqStep::Logits::kAll);
      logits[k].insert(logits[k].end(), r.logits.begin(), r.logits.end());
    }
  }
  const double chunk_err =
      testing::MaxRelativeLogitError(logits[2].data(), logits[0].data(), n, vocab);
  const double chunk_gap =
      testing::MaxRelativeLogitError(logits[1].data(), logits[0].data(), n, vocab);
  std::printf("[ note ] %s: chunked prefill max rel logit error %.4f (bf16 CPU %.4f)\n",
              Name().c_str(), chunk_err, chunk_gap);
  // 26B-A4B: 1-32-token steps run the per-pair MoE GEMVs, which land on the other side of the
  // long prompt's router near-ties (rows 13-16) from the f32 CPU, whatever the chunk size (Bound).
  EXPECT_LE(chunk_err, Bound(chunk_gap));

  // Sequence 1 prefills its prompt while sequence 0 decodes its next token (decode and prefill
  // rows in one step).
  auto short_golden = testing::LoadGolden(std::get<0>(GetParam()), "short");
  ASSERT_TRUE(short_golden.ok());
  std::vector<int32_t> seq0 = ids;
  seq0.push_back(7);
  const std::vector<int32_t>& seq1 = short_golden->input_ids;
  StepBatch batch;
  batch.seqs.push_back(Seq(seq0, n, n + 1, SeqStep::Logits::kLast, 0));
  batch.seqs.push_back(Seq(seq1, 0, static_cast<int>(seq1.size()), SeqStep::Logits::kAll, 1));
  StepResult c = Run(*cpu_, batch), b = Run(*bf16_, batch), g = Run(*gpu_, batch);
  ASSERT_EQ(c.rows(), g.rows());
  const double mixed_err =
      testing::MaxRelativeLogitError(g.logits.data(), c.logits.data(), c.rows(), vocab);
  const double mixed_gap =
      testing::MaxRelativeLogitError(b.logits.data(), c.logits.data(), c.rows(), vocab);
  std::printf("[ note ] %s: mixed batch max rel logit error %.4f (bf16 CPU %.4f)\n", Name().c_str(),
              mixed_err, mixed_gap);
  EXPECT_LE(mixed_err, Bound(mixed_gap));
}

TEST_P(CudaRunnerTest, SyntheticWeightsReproduceTheCheckpoint) {
  const model::ModelWeights synth = model::SyntheticWeights(model_->config, 0x9a77e7);
  auto r = testing::CreateTinyRunner(
      model_->config, synth, gpu_be_.get(),
      testing::SimpleRunnerOptions(model_->config, page_, kMaxLen, 2, kMaxLen), kMaxLen, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  auto golden = testing::LoadGolden(std::get<0>(GetParam()), "short");
  ASSERT_TRUE(golden.ok());
  const int n = static_cast<int>(golden->input_ids.size());
  StepResult a = Step(*gpu_, golden->input_ids, 0, n, SeqStep::Logits::kAll);
  StepResult b = Step(**r, golden->input_ids, 0, n, SeqStep::Logits::kAll);
  EXPECT_EQ(a.logits, b.logits) << "GPU-generated weights differ from the checkpoint's";
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<std::string, int, DType>>& info) {
  std::string v = std::get<0>(info.param);
  std::replace(v.begin(), v.end(), '-', '_');
  return v + "_page" + std::to_string(std::get<1>(info.param)) +
         (std::get<2>(info.param) == DType::kF16 ? "_f16" : "");
}

INSTANTIATE_TEST_SUITE_P(TinyModels, CudaRunnerTest,
                         ::testing::Combine(::testing::ValuesIn(testing::TargetVariants()),
                                            ::testing::Values(16, 32),
                                            ::testing::Values(DType::kBF16)),
                         ParamName);
INSTANTIATE_TEST_SUITE_P(TinyModelsF16Compute, CudaRunnerTest,
                         ::testing::Combine(::testing::ValuesIn(testing::TargetVariants()),
                                            ::testing::Values(16), ::testing::Values(DType::kF16)),
                         ParamName);

}  // namespace
}  // namespace gannet
