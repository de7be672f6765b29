// Where a row is sampled, and the host path's stop-id masking before min_tokens.
#include "lib/sampling/row_policy.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace gannet::sampling {
namespace {

TEST(RowPolicyTest, DeviceUnlessTheHostIsNeeded) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.seed = 5;
  const std::vector<int32_t> stops = {1, 50, 106};
  RowRequest r{&p, 0, 3, 0, stops};
  RowChoice c = ChooseRowSampling(r);
  EXPECT_FALSE(c.host);
  EXPECT_TRUE(c.banned.empty());  // past min_tokens: stops may be drawn
  EXPECT_EQ(c.draw.seed, RowSeed(5, 3));
  EXPECT_EQ(c.draw.temperature, 0.7f);
  r.min_tokens = 10;  // short of min_tokens: the device masks the stops
  c = ChooseRowSampling(r);
  EXPECT_FALSE(c.host);
  EXPECT_EQ(std::vector<int32_t>(c.banned.begin(), c.banned.end()), stops);
  std::vector<int32_t> many(kBanSlots + 1);
  std::iota(many.begin(), many.end(), 0);
  r.stop_token_ids = many;  // more than the ban slots: the host masks them
  EXPECT_TRUE(ChooseRowSampling(r).host);
  r = RowRequest{&p, 2, 0, 0, stops};  // logprobs
  EXPECT_TRUE(ChooseRowSampling(r).host);
  p.repetition_penalty = 1.2f;  // penalties
  r.logprobs = 0;
  EXPECT_TRUE(ChooseRowSampling(r).host);
}

// One greedy rule (DrawParams::greedy) for a request and its rows: top_k 1 is greedy whatever
// the temperature, so a verify chunk of such a request compares arg-maxes on the device rather
// than copying its logits for rejection sampling. The default row is greedy, as gannet.h
// documents (temperature 0 = greedy).
TEST(RowPolicyTest, OneGreedyRuleForRequestsAndRows) {
  EXPECT_TRUE(DrawParams{}.greedy());
  EXPECT_TRUE(SamplingParams{}.greedy());
  SamplingParams p;
  p.temperature = 0.7f;
  EXPECT_FALSE(p.greedy());
  p.top_k = 1;
  EXPECT_TRUE(p.greedy());
  EXPECT_TRUE(RowDrawParams(p, 3).greedy());
  const RowRequest r{&p, 0, 3, 0, {}};
  for (const RowChoice& c : ChooseVerifySampling(r, 2)) EXPECT_FALSE(c.host);
  p.top_k = 2;
  for (const RowChoice& c : ChooseVerifySampling(r, 2)) EXPECT_TRUE(c.host);
}

TEST(RowPolicyTest, HostPathMasksStopsBeforeMinTokens) {
  SamplingParams greedy;
  const std::vector<float> logits = {0.f, 5.f, 1.f, 4.f};
  const std::vector<int32_t> stops = {1};
  std::vector<float> a, b;
  RowRequest r{&greedy, 0, 0, 2, stops};
  EXPECT_EQ(SampleOnHost(logits, r, nullptr, &a, &b).token, 3);  // 1 is masked
  r.num_output = 2;
  EXPECT_EQ(SampleOnHost(logits, r, nullptr, &a, &b).token, 1);
}

}  // namespace
}  // namespace gannet::sampling
