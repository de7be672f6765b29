// The MTP drafter on the CUDA backend against the CPU backend (fp32), for the four tiny pairs:
// the target prefills a golden prompt on each backend, then one drafter round of three steps
// runs on each. Checks: every step's logits within kTol x max|logit| of the CPU's over the tokens
// the CPU scores (others -inf on both: the centroid head picks the same clusters), the first
// draft token identical (unless the CPU's own top two are within kNearTie), and the target's KV
// arrays on the GPU bit-identical before and after the round (the drafter never writes them).
// Tolerance: bf16 activations through target and drafter; the runner's GPU-vs-CPU bound
// (tests/backend/cuda_runner_test.cc, kF32Cap) is 0.15 for the target alone.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/spec/drafter.h"
#include "tests/backend/cuda_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

constexpr double kTol = 0.2;
constexpr double kNearTie = 2e-2;
constexpr int kMaxLen = 64;
constexpr int kSteps = 3;

struct Side {
  backend::Backend* be = nullptr;
  std::unique_ptr<runner::ModelRunner> runner;
  std::unique_ptr<spec::Drafter> drafter;
};

class CudaDrafterTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    auto g = backend::CudaBackend::Create(0);
    ASSERT_TRUE(g.ok()) << g.status();
    gpu_be_ = std::move(*g);
    auto t = testing::LoadTinyModel(GetParam());
    ASSERT_TRUE(t.ok()) << t.status();
    target_ = std::move(*t);
    auto d = testing::LoadTinyModel(GetParam() + "-assistant");
    ASSERT_TRUE(d.ok()) << d.status();
    drafter_ = std::move(*d);
    table_ = testing::IdentityPageTable(0, kMaxLen / 16);
    for (Side* s : {&cpu_, &gpu_}) {
      s->be = s == &cpu_ ? static_cast<backend::Backend*>(&cpu_be_) : gpu_be_.get();
      auto r = testing::CreateTinyRunner(
          target_->config, target_->weights, s->be,
          testing::SimpleRunnerOptions(target_->config, 16, kMaxLen, 1, kMaxLen), kMaxLen, 1);
      ASSERT_TRUE(r.ok()) << r.status();
      s->runner = std::move(*r);
      spec::DrafterOptions o;
      o.max_seqs = 1;
      o.max_steps = kSteps;
      auto dr = spec::Drafter::Create(drafter_->config, drafter_->weights, target_->config,
                                      s->runner.get(), s->be, o);
      ASSERT_TRUE(dr.ok()) << dr.status();
      s->drafter = std::move(*dr);
    }
  }

  // Prefills `ids` and drafts kSteps greedily from the target's arg-max.
  spec::DraftResult Round(Side& s, const std::vector<int32_t>& ids, int32_t* bonus) {
    runner::StepBatch batch;
    runner::SeqStep step;
    step.tokens = ids;
    step.page_table[0] = table_;
    step.page_table[1] = table_;
    step.logits = runner::SeqStep::Logits::kLast;
    batch.seqs.push_back(step);
    runner::StepResult r;
    EXPECT_TRUE(s.runner->Forward(batch, &r).ok());
    std::span<const float> row = r.Row(0);
    *bonus = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    spec::DraftSeq d;
    d.token = *bonus;
    d.committed = static_cast<int64_t>(ids.size());
    d.page_table[0] = table_;
    d.page_table[1] = table_;
    d.draws.assign(kSteps, sampling::DrawParams::Greedy());
    d.want_logits = true;  // host draws: the logits on both sides are what we compare
    const spec::DraftSeq seqs[] = {d};
    spec::DraftResult res;
    EXPECT_TRUE(s.drafter->Draft(seqs, kSteps, &res).ok());
    return res;
  }

  std::vector<uint16_t> GpuKv() {
    std::vector<uint16_t> out;
    const runner::KvStorage& kv = *gpu_.runner->kv();
    for (int l = 0; l < target_->config.text.num_hidden_layers; ++l) {
      if (target_->config.text.IsKvShared(l)) continue;
      for (const backend::Tensor& t : {kv.Layer(l).k, kv.Layer(l).v}) {
        if (!t.valid()) continue;
        std::vector<uint16_t> h(t.numel());
        EXPECT_TRUE(gpu_be_->CopyToHost(h.data(), t.data, h.size() * 2).ok());
        out.insert(out.end(), h.begin(), h.end());
      }
    }
    return out;
  }

  backend::CpuBackend cpu_be_;
  std::unique_ptr<backend::CudaBackend> gpu_be_;
  std::unique_ptr<testing::LoadedModel> target_, drafter_;
  std::vector<int32_t> table_;
  Side cpu_, gpu_;
};

