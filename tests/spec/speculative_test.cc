// Speculative verification (lib/spec/speculative.h): the kept masses are DrawToken's, greedy
// verification is prefix matching, and speculative sampling's output distribution equals
// non-speculative sampling's (chi-square two-sample tests on a toy model, with a check that the
// same test rejects deliberately wrong verifiers).
#include "lib/spec/speculative.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/common/hash.h"
#include "tests/testing/chi_square.h"

namespace gannet::spec {
namespace {

using sampling::ArgMax;
using sampling::DrawParams;
using sampling::DrawToken;
using sampling::KeptMass;
using sampling::RowSeed;

using testing::ChiSquareSurvival;
using testing::GoodnessOfFitP;
using testing::TwoSampleP;

TEST(ChiSquareTest, KnownQuantiles) {
  EXPECT_NEAR(ChiSquareSurvival(3.841459, 1), 0.05, 1e-6);
  EXPECT_NEAR(ChiSquareSurvival(18.307038, 10), 0.05, 1e-6);
  EXPECT_NEAR(ChiSquareSurvival(124.342113, 100), 0.05, 1e-6);
  EXPECT_NEAR(ChiSquareSurvival(1e3, 1000), 0.4940, 1e-3);
  EXPECT_NEAR(ChiSquareSurvival(40, 2) / std::exp(-20.0), 1, 1e-9);  // df 2: exactly e^(-x/2)
  EXPECT_NEAR(ChiSquareSurvival(2, 2), std::exp(-1.0), 1e-12);
}

// --- helpers ----------------------------------------------------------------------------------

double Uniform(uint64_t h) { return static_cast<double>(SplitMix64(h) >> 11) / 9007199254740992.0; }

std::vector<float> RandomRow(int64_t vocab, uint64_t seed, bool ties) {
  std::vector<float> row(vocab);
  for (int64_t i = 0; i < vocab; ++i) {
    const float x = static_cast<float>((Uniform(seed * 1000003 + i) - 0.5) * 10);
    row[i] = ties ? std::round(x) : x;
  }
  return row;
}

DrawParams Params(float t, int32_t top_k = 0, float top_p = 1, float min_p = 0) {
  return DrawParams{t, top_k, top_p, min_p, 0};
}

// DrawToken's u and its inverse CDF, written out again over ComputeKeptMasses.
int32_t InverseCdf(const KeptMasses& km, uint64_t seed) {
  const double u = static_cast<double>(SplitMix64(seed) >> 11) / 9007199254740992.0;
  const uint64_t r = static_cast<uint64_t>(u * static_cast<double>(km.total));
  uint64_t run = 0;
  for (size_t i = 0; i < km.ids.size(); ++i) {
    run += km.mass[i];
    if (run > r) return km.ids[i];
  }
  return -1;
}

// --- ComputeKeptMasses ------------------------------------------------------------------------

TEST(KeptMassesTest, IsExactlyWhatDrawTokenDrawsFrom) {
  const std::vector<DrawParams> params = {Params(0),
                                          Params(1, 1),
                                          Params(0.7f),
                                          Params(1),
                                          Params(1.5f),
                                          Params(1, 5),
                                          Params(0.7f, 0, 0.8f),
                                          Params(1.5f, 0, 1, 0.1f),
                                          Params(1, 8, 0.9f, 0.05f),
                                          Params(0.7f, 3, 0.5f),
                                          Params(1.5f, 0, 0.3f, 0.2f),
                                          Params(1, 1000)};
  int rows = 0;
  for (int64_t vocab : {1, 7, 40, 300}) {
    for (uint64_t r = 0; r < 12; ++r, ++rows) {
      const std::vector<float> row = RandomRow(vocab, 100 + rows, r % 3 == 0);
      for (const DrawParams& base : params) {
        const KeptMasses km = ComputeKeptMasses(row.data(), vocab, base);
        ASSERT_FALSE(km.ids.empty());
        ASSERT_TRUE(std::is_sorted(km.ids.begin(), km.ids.end()));
        uint64_t sum = 0;
        for (uint64_t m : km.mass) sum += m;
        ASSERT_EQ(sum, km.total);
        const bool greedy = base.temperature <= 0 || base.top_k == 1;
        const int64_t best = std::max_element(row.begin(), row.end()) - row.begin();
        if (greedy) {
          ASSERT_EQ(km.ids, std::vector<int32_t>{static_cast<int32_t>(best)});
          ASSERT_EQ(km.total, 1u);
        } else {
          const float mx = row[best];
          for (int64_t i = 0; i < vocab; ++i) {
            const float w = std::exp((row[i] - mx) / base.temperature);
            const uint64_t m = km.MassOf(static_cast<int32_t>(i));
            if (m != 0) {  // the mass is floor(w 2^32), and min_p holds
              ASSERT_EQ(m, static_cast<uint64_t>(w * 4294967296.0f));
              ASSERT_GE(w, base.min_p);
            }
            for (int64_t j = 0; j < vocab; ++j) {  // every filter keeps an upper set of logits
              if (m != 0 && row[j] > row[i]) {
                ASSERT_NE(km.MassOf(static_cast<int32_t>(j)), 0u);
              }
            }
          }
          if (base.top_k > 0 && r % 3 != 0) {
            ASSERT_LE(km.ids.size(), size_t(base.top_k));
          }
          ASSERT_EQ(km.MassOf(static_cast<int32_t>(best)), uint64_t{1} << 32);
        }
        for (uint64_t s = 0; s < 200; ++s) {
          DrawParams p = base;
          p.seed = s * 7919 + rows;
          const int32_t t = DrawToken(row.data(), vocab, p);
          ASSERT_GT(km.MassOf(t), 0u) << "drew a token outside the kept set";
          if (!greedy) {
            ASSERT_EQ(t, InverseCdf(km, p.seed));
          }
        }
      }
    }
  }
  EXPECT_EQ(KeptMasses{}.MassOf(3), 0u);
}

TEST(KeptMassesTest, DrawTokenFrequenciesMatchTheMasses) {
  const std::vector<float> row = RandomRow(20, 5, false);
  for (const DrawParams& base :
       {Params(1), Params(0.7f, 6), Params(1.5f, 0, 0.8f, 0.02f), Params(1, 10, 0.95f, 0.05f)}) {
    const KeptMasses km = ComputeKeptMasses(row.data(), 20, base);
    std::vector<double> prob(20, 0);
    for (size_t i = 0; i < km.ids.size(); ++i) {
      prob[km.ids[i]] = static_cast<double>(km.mass[i]) / static_cast<double>(km.total);
    }
    std::vector<int64_t> counts(20, 0);
    DrawParams p = base;
    for (uint64_t s = 0; s < 50000; ++s) {
      p.seed = s;
      ++counts[DrawToken(row.data(), 20, p)];
    }
    EXPECT_GT(GoodnessOfFitP(counts, prob), 1e-3) << "T " << base.temperature;
    // The same test rejects a distribution that is slightly off (the top token 10% likelier).
    std::vector<double> skew = prob;
    skew[std::max_element(prob.begin(), prob.end()) - prob.begin()] *= 1.1;
    double z = 0;
    for (double v : skew) z += v;
    for (double& v : skew) v /= z;
    EXPECT_LT(GoodnessOfFitP(counts, skew), 1e-6);
  }
}

// --- seeds --------------------------------------------------------------------------------------

TEST(SpeculativeSeedsTest, KeyedByOutputIndexInSeparateStreams) {
  EXPECT_EQ(DraftSeed(9, 4, 2), DraftSeed(9, 6, 0));
  EXPECT_EQ(AcceptSeed(9, 4, 2), AcceptSeed(9, 5, 1));
  EXPECT_NE(DraftSeed(9, 4, 0), AcceptSeed(9, 4, 0));
  EXPECT_NE(DraftSeed(9, 4, 0), RowSeed(9, 4));
  EXPECT_NE(AcceptSeed(9, 4, 0), RowSeed(9, 4));
  EXPECT_NE(DraftSeed(9, 4, 0), DraftSeed(10, 4, 0));
  EXPECT_NE(DraftSeed(9, 4, 0), DraftSeed(9, 4, 1));
}

// --- greedy -----------------------------------------------------------------------------------

TEST(VerifyDraftsTest, GreedyAcceptsTheLongestMatchingPrefix) {
  constexpr int kK = 5;
  constexpr int64_t kV = 50;
  std::vector<std::vector<float>> rows;
  std::vector<const float*> target_rows, draft_rows;
  std::vector<int32_t> best;
  for (int j = 0; j <= kK; ++j) {
    rows.push_back(RandomRow(kV, 300 + j, j % 2 == 0));
    best.push_back(
        static_cast<int32_t>(std::max_element(rows[j].begin(), rows[j].end()) - rows[j].begin()));
  }
  for (int j = 0; j <= kK; ++j) target_rows.push_back(rows[j].data());
  for (int j = 0; j < kK; ++j) draft_rows.push_back(rows[(j + 3) % (kK + 1)].data());
  const std::vector<uint64_t> accept_seeds = {1, 2, 3, 4, 5};
  for (const DrawParams& target : {Params(0), Params(1.3f, 1), Params(-1)}) {
    const std::vector<DrawParams> target_draws(kK + 1, target);
    for (int m = 0; m <= kK; ++m) {
      std::vector<int32_t> drafts(best.begin(), best.begin() + kK);
      if (m < kK) drafts[m] = (best[m] + 1 + m) % kV;
      // What the drafter did does not matter: greedy or sampled, with or without its rows.
      for (const DrawParams& draft : {Params(0), Params(1, 0, 0.5f)}) {
        const std::vector<DrawParams> draft_draws(kK, draft);
        for (bool with_rows : {false, true}) {
          const VerifyOutcome o = VerifyDrafts(target_rows, kV, target_draws,
                                               with_rows ? std::span<const float* const>(draft_rows)
                                                         : std::span<const float* const>(),
                                               draft_draws, drafts, accept_seeds);
          EXPECT_EQ(o.accepted, m);
          EXPECT_EQ(o.next, best[m]);
        }
      }
    }
  }
  // No drafts: the next token is the target's own draw.
  const std::vector<DrawParams> one = {Params(0)};
  const VerifyOutcome o = VerifyDrafts(std::span(target_rows).first(1), kV, one, {}, {}, {}, {});
  EXPECT_EQ(o.accepted, 0);
  EXPECT_EQ(o.next, best[0]);
}

// --- sampled verification, unit level ----------------------------------------------------------

TEST(VerifyDraftsTest, EqualDistributionsAlwaysAccept) {
  // p == q: the ratio is exactly 1, so every draft drawn from q is accepted.
  constexpr int kK = 3;
  constexpr int64_t kV = 40;
  std::vector<std::vector<float>> rows;
  std::vector<const float*> ptrs;
  for (int j = 0; j <= kK; ++j) rows.push_back(RandomRow(kV, 500 + j, false));
  for (auto& r : rows) ptrs.push_back(r.data());
  for (const DrawParams& base : {Params(1), Params(0.8f, 5, 1, 0.05f), Params(1, 0, 0.8f)}) {
    for (uint64_t s = 0; s < 300; ++s) {
      std::vector<DrawParams> td(kK + 1, base), dd(kK, base);
      std::vector<int32_t> drafts;
      std::vector<uint64_t> as;
      for (int j = 0; j <= kK; ++j) td[j].seed = RowSeed(s, j);
      for (int j = 0; j < kK; ++j) {
        dd[j].seed = DraftSeed(s, 0, j);
        drafts.push_back(DrawToken(ptrs[j], kV, dd[j]));
        as.push_back(AcceptSeed(s, 0, j));
      }
      const VerifyOutcome o = VerifyDrafts(ptrs, kV, td, std::span(ptrs).first(kK), dd, drafts, as);
      ASSERT_EQ(o.accepted, kK);
      ASSERT_EQ(o.next, DrawToken(ptrs[kK], kV, td[kK]));
    }
  }
}

TEST(VerifyDraftsTest, AcceptanceRateIsMinOfOneAndTheRatio) {
  constexpr int64_t kV = 10;
  const std::vector<float> target = RandomRow(kV, 41, false), draft = RandomRow(kV, 42, false);
  const std::vector<const float*> trows = {target.data(), target.data()};
  const std::vector<const float*> drows = {draft.data()};
  const KeptMasses p = ComputeKeptMasses(target.data(), kV, Params(1));
  const KeptMasses q = ComputeKeptMasses(draft.data(), kV, Params(1));
  int checked = 0;
  for (int32_t d = 0; d < kV; ++d) {
    const double ratio =
        (double(p.MassOf(d)) / double(p.total)) / (double(q.MassOf(d)) / double(q.total));
    if (ratio > 0.95) continue;
    ++checked;
    constexpr int kN = 20000;
    int accepted = 0;
    for (uint64_t s = 0; s < kN; ++s) {
      const std::vector<DrawParams> td = {Params(1), Params(1)}, dd = {Params(1)};
      const std::vector<uint64_t> as = {AcceptSeed(s, 0, 0)};
      const std::vector<int32_t> drafts = {d};
      accepted += VerifyDrafts(trows, kV, td, drows, dd, drafts, as).accepted;
    }
    const double sd = std::sqrt(ratio * (1 - ratio) / kN);
    EXPECT_NEAR(double(accepted) / kN, ratio, 5 * sd + 1e-9) << "draft " << d;
  }
  EXPECT_GT(checked, 2);
}

TEST(VerifyDraftsTest, UndrawableDraftIsARejectionAndTheResidualIsDrawn) {
  constexpr int64_t kV = 30;
  std::vector<float> target = RandomRow(kV, 61, false);
  const std::vector<float> draft = RandomRow(kV, 62, false);
  const DrawParams tparams = Params(1), dparams = Params(1, 3);
  const KeptMasses q = ComputeKeptMasses(draft.data(), kV, dparams);
  int32_t d = 0;
  while (q.MassOf(d) != 0) ++d;
  target[d] = 9;  // the target's favourite, which the drafter cannot draw: q(d) = 0
  const KeptMasses p = ComputeKeptMasses(target.data(), kV, tparams);
  std::vector<double> residual(kV, 0);
  double z = 0;
  for (int32_t i = 0; i < kV; ++i) {
    residual[i] = std::max(
        0.0, double(p.MassOf(i)) / double(p.total) - double(q.MassOf(i)) / double(q.total));
    z += residual[i];
  }
  for (double& r : residual) r /= z;
  const std::vector<const float*> trows = {target.data(), target.data()}, drows = {draft.data()};
  std::vector<int64_t> counts(kV, 0);
  for (uint64_t s = 0; s < 30000; ++s) {
    std::vector<DrawParams> td = {tparams, tparams}, dd = {dparams};
    td[0].seed = RowSeed(s, 0);
    const std::vector<uint64_t> as = {AcceptSeed(s, 0, 0)};
    const std::vector<int32_t> drafts = {d};
    const VerifyOutcome o = VerifyDrafts(trows, kV, td, drows, dd, drafts, as);
    ASSERT_EQ(o.accepted, 0);
    ASSERT_GT(residual[o.next], 0);
    ++counts[o.next];
  }
  EXPECT_GT(GoodnessOfFitP(counts, residual), 1e-3);

  // Out-of-vocabulary drafts are rejections too.
  for (int32_t bad : {-1, int32_t{kV}}) {
    std::vector<DrawParams> td = {tparams, tparams}, dd = {dparams};
    const std::vector<uint64_t> as = {7};
    const std::vector<int32_t> drafts = {bad};
    const VerifyOutcome o = VerifyDrafts(trows, kV, td, drows, dd, drafts, as);
    EXPECT_EQ(o.accepted, 0);
    EXPECT_GT(residual[o.next], 0);
  }

  // p == q and q(d) == 0: the residual is empty, the replacement is the target's own draw.
  const std::vector<const float*> same = {draft.data(), draft.data()};
  for (uint64_t s = 0; s < 100; ++s) {
    std::vector<DrawParams> td = {dparams, dparams}, dd = {dparams};
    td[0].seed = RowSeed(s, 0);
    const std::vector<uint64_t> as = {AcceptSeed(s, 0, 0)};
    const std::vector<int32_t> drafts = {d};
    const VerifyOutcome o = VerifyDrafts(same, kV, td, std::span(same).first(1), dd, drafts, as);
    EXPECT_EQ(o.accepted, 0);
    EXPECT_EQ(o.next, DrawToken(draft.data(), kV, td[0]));
  }
}

TEST(VerifyDraftsTest, LargeVocabularyNeedsNoMoreThan128Bits) {
  // 2^14 tokens with flat logits: totals near 2^46, mass x total products near 2^78 and a
  // residual total near 2^76, where 64-bit arithmetic would overflow. Target uniform; the drafter
  // favours token d 4:1, so p(d)/q(d) = (V + 3) / (4V) and the residual is uniform over the rest.
  constexpr int64_t kV = 1 << 14;
  const int32_t d = 5;
  std::vector<float> target(kV, 0.f), draft(kV, 0.f);
  draft[d] = std::log(4.f);
  const std::vector<const float*> trows = {target.data(), target.data()}, drows = {draft.data()};
  constexpr int kN = 2000;
  int accepted = 0;
  std::vector<int64_t> buckets(16, 0);
  for (uint64_t s = 0; s < kN; ++s) {
    std::vector<DrawParams> td = {Params(1), Params(1)}, dd = {Params(1)};
    td[0].seed = RowSeed(s, 0);
    const std::vector<uint64_t> as = {AcceptSeed(s, 0, 0)};
    const std::vector<int32_t> drafts = {d};
    const VerifyOutcome o = VerifyDrafts(trows, kV, td, drows, dd, drafts, as);
    if (o.accepted == 1) {
      ++accepted;
    } else {
      ASSERT_NE(o.next, d);
      ++buckets[o.next >> 10];
    }
  }
  const KeptMasses q = ComputeKeptMasses(draft.data(), kV, Params(1));
  const double ratio = (1.0 / kV) / (double(q.MassOf(d)) / double(q.total));
  EXPECT_NEAR(ratio, 0.25, 1e-4);
  EXPECT_NEAR(double(accepted) / kN, ratio, 5 * std::sqrt(ratio * (1 - ratio) / kN));
  EXPECT_GT(GoodnessOfFitP(buckets, std::vector<double>(16, 1.0 / 16)), 1e-3);
}

TEST(VerifyDraftsTest, GreedyDrafterNeedsNoRows) {
  // A greedy drafter's q is the point mass at its draft: the rows add nothing.
  constexpr int kK = 2;
  constexpr int64_t kV = 16;
  std::vector<std::vector<float>> t, dr;
  std::vector<const float*> trows, drows;
  for (int j = 0; j <= kK; ++j) t.push_back(RandomRow(kV, 700 + j, false));
  for (int j = 0; j < kK; ++j) dr.push_back(RandomRow(kV, 800 + j, false));
  for (auto& r : t) trows.push_back(r.data());
  for (auto& r : dr) drows.push_back(r.data());
  std::vector<int32_t> drafts;
  for (int j = 0; j < kK; ++j) drafts.push_back(DrawToken(drows[j], kV, Params(0)));
  int accepted = 0;
  for (uint64_t s = 0; s < 500; ++s) {
    std::vector<DrawParams> td(kK + 1, Params(1.2f)), dd(kK, Params(0));
    std::vector<uint64_t> as;
    for (int j = 0; j <= kK; ++j) td[j].seed = RowSeed(s, j);
    for (int j = 0; j < kK; ++j) as.push_back(AcceptSeed(s, 0, j));
    const VerifyOutcome a = VerifyDrafts(trows, kV, td, drows, dd, drafts, as);
    const VerifyOutcome b = VerifyDrafts(trows, kV, td, {}, dd, drafts, as);
    ASSERT_EQ(a.accepted, b.accepted);
    ASSERT_EQ(a.next, b.next);
    accepted += a.accepted;
  }
  EXPECT_GT(accepted, 0);
}

TEST(VerifyDraftsDeathTest, MismatchedSpansAbort) {
  const std::vector<float> row = RandomRow(8, 1, false);
  const std::vector<const float*> two = {row.data(), row.data()}, one = {row.data()};
  const std::vector<DrawParams> p2 = {Params(1), Params(1)}, p1 = {Params(1)};
  const std::vector<int32_t> d1 = {0};
  const std::vector<uint64_t> s1 = {0};
  EXPECT_DEATH(VerifyDrafts(one, 8, p2, one, p1, d1, s1), "CHECK failed");  // K+1 target rows
  EXPECT_DEATH(VerifyDrafts(two, 8, p1, one, p1, d1, s1), "CHECK failed");  // K+1 target draws
  EXPECT_DEATH(VerifyDrafts(two, 8, p2, two, p1, d1, s1), "CHECK failed");  // K draft rows
  EXPECT_DEATH(VerifyDrafts(two, 8, p2, one, p2, d1, s1), "CHECK failed");  // K draft draws
  EXPECT_DEATH(VerifyDrafts(two, 8, p2, one, p1, d1, {}), "CHECK failed");  // K accept seeds
  // A sampled target and a sampled drafter without its rows: q is unknown.
  EXPECT_DEATH(VerifyDrafts(two, 8, p2, {}, p1, d1, s1), "CHECK failed");
}

// --- distribution equality on a toy model ------------------------------------------------------

constexpr int64_t kToyV = 12;
constexpr int kToyLen = 3;  // tokens generated per request
constexpr int kDraws = 100000;

// Logits of the next token after `prefix`: pseudo-random, prefix-dependent. The drafter's are a
// different function, correlated with the target's so that it is right some of the time.
void TargetLogits(std::span<const int32_t> prefix, float* out) {
  uint64_t h = 0x1234;
  for (int32_t t : prefix) h = SplitMix64(h ^ static_cast<uint64_t>(t + 1));
  for (int64_t v = 0; v < kToyV; ++v) out[v] = static_cast<float>((Uniform(h + v) - 0.5) * 6);
}
void DraftLogits(std::span<const int32_t> prefix, float* out) {
  TargetLogits(prefix, out);
  uint64_t h = 0x9876;
  for (int32_t t : prefix) h = SplitMix64(h ^ static_cast<uint64_t>(t + 1));
  for (int64_t v = 0; v < kToyV; ++v) {
    out[v] = static_cast<float>(0.8 * out[v] + (Uniform(h + v) - 0.5) * 4);
  }
}

int Code(const std::vector<int32_t>& t) { return (t[0] * kToyV + t[1]) * kToyV + t[2]; }

std::vector<int64_t> NonSpeculative(const DrawParams& params, uint64_t seed0) {
  std::vector<int64_t> counts(kToyV * kToyV * kToyV, 0);
  float row[kToyV];
  for (uint64_t s = seed0; s < seed0 + kDraws; ++s) {
    std::vector<int32_t> out;
    for (int i = 0; i < kToyLen; ++i) {
      TargetLogits(out, row);
      DrawParams p = params;
      p.seed = RowSeed(s, i);
      out.push_back(DrawToken(row, kToyV, p));
    }
    ++counts[Code(out)];
  }
  return counts;
}

using Verifier = VerifyOutcome (*)(std::span<const float* const>, int64_t,
                                   std::span<const DrawParams>, std::span<const float* const>,
                                   std::span<const DrawParams>, std::span<const int32_t>,
                                   std::span<const uint64_t>);

// Wrong verifiers, to show the test can fail. The first accepts everything (the output is then
// the drafter's); the second accepts correctly but replaces a rejection with a draw from p
// instead of norm(max(0, p - q)) (a classic bug).
VerifyOutcome AlwaysAccept(std::span<const float* const> t, int64_t vocab,
                           std::span<const DrawParams> td, std::span<const float* const>,
                           std::span<const DrawParams>, std::span<const int32_t> drafts,
                           std::span<const uint64_t>) {
  return {static_cast<int>(drafts.size()), DrawToken(t[drafts.size()], vocab, td[drafts.size()])};
}
VerifyOutcome ResampleFromTarget(std::span<const float* const> t, int64_t vocab,
                                 std::span<const DrawParams> td, std::span<const float* const> dr,
                                 std::span<const DrawParams> dd, std::span<const int32_t> drafts,
                                 std::span<const uint64_t> as) {
  for (size_t j = 0; j < drafts.size(); ++j) {
    const KeptMasses p = ComputeKeptMasses(t[j], vocab, td[j]);
    const KeptMasses q = ComputeKeptMasses(dr[j], vocab, dd[j]);
    const double ratio = (double(p.MassOf(drafts[j])) / double(p.total)) /
                         (double(q.MassOf(drafts[j])) / double(q.total));
    if (Uniform(as[j]) >= ratio) return {static_cast<int>(j), DrawToken(t[j], vocab, td[j])};
  }
  return {static_cast<int>(drafts.size()), DrawToken(t[drafts.size()], vocab, td[drafts.size()])};
}

struct SpecResult {
  std::vector<int64_t> counts;
  double acceptance = 0;  // accepted drafts / drafts examined
};

SpecResult Speculative(const DrawParams& target, const DrawParams& draft, int k, uint64_t seed0,
                       Verifier verify) {
  SpecResult r;
  r.counts.assign(kToyV * kToyV * kToyV, 0);
  int64_t accepted = 0, examined = 0;
  std::vector<float> trows((k + 1) * kToyV), drows(k * kToyV);
  std::vector<const float*> tp, dp;
  for (int j = 0; j <= k; ++j) tp.push_back(&trows[j * kToyV]);
  for (int j = 0; j < k; ++j) dp.push_back(&drows[j * kToyV]);
  std::vector<DrawParams> td(k + 1, target), dd(k, draft);
  std::vector<uint64_t> as(k);
  std::vector<int32_t> drafts(k);
  for (uint64_t s = seed0; s < seed0 + kDraws; ++s) {
    std::vector<int32_t> out;
    while (out.size() < kToyLen) {
      const int64_t n = static_cast<int64_t>(out.size());
      std::vector<int32_t> ctx = out;
      for (int j = 0; j <= k; ++j) {
        TargetLogits(ctx, &trows[j * kToyV]);
        td[j].seed = RowSeed(s, n + j);
        if (j == k) break;
        DraftLogits(ctx, &drows[j * kToyV]);
        dd[j].seed = DraftSeed(s, n, j);
        drafts[j] = DrawToken(dp[j], kToyV, dd[j]);
        as[j] = AcceptSeed(s, n, j);
        ctx.push_back(drafts[j]);
      }
      const VerifyOutcome o = verify(tp, kToyV, td, dp, dd, drafts, as);
      accepted += o.accepted;
      examined += o.accepted + (o.accepted < k ? 1 : 0);
      out.insert(out.end(), drafts.begin(), drafts.begin() + o.accepted);
      out.push_back(o.next);
    }
    out.resize(kToyLen);
    ++r.counts[Code(out)];
  }
  r.acceptance = double(accepted) / double(examined);
  return r;
}

struct ToyCase {
  const char* name;
  DrawParams target, draft;
};

void PrintTo(const ToyCase& c, std::ostream* os) { *os << c.name; }

class SpeculativeDistributionTest : public ::testing::TestWithParam<ToyCase> {};

TEST_P(SpeculativeDistributionTest, MatchesNonSpeculativeSampling) {
  const ToyCase& c = GetParam();
  const std::vector<int64_t> reference = NonSpeculative(c.target, 0);
  for (int k : {2, 3}) {
    const SpecResult r = Speculative(c.target, c.draft, k, 1000000 * k, VerifyDrafts);
    const double p = TwoSampleP(reference, r.counts);
    EXPECT_GT(p, 1e-3) << c.name << " K=" << k;
    EXPECT_GT(r.acceptance, 0.2) << c.name << " K=" << k;
    EXPECT_LT(r.acceptance, 0.9) << c.name << " K=" << k;
    std::printf("%-22s K=%d: acceptance %.3f, two-sample p %.3g\n", c.name, k, r.acceptance, p);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Toy, SpeculativeDistributionTest,
    ::testing::Values(ToyCase{"T1", Params(1), Params(1)},
                      ToyCase{"T1_topp0.8", Params(1, 0, 0.8f), Params(1, 0, 0.8f)},
                      ToyCase{"T0.8_topk5_minp0.05", Params(0.8f, 5, 1, 0.05f),
                              Params(0.8f, 5, 1, 0.05f)},
                      // A drafter with its own, narrower filters: q's support is not p's.
                      ToyCase{"T1_draft_T0.6_topk4", Params(1), Params(0.6f, 4)}),
    [](const auto& info) {
      std::string s = info.param.name;
      for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return s;
    });

TEST(SpeculativeDistributionTest, RejectsWrongVerifiers) {
  const DrawParams params = Params(1);
  const std::vector<int64_t> reference = NonSpeculative(params, 0);
  const double always =
      TwoSampleP(reference, Speculative(params, params, 2, 5000000, AlwaysAccept).counts);
  const double resample =
      TwoSampleP(reference, Speculative(params, params, 2, 6000000, ResampleFromTarget).counts);
  std::printf("wrong verifiers: always-accept p %.3g, resample-from-p p %.3g\n", always, resample);
  EXPECT_LT(always, 1e-6);
  EXPECT_LT(resample, 1e-6);
}

}  // namespace
}  // namespace gannet::spec
