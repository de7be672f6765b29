// Pool sizing: the sliding worst case against brute force, its exactness and sufficiency on a
// live KvManager, and the 31B-like and E4B-like plans checked by hand.
#include "lib/kv/kv_pool_plan.h"

#include <algorithm>
#include <random>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "lib/kv/kv_manager.h"
#include "tests/kv/kv_test_layout.h"

namespace gannet::kv {
namespace {

// Most pages one sequence can hold in a step of n tokens, by enumerating its next position s
// (the protocol keeps positions [max(0, s - W + 1), s + n - 1]) over all s with s + n <= max_len.
int64_t BruteSequencePages(int64_t w, int64_t p, int64_t n, int64_t max_len) {
  int64_t best = 0;
  for (int64_t s = 0; s + n <= max_len && s < w + 3 * p + n; ++s) {
    const int64_t lo = std::max<int64_t>(0, s - w + 1);
    const int64_t hi = s + n - 1;
    if (hi >= lo) best = std::max(best, hi / p - lo / p + 1);
  }
  return best;
}

// Knapsack over S sequences sharing T step tokens.
int64_t BruteWorstCase(int64_t w, int64_t p, int64_t seqs, int64_t step_tokens, int64_t max_len) {
  std::vector<int64_t> g(step_tokens + 1);
  for (int64_t n = 0; n <= step_tokens; ++n) g[n] = BruteSequencePages(w, p, n, max_len);
  std::vector<int64_t> best(step_tokens + 1, 0);
  for (int64_t i = 0; i < seqs; ++i) {
    std::vector<int64_t> next(step_tokens + 1, 0);
    for (int64_t t = 0; t <= step_tokens; ++t) {
      for (int64_t n = 0; n <= t; ++n) next[t] = std::max(next[t], g[n] + best[t - n]);
    }
    best = next;
  }
  return best[step_tokens];
}

// One sequence's pages in a step (what the warm-up's shapes are checked against): exact where the
// context leaves room for the worst alignment, an upper bound where it is shorter.
TEST(KvPoolPlanTest, SlidingPagesHeldMatchesBruteForce) {
  for (int64_t w : {1, 5, 16, 17, 40}) {
    for (int64_t p : {1, 4, 16}) {
      for (int64_t n : {0, 1, 3, 16, 33}) {
        for (int64_t len : {int64_t{1}, n + 1, w + 3 * p + n, 4 * (w + p + n)}) {
          const int64_t brute = BruteSequencePages(w, p, n, len);
          const int64_t held = SlidingPagesHeld(w, p, n, len);
          if (len >= w + 3 * p + n) {
            EXPECT_EQ(held, brute) << w << " " << p << " " << n << " " << len;
          } else {
            EXPECT_GE(held, brute) << w << " " << p << " " << n << " " << len;
          }
        }
      }
    }
  }
}

TEST(KvPoolPlanTest, SlidingWorstCaseMatchesBruteForce) {
  for (int64_t w = 1; w <= 11; ++w) {
    for (int64_t p = 1; p <= 5; ++p) {
      for (int64_t seqs = 1; seqs <= 3; ++seqs) {
        for (int64_t t = 1; t <= 12; ++t) {
          for (int64_t max_len : {int64_t{3}, int64_t{9}, w + t + p, int64_t{100}}) {
            const int64_t formula = SlidingPagesWorstCase(w, p, seqs, t, max_len);
            const int64_t brute = BruteWorstCase(w, p, seqs, t, max_len);
            ASSERT_GE(formula, brute) << w << " " << p << " " << seqs << " " << t << " " << max_len;
            if (max_len >= w + t + p) {
              ASSERT_EQ(formula, brute) << w << " " << p << " " << seqs << " " << t;
            }
          }
        }
      }
    }
  }
}

// Drives `seqs` sequences to the alignment that maximises their sliding pages, then runs one step
// where they share `step_tokens` greedily. Returns whether every Grow succeeded.
bool RunAdversarialStep(int32_t sliding_pages, int64_t w, int64_t p, int64_t seqs,
                        int64_t step_tokens) {
  auto m = std::move(KvManager::Create(TestKvLayout(static_cast<int32_t>(p),
                                                    static_cast<int32_t>(w), sliding_pages, 10000)))
               .value();
  // s with (s - W + 1) % P == P - 1: the window starts on the last slot of a block.
  int64_t s = w - 1 + p - 1;
  for (int64_t id = 0; id < seqs; ++id) {
    EXPECT_TRUE(m->AddSequence(id).ok());
    for (int64_t pos = 0; pos < s;) {
      for (int64_t other = 0; other <= id; ++other) {
        const int64_t next = other == id ? pos : s;
        EXPECT_TRUE(m->ReleaseSlidingBefore(other, next - w + 1).ok());
      }
      const int64_t end = std::min(s, pos + step_tokens);
      if (!m->Grow(id, end).ok()) return false;
      pos = end;
    }
  }
  // Greedy split: first extra page of each sequence, then whole pages to sequence 0.
  int64_t n1 = 1;
  auto span = [&](int64_t m) { return m <= 0 ? 0 : 1 + (m - 1 + p - 1) / p; };
  while (span(w - 1 + n1) == span(w - 1)) ++n1;
  std::vector<int64_t> n(seqs, 0);
  int64_t left = step_tokens;
  for (int64_t id = 0; id < seqs && left >= n1; ++id, left -= n1) n[id] = n1;
  n[0] += left;
  for (int64_t id = 0; id < seqs; ++id) {
    EXPECT_TRUE(m->ReleaseSlidingBefore(id, s - w + 1).ok());
  }
  for (int64_t id = 0; id < seqs; ++id) {
    if (!m->Grow(id, s + n[id]).ok()) return false;
  }
  EXPECT_TRUE(m->CheckInvariants().ok());
  return true;
}

TEST(KvPoolPlanTest, SlidingWorstCaseIsReachedAndSufficient) {
  struct Case {
    int64_t w, p, seqs, step_tokens;
  };
  for (const Case& c : {Case{10, 4, 3, 7}, Case{8, 4, 2, 9}, Case{1024, 16, 4, 100},
                        Case{512, 32, 3, 70}, Case{5, 1, 3, 4}}) {
    const int64_t worst = SlidingPagesWorstCase(c.w, c.p, c.seqs, c.step_tokens, 1 << 20);
    EXPECT_TRUE(RunAdversarialStep(static_cast<int32_t>(worst), c.w, c.p, c.seqs, c.step_tokens))
        << "W " << c.w << " P " << c.p;
    EXPECT_FALSE(
        RunAdversarialStep(static_cast<int32_t>(worst - 1), c.w, c.p, c.seqs, c.step_tokens))
        << "W " << c.w << " P " << c.p;
  }
}

TEST(KvPoolPlanTest, RandomProtocolWorkloadsNeverExceedThePlannedSlidingPool) {
  struct Case {
    int64_t w, p, seqs, step_tokens;
    uint64_t seed;
  };
  for (const Case& c : {Case{64, 8, 5, 40, 1}, Case{16, 4, 6, 9, 2}, Case{33, 5, 4, 64, 3}}) {
    const int64_t worst = SlidingPagesWorstCase(c.w, c.p, c.seqs, c.step_tokens, 1 << 20);
    auto m = std::move(KvManager::Create(TestKvLayout(static_cast<int32_t>(c.p),
                                                      static_cast<int32_t>(c.w),
                                                      static_cast<int32_t>(worst), 0)))
                 .value();
    std::mt19937_64 rng(c.seed);
    auto uniform = [&](int64_t lo, int64_t hi) {
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    std::vector<int64_t> running;
    std::vector<int64_t> length(1000, 0);
    std::vector<int64_t> limit(1000, 0);
    int64_t next_id = 0;
    int64_t peak = 0;
    for (int step = 0; step < 3000; ++step) {
      while (static_cast<int64_t>(running.size()) < c.seqs && next_id < 1000) {
        ASSERT_TRUE(m->AddSequence(next_id).ok());
        limit[next_id] = uniform(1, 8 * c.w);
        running.push_back(next_id++);
      }
      for (int64_t id : running) {
        ASSERT_TRUE(m->ReleaseSlidingBefore(id, length[id] - c.w + 1).ok());
      }
      int64_t budget = c.step_tokens;
      for (int64_t id : running) {
        const int64_t n = std::min({budget, limit[id] - length[id], uniform(0, c.step_tokens)});
        const absl::Status grown = m->Grow(id, length[id] + n);
        ASSERT_TRUE(grown.ok()) << grown;
        length[id] += n;
        budget -= n;
      }
      peak = std::max<int64_t>(peak, m->Usage(KvGroup::kSliding).owned);
      for (size_t i = 0; i < running.size();) {
        if (length[running[i]] >= limit[running[i]]) {
          ASSERT_TRUE(m->Free(running[i]).ok());
          running.erase(running.begin() + i);
        } else {
          ++i;
        }
      }
      std::shuffle(running.begin(), running.end(), rng);
    }
    EXPECT_LE(peak, worst);
    EXPECT_GE(peak, worst * 3 / 4) << "the random workload should come near the worst case";
  }
}

TEST(KvPoolPlanTest, BytesPerTokenFromLayers) {
  // 31B: 60 layers, (5 sliding, 1 full) x 10; sliding 16 KV heads x 256, full 4 x 512; bf16.
  std::vector<KvLayerGeometry> layers;
  for (int i = 0; i < 60; ++i) {
    layers.push_back(i % 6 == 5 ? KvLayerGeometry{KvGroup::kFull, 4, 512}
                                : KvLayerGeometry{KvGroup::kSliding, 16, 256});
  }
  // 50 x 2 x 16 x 256 x 2 = 819200 (800 KiB); 10 x 2 x 4 x 512 x 2 = 81920 (80 KiB).
  EXPECT_EQ(KvBytesPerToken(layers, 2), (PerGroup<int64_t>{819200, 81920}));
  // E4B: 42 layers, (5 sliding, 1 full) x 7, 2 KV heads everywhere, layers 24..41 read the KV of
  // the last earlier layer of their kind (22 sliding, 23 full).
  layers.clear();
  for (int i = 0; i < 42; ++i) {
    const bool full = i % 6 == 5;
    layers.push_back(KvLayerGeometry{full ? KvGroup::kFull : KvGroup::kSliding, 2, full ? 512 : 256,
                                     i < 24 ? -1 : (full ? 23 : 22)});
  }
  // 20 sliding layers x 2048 B = 40960; 4 full layers (5, 11, 17, 23) x 4096 B = 16384.
  EXPECT_EQ(KvBytesPerToken(layers, 2), (PerGroup<int64_t>{40960, 16384}));
}

KvPoolPlanOptions Options31B() {
  KvPoolPlanOptions o;
  o.budget_bytes = int64_t{40} << 30;
  o.bytes_per_token = {819200, 81920};
  o.sliding_window = 1024;
  o.page_size = 16;
  o.max_running_seqs = 16;
  o.max_step_tokens = 2048;
  o.max_seq_len = 32768;
  return o;
}

TEST(KvPoolPlanTest, Plan31B) {
  auto plan = PlanKvPools(Options31B());
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Sliding, by hand: a sequence keeps W - 1 + n = 1023 + n positions. At n = 0 worst-aligned
  // that is 1 + ceil(1022 / 16) = 65 pages; the 64th boundary sits at 1 + 64 * 16 = 1025 > 1022 +
  // 1, so the first extra page costs n1 = 1024 + 1 - 1022 = 3 tokens. 16 sequences x 3 = 48 tokens
  // buy 16 pages, the other 2000 tokens buy 2000 / 16 = 125 more: 16 x 65 + 16 + 125 = 1181.
  // Check: sum over sequences of (1 + ceil((1022 + n_i) / 16)) <= 16 + (16 x 1037 + 2048) / 16
  // = 16 + 1165 = 1181.
  const KvPoolCapacity& sliding = plan->group(KvGroup::kSliding);
  EXPECT_EQ(sliding.pages, 1181);
  EXPECT_EQ(sliding.min_pages, 1181);
  EXPECT_EQ(sliding.tokens, 1181 * 16);
  EXPECT_EQ(sliding.bytes, int64_t{1181} * 16 * 819200);  // 15,479,603,200 B = 14.42 GiB
  // Full: (40 GiB - 15,479,603,200 B - the two padding pages 13,107,200 + 1,310,720 B) /
  // (16 x 81920 B) = 27,455,651,840 / 1,310,720 = 20947.
  const KvPoolCapacity& full = plan->group(KvGroup::kFull);
  EXPECT_EQ(full.pages, 20947);
  EXPECT_EQ(full.min_pages, 2048);  // one 32768-token sequence
  EXPECT_EQ(sliding.report,
            "kv sliding pool: 1181 pages x 16 tokens = 18896 tokens, 14.42 GiB (800.00 KiB/token; "
            "worst case of 16 sequences at window 1024 + 2048 step tokens: 1181 pages)");
  EXPECT_EQ(full.report,
            "kv full pool: 20947 pages x 16 tokens = 335152 tokens, 25.57 GiB (80.00 KiB/token; "
            "10.2 sequences of 32768 tokens; minimum 2048 pages)");
}

TEST(KvPoolPlanTest, PlanE4B) {
  KvPoolPlanOptions o;
  o.budget_bytes = int64_t{8} << 30;
  o.bytes_per_token = {40960, 16384};
  o.sliding_window = 512;
  o.page_size = 16;
  o.max_running_seqs = 64;
  o.max_step_tokens = 4096;
  o.max_seq_len = 131072;
  auto plan = PlanKvPools(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // g(0) = 1 + ceil(510 / 16) = 33; n1 = 512 + 1 - 510 = 3; 64 x 3 = 192 tokens buy 64 pages,
  // (4096 - 192) / 16 = 244 more: 64 x 33 + 64 + 244 = 2420 pages x 655,360 B = 1,585,971,200 B.
  EXPECT_EQ(plan->group(KvGroup::kSliding).pages, 2420);
  EXPECT_EQ(plan->group(KvGroup::kSliding).bytes, 1585971200);
  // (8 GiB - 1,585,971,200 - padding 655,360 + 262,144) / (16 x 16384) = 7,003,045,888 /
  // 262,144 = 26714.8 -> 26714.
  EXPECT_EQ(plan->group(KvGroup::kFull).pages, 26714);
  EXPECT_EQ(plan->group(KvGroup::kFull).min_pages, 8192);
}

TEST(KvPoolPlanTest, BudgetTooSmallIsAnError) {
  KvPoolPlanOptions o = Options31B();
  // Needs 15,479,603,200 + 2048 x 1,310,720 + the padding pages 14,417,920 = 18,178,375,680 B
  // (16.93 GiB) > 16 GiB.
  o.budget_bytes = int64_t{16} << 30;
  const absl::Status status = PlanKvPools(o).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("together with the padding pages 16.93 GiB"),
            absl::string_view::npos)
      << status;
  EXPECT_EQ(KvMinimumBytes(o), 18178375680);
  o.budget_bytes = 18178375680;
  EXPECT_TRUE(PlanKvPools(o).ok());
  o.budget_bytes -= 1;
  EXPECT_FALSE(PlanKvPools(o).ok());
}

TEST(KvPoolPlanTest, SingleGroupModelsGetEverything) {
  KvPoolPlanOptions o = Options31B();
  o.bytes_per_token = {819200, 0};
  auto plan = PlanKvPools(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The whole budget less the padding page: 3276 - 1.
  EXPECT_EQ(plan->group(KvGroup::kSliding).pages, (int64_t{40} << 30) / (16 * 819200) - 1);
  EXPECT_EQ(plan->group(KvGroup::kFull).pages, 0);
  EXPECT_EQ(plan->group(KvGroup::kFull).report,
            "kv full pool: none (the model has no full-attention layers)");
  o.bytes_per_token = {0, 81920};
  plan = PlanKvPools(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->group(KvGroup::kFull).pages, (int64_t{40} << 30) / (16 * 81920) - 1);
  EXPECT_EQ(plan->group(KvGroup::kSliding).pages, 0);
  o.budget_bytes = int64_t{2047} * 16 * 81920;  // one page short of a 32768-token sequence
  EXPECT_EQ(PlanKvPools(o).status().code(), absl::StatusCode::kResourceExhausted);
  o.bytes_per_token = {0, 0};
  EXPECT_EQ(PlanKvPools(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvPoolPlanTest, Overrides) {
  KvPoolPlanOptions o = Options31B();
  o.num_pages_override = {100, 0};  // below the worst case: allowed, flagged in the report
  auto plan = PlanKvPools(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->group(KvGroup::kSliding).pages, 100);
  EXPECT_TRUE(plan->group(KvGroup::kSliding).overridden);
  EXPECT_NE(plan->group(KvGroup::kSliding).report.find("BELOW"), std::string::npos);
  const int64_t padding = 16 * 819200 + 16 * 81920;
  EXPECT_EQ(plan->group(KvGroup::kFull).pages,
            ((int64_t{40} << 30) - padding - int64_t{100} * 16 * 819200) / (16 * 81920));
  o.num_pages_override = {0, 3000};  // the sliding pool takes the rest
  plan = PlanKvPools(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->group(KvGroup::kSliding).pages,
            ((int64_t{40} << 30) - padding - int64_t{3000} * 16 * 81920) / (16 * 819200));
  o.num_pages_override = {4000, 0};  // 4000 x 13,107,200 B > 40 GiB
  EXPECT_EQ(PlanKvPools(o).status().code(), absl::StatusCode::kResourceExhausted);
  o.bytes_per_token = {0, 81920};
  o.num_pages_override = {10, 0};
  EXPECT_EQ(PlanKvPools(o).status().code(), absl::StatusCode::kInvalidArgument);
}

// The 31B on an H100 80GB (issue 9): a 20 GiB budget cannot hold the default 64 sequences'
// sliding windows (4340 pages = 53 GiB); the default is lowered to what fits, with the numbers.
TEST(KvPoolPlanTest, DefaultRunningLimitIsLoweredToWhatFits) {
  KvPlanRequest r;
  r.options = Options31B();
  r.options.budget_bytes = int64_t{20} << 30;
  r.options.max_running_seqs = 64;
  EXPECT_EQ(SlidingPagesWorstCase(1024, 16, 64, 2048, 32768), 4340);
  auto result = PlanKvPoolsWithDefaults(r);
  ASSERT_TRUE(result.ok()) << result.status();
  // Sliding pages for S sequences: 65 S + S + floor((2048 - 3 S) / 16). With the full pool's
  // 2048 pages and both padding pages, 20 GiB leaves 18,776,064,000 B = 1432 sliding pages:
  // S = 19 needs 1254 + 124 = 1378 pages, S = 20 needs 1320 + 124 = 1444.
  EXPECT_EQ(result->max_running_seqs, 19);
  EXPECT_EQ(result->max_seq_len, 32768);
  EXPECT_EQ(result->plan.group(KvGroup::kSliding).pages, 1378);
  EXPECT_NE(result->warning.find("20.00 GiB KV budget holds the sliding windows of 19 running "
                                 "sequences next to one 32768-token sequence"),
            std::string::npos)
      << result->warning;
  // The same budget with the user's 64: an error naming the setting and what fits.
  r.user_running_seqs = true;
  const absl::Status user = PlanKvPoolsWithDefaults(r).status();
  EXPECT_EQ(user.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(user.message().find("max_running_seqs 64 does not fit"), std::string::npos) << user;
  EXPECT_NE(user.message().find("Set max_running_seqs <= 19"), std::string::npos) << user;
  // What fits needs no change and no warning.
  r.options.max_running_seqs = 19;
  result = PlanKvPoolsWithDefaults(r);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->max_running_seqs, 19);
  EXPECT_TRUE(result->warning.empty());
}

TEST(KvPoolPlanTest, ADefaultLimitWhoseWindowsStarveTheFullPoolIsLoweredToWhatItHolds) {
  // One rank of 31B on two H100s (half of every token's KV): the group's default 128 does not
  // fit, and 107 sequences' windows do, next to one 32768-token sequence, but leave the full pool
  // little more than that sequence. The default is lowered until the full pool also holds every
  // running sequence at kPlannedSeqTokens (128 pages).
  KvPlanRequest r;
  r.options = Options31B();
  r.options.bytes_per_token = {409600, 20480};
  r.options.budget_bytes = int64_t{47} << 30;
  r.options.max_running_seqs = 128;
  auto result = PlanKvPoolsWithDefaults(r);
  ASSERT_TRUE(result.ok()) << result.status();
  const int s = result->max_running_seqs;
  EXPECT_GE(s, 90);
  EXPECT_LT(s, 107);
  EXPECT_GE(result->plan.group(KvGroup::kFull).pages, int64_t{128} * s);
  EXPECT_NE(result->warning.find("a full-attention pool for each of them at 2048 tokens, not the "
                                 "default 128"),
            std::string::npos)
      << result->warning;
  // One more would leave the full pool short of its sequences.
  KvPoolPlanOptions more = r.options;
  more.max_running_seqs = s + 1;
  auto p = PlanKvPools(more);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_LT(p->group(KvGroup::kFull).pages, int64_t{128} * (s + 1));
  // Where the default's windows fit but starve the full pool, the same: 107 as the default.
  r.options.max_running_seqs = 107;
  ASSERT_TRUE(PlanKvPools(r.options).ok());
  result = PlanKvPoolsWithDefaults(r);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->max_running_seqs, s);
  EXPECT_NE(result->warning.find("holds the sliding windows of the default 107 running sequences, "
                                 "but then its full-attention pool holds only"),
            std::string::npos)
      << result->warning;
  // The user's 107 is the user's choice: it fits, so it runs, unlowered.
  r.user_running_seqs = true;
  result = PlanKvPoolsWithDefaults(r);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->max_running_seqs, 107);
  EXPECT_TRUE(result->warning.empty());
}

TEST(KvPoolPlanTest, DefaultContextLengthIsLoweredWhenNoSequenceFits) {
  KvPlanRequest r;
  r.options = Options31B();
  r.options.max_running_seqs = 64;
  r.options.max_seq_len = 262144;  // 16384 full pages = 21.5 GB
  r.options.budget_bytes = int64_t{12} << 30;
  auto result = PlanKvPoolsWithDefaults(r);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->max_running_seqs, 1);
  EXPECT_LT(result->max_seq_len, 262144);
  EXPECT_GT(result->max_seq_len, 32768);
  EXPECT_NE(result->warning.find("max_model_len lowered to"), std::string::npos);
  // It is the longest that fits: one more token needs another page or more.
  KvPoolPlanOptions o = r.options;
  o.max_running_seqs = 1;
  o.max_seq_len = result->max_seq_len;
  EXPECT_TRUE(PlanKvPools(o).ok());
  o.max_seq_len = (result->max_seq_len / 16 + 1) * 16 + 1;
  EXPECT_FALSE(PlanKvPools(o).ok());
  // A context length the user set is not lowered: the error says what would fit.
  r.user_max_seq_len = true;
  const absl::Status user = PlanKvPoolsWithDefaults(r).status();
  EXPECT_EQ(user.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(user.message().find("max_model_len 262144 does not fit"), std::string::npos) << user;
  EXPECT_NE(user.message().find(fmt::format("Set max_model_len <= {}", result->max_seq_len)),
            std::string::npos)
      << user;
  // Far too little memory for anything: an error, whatever is a default.
  r.user_max_seq_len = false;
  r.options.budget_bytes = 100 << 20;
  EXPECT_EQ(PlanKvPoolsWithDefaults(r).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(KvPoolPlanTest, PoolsAreCappedAtTheInt32SlotRange) {
  // A tiny model with a huge budget: the full pool stops at the slot range.
  KvPoolPlanOptions o;
  o.budget_bytes = int64_t{288} << 30;
  o.bytes_per_token = {0, 64};
  o.page_size = 16;
  o.max_running_seqs = 4;
  o.max_step_tokens = 64;
  o.max_seq_len = 4096;
  auto plan = PlanKvPools(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->group(KvGroup::kFull).pages, kMaxPoolTokens / 16 - 1);
  EXPECT_LE((static_cast<int64_t>(plan->group(KvGroup::kFull).pages) + 1) * 16, kMaxPoolTokens);
  o.num_pages_override = {0, static_cast<int32_t>(kMaxPoolTokens / 16)};
  EXPECT_EQ(PlanKvPools(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gannet::kv
