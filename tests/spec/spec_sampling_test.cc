// Sampled speculative decoding through the engine (CPU, tiny 31B with its tiny drafter): the
// distribution of the first three generated tokens over N seeded requests equals that of plain
// sampling, at temperature 1.0 with and without top-p: chi-square two-sample tests (p > 1e-3) on
// the joint distribution of the three tokens and on the marginals of the second and third (the
// first comes from the prefill row, before any draft). Drafts come from the drafter's own
// distribution (the override hook is never used for sampled requests) and are verified by
// rejection sampling on the host (spec/verify.h). The same tests must reject a wrong sampler:
// the plain run at temperature 1.3. Seeds are fixed, so the outcome is deterministic.
//
// N = $GANNET_SPEC_SAMPLING_DRAWS, default 5000 (about a minute on 2 cores; CI's share of its
// time was the largest of any test at 10^4): p joint 0.11 and 0.83, and the wrong sampler's second
// token still at p 7e-21 (2026-12-07). The 10^5 (about 14 minutes) passed on 2026-11-23:
// joint p = 0.46 (top-p off) and 0.28 (top-p 0.8), 17.7% and 12.3% of drafts accepted.
//
// SpecSamplingTp: the same test with tensor parallelism 2 (ranks as threads; every rank drafts
// with its shard of the assistant and rank 0 verifies), speculation at TP 2 against plain
// sampling on one device, at temperature 1.0, sized to be fast: N =
// $GANNET_SPEC_SAMPLING_TP_DRAWS, default 2000 (ctest spec_sampling_tp_test; 21 s of CPU time;
// p = 0.11 joint, and 2e-4 for temperature 1.3 against 1.0, the power check).
#include <cstdlib>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "tests/spec/spec_test_util.h"
#include "tests/testing/chi_square.h"

