// The CPU reference of Backend::Sample (backend.h): greedy, filters, determinism and the sampled
// distribution. These properties pin the definition the GPU kernel is compared against.
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/sampling/draw.h"

namespace gannet::backend {
namespace {

using sampling::DrawParams;

class CpuSampleTest : public ::testing::Test {
 protected:
  // banned: empty, or [rows x kSampleBanSlots]; masked_out receives the logits after the call.
  std::vector<int32_t> Run(const std::vector<float>& logits, int vocab,
                           const std::vector<DrawParams>& params, std::vector<int32_t> banned = {},
                           std::vector<float>* masked_out = nullptr) {
    const int rows = static_cast<int>(params.size());
    std::vector<float> x = logits;
    std::vector<DrawParams> p = params;
    std::vector<int32_t> ids(rows, -1);
    const Tensor ban = banned.empty()
                           ? Tensor()
                           : Tensor::Make(banned.data(), DType::kI32, {rows, kSampleBanSlots});
    absl::Status st = be_.Sample(Tensor::Make(x.data(), DType::kF32, {rows, vocab}),
                                 Tensor::Make(p.data(), DType::kU8, {rows, 24}), ban,
                                 Tensor::Make(ids.data(), DType::kI32, {rows}));
    EXPECT_TRUE(st.ok()) << st;
    if (masked_out != nullptr) *masked_out = x;
    return ids;
  }
  CpuBackend be_;
};

TEST_F(CpuSampleTest, GreedyTakesTheFirstMaximum) {
  std::vector<float> x = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  DrawParams g;
  g.temperature = 0.f;
  DrawParams k1;
  k1.top_k = 1;
  EXPECT_EQ(Run(x, 5, {g, k1}), (std::vector<int32_t>{1, 1}));
}

TEST_F(CpuSampleTest, FiltersRestrictTheSupport) {
  const int vocab = 1000;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> x(vocab);
  for (float& v : x) v = nd(rng);
  std::vector<int> order(vocab);
  for (int i = 0; i < vocab; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  std::vector<DrawParams> rows(400);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].temperature = 1.0f;
    rows[i].top_k = 5;
    rows[i].seed = 1000 + i;
  }
  std::set<int> top5(order.begin(), order.begin() + 5);
  std::set<int> seen;
  std::vector<float> all;
  for (size_t r = 0; r < rows.size(); ++r) all.insert(all.end(), x.begin(), x.end());
  for (int id : Run(all, vocab, rows)) {
    EXPECT_TRUE(top5.count(id)) << id;
    seen.insert(id);
  }
  EXPECT_GE(seen.size(), 3u);  // it samples, it does not collapse to the arg-max

  // min_p = 0.5 at temperature 1 keeps exactly the tokens within ln 2 of the max.
  DrawParams mp;
  mp.temperature = 1.0f;
  mp.min_p = 0.5f;
  for (int s = 0; s < 200; ++s) {
    mp.seed = s;
    const int id = Run(x, vocab, {mp})[0];
    EXPECT_GE(x[id], x[order[0]] - std::log(2.f) - 1e-5f);
  }
  // top_p = 0.3: the kept set is the smallest top set reaching 30% of the mass.
  double z = 0;
  for (float v : x) z += std::exp(v - x[order[0]]);
  double acc = 0;
  int kept = 0;
  while (acc < 0.3 * z) acc += std::exp(x[order[kept++]] - x[order[0]]);
  std::set<int> nucleus(order.begin(), order.begin() + kept);
  DrawParams tp;
  tp.temperature = 1.0f;
  tp.top_p = 0.3f;
  for (int s = 0; s < 200; ++s) {
    tp.seed = s;
    EXPECT_TRUE(nucleus.count(Run(x, vocab, {tp})[0]));
  }
}

TEST_F(CpuSampleTest, SameSeedSameToken) {
  std::vector<float> x(300);
  for (int i = 0; i < 300; ++i) x[i] = std::sin(0.37f * i);
  DrawParams p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  p.seed = 42;
  EXPECT_EQ(Run(x, 300, {p}), Run(x, 300, {p}));
}

TEST_F(CpuSampleTest, FrequenciesFollowTheSoftmax) {
  // Four tokens with probabilities 0.1, 0.2, 0.3, 0.4 at temperature 1.
  const std::vector<float> x = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  const int n = 20000;
  std::vector<DrawParams> rows(n);
  std::vector<float> all;
  for (int i = 0; i < n; ++i) {
    rows[i].temperature = 1.0f;
    rows[i].seed = 77 + 1315423911ull * i;
    all.insert(all.end(), x.begin(), x.end());
  }
  std::vector<int> count(4, 0);
  for (int id : Run(all, 4, rows)) ++count[id];
  for (int t = 0; t < 4; ++t) {
    const double p = 0.1 * (t + 1);
    const double sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(count[t], n * p, 5 * sd) << "token " << t;  // 5 sigma: fails only if biased
  }
}

// Banned ids (a request's stop tokens before min_tokens) are never drawn, greedy or sampled; -1
// slots and ids outside the vocabulary are ignored; the row reads -inf there afterwards.
TEST_F(CpuSampleTest, BannedTokensAreNeverDrawn) {
  const std::vector<float> row = {0.5f, 4.0f, -1.0f, 3.0f, 1.0f};
  std::vector<float> x;
  for (int r = 0; r < 2; ++r) x.insert(x.end(), row.begin(), row.end());
  DrawParams greedy;
  greedy.temperature = 0.f;
  std::vector<int32_t> banned(2 * kSampleBanSlots, -1);
  banned[0] = 1;   // row 0 bans its arg-max
  banned[1] = 99;  // outside the vocabulary: ignored
  std::vector<float> masked;
  EXPECT_EQ(Run(x, 5, {greedy, greedy}, banned, &masked), (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(masked[1], -INFINITY);
  EXPECT_EQ(masked[5 + 1], 4.0f);  // row 1 bans nothing

  // Sampling with every token but one banned can only draw that one.
  DrawParams hot;
  hot.temperature = 2.0f;
  std::vector<int32_t> all_but_2(2 * kSampleBanSlots, -1);
  for (int r = 0; r < 2; ++r) {
    int k = 0;
    for (int id : {0, 1, 3, 4}) all_but_2[r * kSampleBanSlots + k++] = id;
  }
  for (uint64_t seed = 0; seed < 50; ++seed) {
    hot.seed = seed;
    EXPECT_EQ(Run(x, 5, {hot, hot}, all_but_2), (std::vector<int32_t>{2, 2})) << seed;
  }
}

TEST_F(CpuSampleTest, RejectsWrongShapes) {
  std::vector<float> x(10, 0.f);
  std::vector<int32_t> ids(2);
  DrawParams p[2];
  absl::Status st =
      be_.Sample(Tensor::Make(x.data(), DType::kF32, {2, 5}), Tensor::Make(p, DType::kU8, {1, 24}),
                 Tensor(), Tensor::Make(ids.data(), DType::kI32, {2}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> short_ban(kSampleBanSlots, -1);  // one row's worth for two rows
  st = be_.Sample(Tensor::Make(x.data(), DType::kF32, {2, 5}), Tensor::Make(p, DType::kU8, {2, 24}),
                  Tensor::Make(short_ban.data(), DType::kI32, {1, kSampleBanSlots}),
                  Tensor::Make(ids.data(), DType::kI32, {2}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("banned"), std::string::npos) << st;
}

}  // namespace
}  // namespace gannet::backend
