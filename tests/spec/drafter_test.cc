// The MTP drafter (lib/spec/drafter.h) on the CPU reference backend against HF's
// Gemma4AssistantForCausalLM (tools/golden/make_golden.py), for the four tiny target/drafter
// pairs and several page sizes:
//  - the bonus token, three greedy draft tokens, every step's logits over the tokens the
//    drafter scores (E2B/E4B: the top clusters' tokens; others -inf) within 1e-3 x max|logit|,
//    and step 1's h_next within 1e-3 x max|h|;
//  - tentative keys past the committed length (a verify step's rejected drafts) change nothing;
//  - a batched round equals single-sequence rounds;
//  - the target's KV arrays are bit-identical before and after drafting;
//  - pairing checks name the mismatch; the KV sources of the real geometries are the target's
//    last sliding and full layers that own KV (docs/gemma4-model.md §3.3);
//  - a quantized assistant (`gannet quantize`: int4, NVFP4) drafts what the same weights,
//    dequantized to f32, draft.
#include "lib/spec/drafter.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/model/quantize_checkpoint.h"
#include "lib/model/variants.h"
#include "tests/testing/dequantized_reference.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

using runner::SeqStep;
using runner::StepBatch;
using runner::StepResult;

constexpr double kHfTolerance = 1e-3;
constexpr int kMaxLen = 64;
constexpr int kSteps = 3;

TEST(DrafterKvSource, RealGeometries) {
  struct Case {
    const char* variant;
    int sliding, full;
  };
  for (const Case& c :
       {Case{"e2b", 13, 14}, Case{"e4b", 22, 23}, Case{"31b", 58, 59}, Case{"26b-a4b", 28, 29}}) {
    auto t = model::DummyModelConfig(std::string("dummy:") + c.variant);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(spec::DrafterKvSource(t->text, model::LayerType::kSliding), c.sliding) << c.variant;
    EXPECT_EQ(spec::DrafterKvSource(t->text, model::LayerType::kFull), c.full) << c.variant;
    auto d = model::DummyModelConfig(std::string("dummy:") + c.variant + "-assistant");
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(spec::CheckDrafterPair(*d, *t).ok()) << spec::CheckDrafterPair(*d, *t);
  }
}

TEST(CheckDrafterPair, NamesTheMismatch) {
  auto t31 = model::DummyModelConfig("dummy:31b");
  auto e2b = model::DummyModelConfig("dummy:e2b");
  auto d_e2b = model::DummyModelConfig("dummy:e2b-assistant");
  auto d_31 = model::DummyModelConfig("dummy:31b-assistant");
  ASSERT_TRUE(t31.ok() && e2b.ok() && d_e2b.ok() && d_31.ok());
  absl::Status st = spec::CheckDrafterPair(*d_e2b, *t31);
  EXPECT_TRUE(absl::IsInvalidArgument(st));
  EXPECT_NE(st.message().find("backbone_hidden_size"), std::string::npos) << st;
  st = spec::CheckDrafterPair(*d_31, *e2b);
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  st = spec::CheckDrafterPair(*t31, *t31);
  EXPECT_NE(st.message().find("not gemma4_assistant"), std::string::npos) << st;
  st = spec::CheckDrafterPair(*d_31, *d_31);
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  model::ModelConfig odd = *d_31;
  odd.text.sliding_window = 512;
  st = spec::CheckDrafterPair(odd, *t31);
  EXPECT_NE(st.message().find("sliding_window"), std::string::npos) << st;
}

// max over tokens the reference scores of |a - b|, relative to max |b| there. The reference
// (HF) fills tokens outside the top clusters with min(selected) - 1; ours must be -inf there.
double DraftLogitError(const float* ours, const float* hf, int64_t vocab, bool ordered,
                       std::string* problem) {
  float fill = *std::min_element(hf, hf + vocab);
  double max_ref = 0, max_diff = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    const bool scored = !ordered || hf[v] > fill + 0.5f;
    if (!scored) {
      if (!(std::isinf(ours[v]) && ours[v] < 0))
        *problem = "token " + std::to_string(v) + " not masked";
      continue;
    }
    if (!std::isfinite(ours[v])) *problem = "token " + std::to_string(v) + " masked";
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(hf[v])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(ours[v]) - hf[v]));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

class DrafterTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    auto [variant, page_size] = GetParam();
    variant_ = variant;
    auto t = testing::LoadTinyModel(variant);
    ASSERT_TRUE(t.ok()) << t.status();
    target_ = std::move(*t);
    auto d = testing::LoadTinyModel(variant + "-assistant");
    ASSERT_TRUE(d.ok()) << d.status();
    drafter_model_ = std::move(*d);
    pages_per_seq_ = (kMaxLen + page_size - 1) / page_size;
    auto r = testing::CreateTinyRunner(
        target_->config, target_->weights, &backend_,
        testing::SimpleRunnerOptions(target_->config, page_size, kMaxLen, /*max_seqs=*/2,
                                     /*max_tokens=*/2 * kMaxLen),
        kMaxLen, /*max_seqs=*/2);
    ASSERT_TRUE(r.ok()) << r.status();
    runner_ = std::move(*r);
    for (int s = 0; s < 2; ++s) tables_[s] = testing::IdentityPageTable(s, pages_per_seq_);
    spec::DrafterOptions o;
    o.max_seqs = 2;
    o.max_steps = kSteps;
    auto dr = spec::Drafter::Create(drafter_model_->config, drafter_model_->weights,
                                    target_->config, runner_.get(), &backend_, o);
    ASSERT_TRUE(dr.ok()) << dr.status();
    drafter_ = std::move(*dr);
  }

  SeqStep StepOf(int seq, const std::vector<int32_t>& tokens, SeqStep::Logits want) {
    SeqStep s;
    s.tokens = tokens;
    s.start_pos = 0;
    s.page_table[0] = tables_[seq];
    s.page_table[1] = tables_[seq];
    s.logits = want;
    return s;
  }

  spec::DraftSeq DraftOf(int seq, int32_t token, int hidden_row, int64_t committed) {
    spec::DraftSeq d;
    d.token = token;
    d.hidden_row = hidden_row;
    d.committed = committed;
    d.page_table[0] = tables_[seq];
    d.page_table[1] = tables_[seq];
    d.draws.assign(kSteps, sampling::DrawParams::Greedy());
    d.want_logits = true;
    return d;
  }

  static int32_t Argmax(std::span<const float> row) {
    return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
  }

  // Checks one sequence's draft round against the golden steps.
  void ExpectMatchesGolden(const testing::GoldenDraft& g, const std::vector<int32_t>& tokens,
                           const std::vector<float>& logits, const std::string& what) {
    const int64_t vocab = target_->config.text.vocab_size;
    EXPECT_EQ(tokens, g.tokens) << what;
    ASSERT_EQ(logits.size(), static_cast<size_t>(kSteps * vocab)) << what;
    for (int k = 0; k < kSteps; ++k) {
      std::string problem;
      const double err =
          DraftLogitError(logits.data() + k * vocab, g.logits.data() + k * vocab, vocab,
                          drafter_model_->config.use_ordered_embeddings, &problem);
      EXPECT_LE(err, kHfTolerance) << what << " step " << k;
      EXPECT_EQ(problem, "") << what << " step " << k;
    }
  }

  std::vector<float> KvSnapshot() {
    std::vector<float> out;
    const runner::KvStorage& kv = *runner_->kv();
    for (int l = 0; l < target_->config.text.num_hidden_layers; ++l) {
      if (target_->config.text.IsKvShared(l)) continue;
      for (const backend::Tensor& t : {kv.Layer(l).k, kv.Layer(l).v}) {
        if (!t.valid()) continue;
        const float* p = t.as<float>();
        out.insert(out.end(), p, p + t.numel());
      }
    }
    return out;
  }

  std::string variant_;
  backend::CpuBackend backend_;
  std::unique_ptr<testing::LoadedModel> target_, drafter_model_;
  std::unique_ptr<runner::ModelRunner> runner_;
  std::unique_ptr<spec::Drafter> drafter_;
  std::vector<int32_t> tables_[2];
  int pages_per_seq_ = 0;
};

TEST_P(DrafterTest, MatchesHf) {
  for (const char* prompt : {"short", "long"}) {
    auto golden = testing::LoadGolden(variant_, prompt);
    ASSERT_TRUE(golden.ok()) << golden.status();
    auto g = testing::LoadGoldenDraft(variant_, prompt);
    ASSERT_TRUE(g.ok()) << g.status();
    const std::vector<int32_t>& ids = golden->input_ids;
    StepBatch batch;
    batch.seqs.push_back(StepOf(0, ids, SeqStep::Logits::kLast));
    StepResult r;
    ASSERT_TRUE(runner_->Forward(batch, &r).ok());
    const int32_t bonus = Argmax(r.Row(0));
    ASSERT_EQ(bonus, g->bonus) << prompt;
    const spec::DraftSeq seq[] = {DraftOf(0, bonus, 0, static_cast<int64_t>(ids.size()))};

    std::vector<float> logits, hidden;
    ASSERT_TRUE(drafter_->FirstStep(seq, &logits, &hidden).ok());
    const int64_t hb = drafter_model_->config.backbone_hidden_size;
    ASSERT_EQ(hidden.size(), static_cast<size_t>(hb));
    double max_ref = 0, max_diff = 0;
    for (int64_t i = 0; i < hb; ++i) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(g->hidden[i])));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(hidden[i]) - g->hidden[i]));
    }
    EXPECT_LE(max_diff / max_ref, kHfTolerance) << prompt << ": h_next of step 1";

    spec::DraftResult res;
    ASSERT_TRUE(drafter_->Draft(seq, kSteps, &res).ok());
    ExpectMatchesGolden(*g, res.tokens[0], res.logits[0], prompt);
  }
}