TEST_P(CudaDrafterTest, MatchesCpuAndLeavesTargetKvAlone) {
  const int64_t vocab = target_->config.text.vocab_size;
  for (const char* prompt : {"short", "long"}) {
    auto golden = testing::LoadGolden(GetParam(), prompt);
    ASSERT_TRUE(golden.ok()) << golden.status();
    int32_t cpu_bonus = 0, gpu_bonus = 0;
    const spec::DraftResult ref = Round(cpu_, golden->input_ids, &cpu_bonus);
    // The GPU round, with the target's KV snapshotted around the drafter alone.
    const spec::DraftResult got = Round(gpu_, golden->input_ids, &gpu_bonus);
    if (gpu_bonus != cpu_bonus) {
      GTEST_SKIP() << prompt << ": the target's bf16 arg-max differs (covered by cuda_runner_test)";
    }
    const std::vector<uint16_t> before = GpuKv();
    spec::DraftSeq d;
    d.token = gpu_bonus;
    d.committed = static_cast<int64_t>(golden->input_ids.size());
    d.page_table[0] = table_;
    d.page_table[1] = table_;
    d.draws.assign(kSteps, sampling::DrawParams::Greedy());
    const spec::DraftSeq seqs[] = {d};
    spec::DraftResult again;
    ASSERT_TRUE(gpu_.drafter->Draft(seqs, kSteps, &again).ok());
    EXPECT_EQ(before, GpuKv()) << prompt << ": the drafter changed the target's KV";
    EXPECT_EQ(again.tokens, got.tokens) << prompt << ": device and host draws differ";

    for (int k = 0; k < kSteps; ++k) {
      const float* a = got.logits[0].data() + k * vocab;
      const float* b = ref.logits[0].data() + k * vocab;
      double max_ref = 0, max_diff = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        ASSERT_EQ(std::isinf(a[v]), std::isinf(b[v])) << prompt << " step " << k << " token " << v;
        if (std::isinf(b[v])) continue;
        max_ref = std::max(max_ref, std::fabs(static_cast<double>(b[v])));
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[v]) - b[v]));
      }
      const double err = max_diff / max_ref;
      std::printf("%s/%s step %d: max rel logit error %.4f\n", GetParam().c_str(), prompt, k, err);
      EXPECT_LE(err, kTol) << prompt << " step " << k;
      if (k > 0 && got.tokens[0][k - 1] != ref.tokens[0][k - 1]) break;  // inputs differ now
      if (got.tokens[0][k] != ref.tokens[0][k]) {
        std::vector<float> row(b, b + vocab);
        std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
        EXPECT_LT(row[0] - row[1], kNearTie * max_ref)
            << prompt << " step " << k << ": draft " << got.tokens[0][k] << " vs "
            << ref.tokens[0][k] << " without a near tie";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, CudaDrafterTest, ::testing::ValuesIn(testing::TargetVariants()),
                         [](const auto& info) {
                           std::string v = info.param;
                           std::replace(v.begin(), v.end(), '-', '_');
                           return v;
                         });

}  // namespace
}  // namespace gannet