namespace gannet::engine {
namespace {

using namespace spectest;  // NOLINT: the helpers of this test family

constexpr int kTokens = 3;

int Draws(const char* var = "GANNET_SPEC_SAMPLING_DRAWS", int fallback = 5000) {
  const char* env = std::getenv(var);
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : fallback;
}

// Counts of each distinct 3-token output.
std::map<std::vector<int32_t>, int64_t> Sample(Engine& engine, float temperature, float top_p,
                                               uint64_t seed0, EngineStats* stats,
                                               int draws = Draws()) {
  const std::vector<int32_t> prompt = Prompt(11, 6);
  std::map<std::vector<int32_t>, int64_t> counts;
  constexpr int kWave = 2000;  // bounded in-flight requests
  for (int begin = 0; begin < draws; begin += kWave) {
    std::vector<RequestInput> wave;
    for (int i = begin; i < std::min(draws, begin + kWave); ++i) {
      RequestInput in = Greedy(prompt, kTokens);
      in.sampling.temperature = temperature;
      in.sampling.top_p = top_p;
      in.seed_mode = SeedMode::kFixed;
      in.seed = seed0 + static_cast<uint64_t>(i);
      in.ignore_default_stop_tokens = true;
      wave.push_back(in);
    }
    for (const Outcome& o : RunAll(engine, wave)) {
      EXPECT_EQ(o.tokens.size(), static_cast<size_t>(kTokens));
      ++counts[o.tokens];
    }
  }
  *stats = engine.GetStats();
  return counts;
}

// Two-sample p-value of the outputs restricted to positions [first, last).
double TwoSample(const std::map<std::vector<int32_t>, int64_t>& a,
                 const std::map<std::vector<int32_t>, int64_t>& b, int first = 0,
                 int last = kTokens) {
  std::map<std::vector<int32_t>, std::pair<int64_t, int64_t>> cells;
  auto key = [&](const std::vector<int32_t>& t) {
    return std::vector<int32_t>(t.begin() + first, t.begin() + last);
  };
  for (const auto& [k, n] : a) cells[key(k)].first += n;
  for (const auto& [k, n] : b) cells[key(k)].second += n;
  std::vector<int64_t> x, y;
  for (const auto& [k, c] : cells) {
    x.push_back(c.first);
    y.push_back(c.second);
  }
  return testing::TwoSampleP(x, y);
}

std::unique_ptr<Engine> Make(bool speculate, int tensor_parallel_size = 1) {
  EngineSetup s;
  s.variant = "31b";
  s.tensor_parallel_size = tensor_parallel_size;
  s.max_running_seqs = 64;
  s.max_step_tokens = 512;
  s.spec_tokens = speculate ? 3 : 0;
  return MakeEngine(s);
}

TEST(SpecSampling, FirstThreeTokensDistributedAsPlainSampling) {
  auto plain = Make(false);
  auto spec = Make(true);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(spec, nullptr);
  std::map<std::vector<int32_t>, int64_t> base;  // plain, temperature 1.0, top-p off
  for (float top_p : {1.0f, 0.8f}) {
    EngineStats ps, ss;
    const auto a = Sample(*plain, 1.0f, top_p, 1, &ps);
    if (top_p == 1.0f) base = a;
    const auto b = Sample(*spec, 1.0f, top_p, 10'000'000, &ss);
    const double joint = TwoSample(a, b), second = TwoSample(a, b, 1, 2),
                 third = TwoSample(a, b, 2, 3);
    std::printf(
        "top_p %.1f: %zu and %zu distinct outputs; p joint %.4f, 2nd token %.4f, 3rd "
        "token %.4f; %ld drafts, %ld accepted\n",
        top_p, a.size(), b.size(), joint, second, third, static_cast<long>(ss.spec_draft_tokens),
        static_cast<long>(ss.spec_accepted_tokens));
    EXPECT_GT(joint, 1e-3) << "top_p " << top_p;
    EXPECT_GT(second, 1e-3) << "top_p " << top_p;
    EXPECT_GT(third, 1e-3) << "top_p " << top_p;
    EXPECT_GT(ss.spec_accepted_tokens, 0) << "no draft was ever accepted: nothing was tested";
  }
  // The same test tells a different distribution apart (against the plain top-p-off draws above,
  // which the same seeds would only repeat).
  EngineStats ps;
  const auto hotter = Sample(*plain, 1.3f, 1.0f, 20'000'000, &ps);
  const double joint = TwoSample(base, hotter), second = TwoSample(base, hotter, 1, 2);
  std::printf("temperature 1.3 vs 1.0: p joint %.3g, 2nd token %.3g\n", joint, second);
  EXPECT_LT(second, 1e-6);
}

TEST(SpecSamplingTp, TwoRanksDistributedAsPlainSampling) {
  const int draws = Draws("GANNET_SPEC_SAMPLING_TP_DRAWS", 2000);
  auto plain = Make(false);
  auto spec = Make(true, 2);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(spec, nullptr);
  EngineStats ps, ss;
  const auto a = Sample(*plain, 1.0f, 1.0f, 1, &ps, draws);
  const auto b = Sample(*spec, 1.0f, 1.0f, 10'000'000, &ss, draws);
  const double joint = TwoSample(a, b), second = TwoSample(a, b, 1, 2),
               third = TwoSample(a, b, 2, 3);
  std::printf(
      "tp 2, %d draws: %zu and %zu distinct outputs; p joint %.4f, 2nd token %.4f, 3rd "
      "token %.4f; %ld drafts, %ld accepted\n",
      draws, a.size(), b.size(), joint, second, third, static_cast<long>(ss.spec_draft_tokens),
      static_cast<long>(ss.spec_accepted_tokens));
  EXPECT_GT(joint, 1e-3);
  EXPECT_GT(second, 1e-3);
  EXPECT_GT(third, 1e-3);
  EXPECT_GT(ss.spec_accepted_tokens, 0) << "no draft was ever accepted: nothing was tested";
  // At this size the test still tells a different distribution apart.
  const auto hotter = Sample(*plain, 1.3f, 1.0f, 20'000'000, &ps, draws);
  const double hot = TwoSample(a, hotter, 1, 2);
  std::printf("temperature 1.3 vs 1.0, %d draws: p 2nd token %.3g\n", draws, hot);
  EXPECT_LT(hot, 1e-3);
}

}  // namespace
}  // namespace gannet::engine