// A verify step writes KV for every draft; after a partial accept the rejected ones stay in the
// pages past the committed length. The drafter must read only the committed keys.
TEST_P(DrafterTest, IgnoresTentativeKeys) {
  auto golden = testing::LoadGolden(variant_, "long");
  ASSERT_TRUE(golden.ok()) << golden.status();
  auto g = testing::LoadGoldenDraft(variant_, "long");
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<int32_t> ids = golden->input_ids;
  const int n = static_cast<int>(ids.size());
  for (int32_t t : {7, 300, 11, 42}) ids.push_back(t);
  StepBatch batch;
  batch.seqs.push_back(StepOf(0, ids, SeqStep::Logits::kAll));
  StepResult r;
  ASSERT_TRUE(runner_->Forward(batch, &r).ok());
  ASSERT_EQ(Argmax(r.Row(n - 1)), g->bonus);
  const spec::DraftSeq seq[] = {DraftOf(0, g->bonus, n - 1, n)};
  spec::DraftResult res;
  ASSERT_TRUE(drafter_->Draft(seq, kSteps, &res).ok());
  ExpectMatchesGolden(*g, res.tokens[0], res.logits[0], "long + 4 tentative keys");
}

TEST_P(DrafterTest, BatchedRoundMatchesHfAndLeavesTargetKvAlone) {
  auto gs = testing::LoadGolden(variant_, "short");
  auto gl = testing::LoadGolden(variant_, "long");
  auto ds = testing::LoadGoldenDraft(variant_, "short");
  auto dl = testing::LoadGoldenDraft(variant_, "long");
  ASSERT_TRUE(gs.ok() && gl.ok() && ds.ok() && dl.ok());
  StepBatch batch;
  batch.seqs.push_back(StepOf(0, gl->input_ids, SeqStep::Logits::kLast));
  batch.seqs.push_back(StepOf(1, gs->input_ids, SeqStep::Logits::kLast));
  StepResult r;
  ASSERT_TRUE(runner_->Forward(batch, &r).ok());
  ASSERT_EQ(Argmax(r.Row(0)), dl->bonus);
  ASSERT_EQ(Argmax(r.Row(1)), ds->bonus);
  const spec::DraftSeq seqs[] = {
      DraftOf(0, dl->bonus, 0, static_cast<int64_t>(gl->input_ids.size())),
      DraftOf(1, ds->bonus, 1, static_cast<int64_t>(gs->input_ids.size()))};
  const std::vector<float> before = KvSnapshot();
  spec::DraftResult res;
  ASSERT_TRUE(drafter_->Draft(seqs, kSteps, &res).ok());
  const std::vector<float> after = KvSnapshot();
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)), 0)
      << "drafting changed the target's KV";
  ExpectMatchesGolden(*dl, res.tokens[0], res.logits[0], "batched long");
  ExpectMatchesGolden(*ds, res.tokens[1], res.logits[1], "batched short");
}

TEST_P(DrafterTest, RejectsBadRounds) {
  const spec::DraftSeq none[] = {DraftOf(0, 5, 0, 0)};
  spec::DraftResult res;
  EXPECT_TRUE(absl::IsInvalidArgument(drafter_->Draft(none, 1, &res)));
  spec::DraftSeq ok = DraftOf(0, 5, 0, 3);
  const spec::DraftSeq one[] = {ok};
  EXPECT_TRUE(absl::IsInvalidArgument(drafter_->Draft(one, kSteps + 1, &res)));
  ok.draws.resize(1);
  const spec::DraftSeq short_draws[] = {ok};
  EXPECT_TRUE(absl::IsInvalidArgument(drafter_->Draft(short_draws, 2, &res)));
}

INSTANTIATE_TEST_SUITE_P(Pairs, DrafterTest,
                         ::testing::Combine(::testing::ValuesIn(testing::TargetVariants()),
                                            ::testing::Values(1, 16)),
                         [](const auto& info) {
                           std::string v = std::get<0>(info.param);
                           std::replace(v.begin(), v.end(), '-', '_');
                           return v + "_page" + std::to_string(std::get<1>(info.param));
                         });

