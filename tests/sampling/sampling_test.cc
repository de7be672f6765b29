#include "lib/sampling/sampling.h"

#include <cmath>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace gannet::sampling {
namespace {

std::vector<float> LogProbs(std::vector<double> p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

std::map<int, double> Frequencies(const std::vector<float>& logits, SamplingParams p, int n) {
  std::map<int, double> f;
  std::vector<float> scratch;
  for (int i = 0; i < n; ++i) ++f[Sample(logits, p, nullptr, i, 0, &scratch).token];
  for (auto& [k, v] : f) v /= n;
  return f;
}

TEST(SamplingTest, ValidatesParameters) {
  SamplingParams p;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
  p.temperature = -0.1f;
  EXPECT_NE(std::string(ValidateSamplingParams(p).message()).find("temperature"),
            std::string::npos);
  p = {};
  p.top_p = 0;
  EXPECT_FALSE(ValidateSamplingParams(p).ok());
  p = {};
  p.min_p = 1.5f;
  EXPECT_FALSE(ValidateSamplingParams(p).ok());
  p = {};
  p.repetition_penalty = 0;
  EXPECT_FALSE(ValidateSamplingParams(p).ok());
  p = {};
  p.top_k = -1;
  EXPECT_FALSE(ValidateSamplingParams(p).ok());
  p = {};
  p.temperature = NAN;
  EXPECT_FALSE(ValidateSamplingParams(p).ok());
}

TEST(SamplingTest, GreedyTakesTheFirstMaximum) {
  std::vector<float> scratch;
  SamplingParams p;
  EXPECT_EQ(Sample(std::vector<float>{1, 3, 3, 2}, p, nullptr, 0, 0, &scratch).token, 1);
  EXPECT_EQ(Sample(std::vector<float>{NAN, -1, 0.5f}, p, nullptr, 0, 0, &scratch).token, 2);
}

TEST(SamplingTest, TemperatureSamplingFollowsTheDistribution) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  auto f = Frequencies(LogProbs({0.5, 0.3, 0.2}), p, 20000);
  EXPECT_NEAR(f[0], 0.5, 0.015);
  EXPECT_NEAR(f[1], 0.3, 0.015);
  EXPECT_NEAR(f[2], 0.2, 0.015);
  // Temperature 0.5 squares the odds: 25:9:4.
  p.temperature = 0.5f;
  f = Frequencies(LogProbs({0.5, 0.3, 0.2}), p, 20000);
  EXPECT_NEAR(f[0], 25.0 / 38, 0.015);
  EXPECT_NEAR(f[2], 4.0 / 38, 0.015);
}

TEST(SamplingTest, TopKTopPMinP) {
  const auto logits = LogProbs({0.5, 0.3, 0.15, 0.05});
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  auto f = Frequencies(logits, p, 10000);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[0], 0.625, 0.02);
  p = {};
  p.temperature = 1.0f;
  p.top_p = 0.85f;  // 0.5 + 0.3 + 0.15 reaches 0.95 >= 0.85 only with the third token
  f = Frequencies(logits, p, 10000);
  EXPECT_EQ(f.size(), 3u);
  EXPECT_EQ(f.count(3), 0u);
  p = {};
  p.temperature = 1.0f;
  p.min_p = 0.5f;  // keep p >= 0.25
  f = Frequencies(logits, p, 10000);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[1], 0.375, 0.02);
  p.top_k = 1;  // top-k 1 is greedy whatever the temperature
  f = Frequencies(logits, p, 100);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.begin()->first, 0);
}

TEST(SamplingTest, Penalties) {
  std::vector<float> scratch;
  TokenCounts counts;
  counts.AddPrompt(std::vector<int32_t>{0});
  counts.AddOutput(1);
  counts.AddOutput(1);
  SamplingParams p;
  // Repetition: positive logits are divided, negative multiplied, for prompt and output tokens.
  p.repetition_penalty = 4.0f;
  std::vector<float> logits = {2.0f, 1.9f, 1.0f};
  EXPECT_EQ(Sample(logits, p, &counts, 0, 0, &scratch).token, 2);  // 0.5, 0.475, 1.0
  EXPECT_FLOAT_EQ(scratch[0], 0.5f);
  logits = {-1.0f, -0.1f, -0.2f};
  Sample(logits, p, &counts, 0, 0, &scratch);
  EXPECT_FLOAT_EQ(scratch[0], -4.0f);
  EXPECT_FLOAT_EQ(scratch[1], -0.4f);
  // Presence and frequency apply to output tokens only: 1.9 - 0.5 - 2 * 0.25 = 0.9.
  p = {};
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  logits = {2.0f, 1.9f, 1.0f};
  Sample(logits, p, &counts, 0, 0, &scratch);
  EXPECT_FLOAT_EQ(scratch[0], 2.0f);
  EXPECT_FLOAT_EQ(scratch[1], 0.9f);
}

TEST(SamplingTest, CounterBasedDeterminism) {
  const auto logits = LogProbs({0.25, 0.25, 0.25, 0.25});
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 99;
  std::vector<float> scratch;
  std::vector<int> first, second;
  for (int i = 0; i < 50; ++i) first.push_back(Sample(logits, p, nullptr, i, 0, &scratch).token);
  // Same (seed, step) pairs in a different order give the same draws.
  for (int i = 49; i >= 0; --i)
    second.insert(second.begin(), Sample(logits, p, nullptr, i, 0, &scratch).token);
  EXPECT_EQ(first, second);
  EXPECT_NE(RowSeed(1, 0), RowSeed(2, 0));
  EXPECT_NE(RowSeed(1, 0), RowSeed(1, 1));
}

TEST(SamplingTest, HostSamplerUsesTheBackendDraw) {
  // Without penalties the host sampler is exactly DrawToken with the row's seed, so a request gets
  // the same tokens whether the host or a backend samples it.
  std::vector<float> logits(300);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * i) * 4.0f;
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.02f;
  p.seed = 5;
  std::vector<float> scratch;
  for (uint64_t step = 0; step < 64; ++step) {
    EXPECT_EQ(
        Sample(logits, p, nullptr, step, 0, &scratch).token,
        DrawToken(logits.data(), static_cast<int64_t>(logits.size()), RowDrawParams(p, step)));
  }
}

TEST(SamplingTest, Logprobs) {
  std::vector<float> scratch;
  SamplingParams p;
  const auto logits = LogProbs({0.6, 0.1, 0.3});
  SampleResult r = Sample(logits, p, nullptr, 0, 2, &scratch);
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, std::log(0.6), 1e-6);
  ASSERT_EQ(r.top_ids, (std::vector<int32_t>{0, 2}));
  EXPECT_NEAR(r.top_logprobs[1], std::log(0.3), 1e-6);
}

}  // namespace
}  // namespace gannet::sampling