// A quantized assistant: its drafts and draft logits equal those of the same weights dequantized
// once to f32 (weight-only formats: the activations are the same f32 on both sides).
class QuantizedAssistantTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(QuantizedAssistantTest, DraftsEqualTheDequantizedAssistant) {
  const auto& [variant, spec] = GetParam();
  char tmpl[] = "/tmp/gannet_qassist_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string tmp = tmpl;
  const std::string src = testing::TinyModelDir(variant + "-assistant");
  auto options = model::ParseWeightDtype(spec);
  ASSERT_TRUE(options.ok()) << options.status();
  auto report = model::QuantizeCheckpoint(src, tmp + "/q", *options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->quantized_modules, 0);
  auto quantized = testing::LoadModelFolder(tmp + "/q");
  ASSERT_TRUE(quantized.ok()) << quantized.status();
  ASSERT_TRUE(testing::WriteDequantizedReference(src, **quantized, tmp + "/ref").ok());
  auto reference = testing::LoadModelFolder(tmp + "/ref");
  ASSERT_TRUE(reference.ok()) << reference.status();

  auto target = testing::LoadTinyModel(variant);
  ASSERT_TRUE(target.ok()) << target.status();
  backend::CpuBackend backend;
  auto runner = testing::CreateTinyRunner(
      (*target)->config, (*target)->weights, &backend,
      testing::SimpleRunnerOptions((*target)->config, 16, kMaxLen, 1, kMaxLen), kMaxLen, 1);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const std::vector<int32_t> table = testing::IdentityPageTable(0, (kMaxLen + 15) / 16);
  auto golden = testing::LoadGolden(variant, "short");
  ASSERT_TRUE(golden.ok()) << golden.status();
  StepBatch batch;
  SeqStep step;
  step.tokens = golden->input_ids;
  step.page_table[0] = table;
  step.page_table[1] = table;
  step.logits = SeqStep::Logits::kLast;
  batch.seqs.push_back(step);
  StepResult r;
  ASSERT_TRUE((*runner)->Forward(batch, &r).ok());
  spec::DraftSeq seq;
  seq.token =
      static_cast<int32_t>(std::max_element(r.Row(0).begin(), r.Row(0).end()) - r.Row(0).begin());
  seq.committed = static_cast<int64_t>(golden->input_ids.size());
  seq.page_table[0] = table;
  seq.page_table[1] = table;
  seq.draws.assign(kSteps, sampling::DrawParams::Greedy());
  seq.want_logits = true;

  spec::DrafterOptions o;
  o.max_seqs = 1;
  o.max_steps = kSteps;
  auto plain = testing::LoadTinyModel(variant + "-assistant");
  ASSERT_TRUE(plain.ok()) << plain.status();
  spec::DraftResult drafts[3];
  const testing::LoadedModel* models[3] = {quantized->get(), reference->get(), plain->get()};
  for (int i = 0; i < 3; ++i) {
    auto drafter = spec::Drafter::Create(models[i]->config, models[i]->weights, (*target)->config,
                                         runner->get(), &backend, o);
    ASSERT_TRUE(drafter.ok()) << drafter.status();
    ASSERT_TRUE((*drafter)->Draft({&seq, 1}, kSteps, &drafts[i]).ok());
  }
  EXPECT_EQ(drafts[0].tokens[0], drafts[1].tokens[0]);
  const int64_t vocab = (*target)->config.text.vocab_size;
  ASSERT_EQ(drafts[0].logits[0].size(), drafts[1].logits[0].size());
  for (int k = 0; k < kSteps; ++k) {
    const float* a = drafts[0].logits[0].data() + k * vocab;
    const float* b = drafts[1].logits[0].data() + k * vocab;
    double max_ref = 0, max_diff = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      ASSERT_EQ(std::isfinite(a[v]), std::isfinite(b[v])) << "step " << k << " token " << v;
      if (!std::isfinite(b[v])) continue;
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(b[v])));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[v]) - b[v]));
    }
    // The same f32 weights and summation order; the bound allows a contracted multiply-add.
    EXPECT_LE(max_diff, 1e-6 * max_ref) << variant << " " << spec << " step " << k;
  }
  // And the quantization did something: the unquantized assistant's first step differs.
  double moved = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    const float a = drafts[0].logits[0][v], c = drafts[2].logits[0][v];
    if (std::isfinite(a) && std::isfinite(c)) moved = std::max(moved, std::fabs(double{a} - c));
  }
  EXPECT_GT(moved, 1e-4) << variant << " " << spec;
  std::filesystem::remove_all(tmp);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedAssistantTest,
                         ::testing::Combine(::testing::ValuesIn(testing::TargetVariants()),
                                            ::testing::Values("int4-g32", "nvfp4")),
                         [](const auto& info) {
                           std::string v = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (char& ch : v)
                             ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return v;
                         });

}  // namespace
}  // namespace gannet
