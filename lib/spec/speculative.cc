#include "lib/spec/speculative.h"

#include <algorithm>

#include "lib/common/check.h"
#include "lib/common/hash.h"

namespace gannet::spec {
namespace {

// Products of a mass (<= 2^32) and a total (<= 2^50) need 83 bits.
__extension__ typedef unsigned __int128 u128;

constexpr uint64_t kDraftSalt = 0x3c6ef372fe94f82bull;
constexpr uint64_t kAcceptSalt = 0xa54ff53a5f1d36f1ull;

// The 53-bit integer behind DrawToken's u = k / 2^53.
uint64_t U53(uint64_t seed) { return SplitMix64(seed) >> 11; }

// Dense masses (size vocab) of the distribution DrawToken draws from; returns their sum (> 0).
uint64_t DenseMasses(const float* row, int64_t vocab, const sampling::DrawParams& p,
                     std::vector<uint64_t>* m) {
  if (!p.greedy()) {
    const uint64_t total = sampling::KeptMass(row, vocab, p, m);
    if (total > 0) return total;
  }
  m->assign(vocab, 0);
  (*m)[sampling::ArgMax(row, vocab)] = 1;
  return 1;
}

// k / 2^53 < a / b, exactly (b > 0, a and b < 2^126): long division of a·2^53 by b, bit by bit,
// so that nothing wider than the remainder (< 2b) is ever formed.
bool UniformBelow(uint64_t k, u128 a, u128 b) {
  if (a >= b) return true;  // the ratio is >= 1 > k / 2^53
  u128 rem = a;
  uint64_t quot = 0;  // floor(a·2^53 / b) < 2^53
  for (int bit = 0; bit < 53; ++bit) {
    rem <<= 1;
    quot <<= 1;
    if (rem >= b) {
      rem -= b;
      quot |= 1;
    }
  }
  return k < quot || (k == quot && rem > 0);
}

// The replacement after rejecting a draft: a draw from max(0, p - q), i.e. the integer masses
// mp·Tq - mq·Tp where positive, with the target's seed. floor(k·T / 2^53) is formed exactly
// from T's two 64-bit halves (T < 2^101, so k·T_hi < 2^90 and k·T_lo < 2^117).
int32_t DrawResidual(const float* row, int64_t vocab, const sampling::DrawParams& tp,
                     const std::vector<uint64_t>& p, uint64_t tp_total,
                     const std::vector<uint64_t>& q, uint64_t tq_total) {
  auto residual = [&](int64_t i) -> u128 {
    const u128 a = static_cast<u128>(p[i]) * tq_total, b = static_cast<u128>(q[i]) * tp_total;
    return a > b ? a - b : 0;
  };
  u128 total = 0;
  for (int64_t i = 0; i < vocab; ++i) total += residual(i);
  // p == q: only after a q(d) == 0 rejection.
  if (total == 0) return sampling::DrawToken(row, vocab, tp);
  const u128 k = U53(tp.seed);
  const u128 r =
      ((k * static_cast<uint64_t>(total >> 64)) << 11) + ((k * static_cast<uint64_t>(total)) >> 53);
  u128 run = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    run += residual(i);
    if (run > r) return static_cast<int32_t>(i);
  }
  GANNET_CHECK(false);  // r < total, so the loop returns
  return -1;
}

}  // namespace

uint64_t KeptMasses::MassOf(int32_t id) const {
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  return it != ids.end() && *it == id ? mass[it - ids.begin()] : 0;
}

KeptMasses ComputeKeptMasses(const float* logits, int64_t vocab, const sampling::DrawParams& p) {
  std::vector<uint64_t> dense;
  KeptMasses out;
  out.total = DenseMasses(logits, vocab, p, &dense);
  for (int64_t i = 0; i < vocab; ++i) {
    if (dense[i] == 0) continue;
    out.ids.push_back(static_cast<int32_t>(i));
    out.mass.push_back(dense[i]);
  }
  return out;
}

uint64_t DraftSeed(uint64_t request_seed, int64_t num_output, int k) {
  return SplitMix64(sampling::RowSeed(request_seed, static_cast<uint64_t>(num_output + k)) ^
                    kDraftSalt);
}

uint64_t AcceptSeed(uint64_t request_seed, int64_t num_output, int j) {
  return SplitMix64(sampling::RowSeed(request_seed, static_cast<uint64_t>(num_output + j)) ^
                    kAcceptSalt);
}

VerifyOutcome VerifyDrafts(std::span<const float* const> target_rows, int64_t vocab,
                           std::span<const sampling::DrawParams> target_draws,
                           std::span<const float* const> draft_rows,
                           std::span<const sampling::DrawParams> draft_draws,
                           std::span<const int32_t> drafts,
                           std::span<const uint64_t> accept_seeds) {
  const size_t num = drafts.size();
  GANNET_CHECK(target_rows.size() == num + 1 && target_draws.size() == num + 1);
  GANNET_CHECK(draft_draws.size() == num && accept_seeds.size() == num);
  GANNET_CHECK(draft_rows.empty() || draft_rows.size() == num);
  std::vector<uint64_t> p, q;
  for (size_t j = 0; j < num; ++j) {
    const int accepted = static_cast<int>(j);
    const float* row = target_rows[j];
    const sampling::DrawParams& tp = target_draws[j];
    const int32_t d = drafts[j];
    const bool in_vocab = d >= 0 && d < vocab;
    if (tp.greedy()) {
      const int32_t best = static_cast<int32_t>(sampling::ArgMax(row, vocab));
      if (d != best) return {accepted, best};
      continue;
    }
    const uint64_t tp_total = DenseMasses(row, vocab, tp, &p);
    uint64_t tq_total = 1;
    if (!draft_rows.empty()) {
      tq_total = DenseMasses(draft_rows[j], vocab, draft_draws[j], &q);
    } else {
      GANNET_CHECK(draft_draws[j].greedy());  // a sampled q needs its row
      q.assign(vocab, 0);
      if (in_vocab) q[d] = 1;
    }
    const uint64_t mp = in_vocab ? p[d] : 0, mq = in_vocab ? q[d] : 0;
    // Accept iff u < p(d) / q(d) = mp·Tq / (mq·Tp).
    if (mq > 0 && UniformBelow(U53(accept_seeds[j]), static_cast<u128>(mp) * tq_total,
                               static_cast<u128>(mq) * tp_total)) {
      continue;
    }
    return {accepted, DrawResidual(row, vocab, tp, p, tp_total, q, tq_total)};
  }
  return {static_cast<int>(num), sampling::DrawToken(target_rows[num], vocab, target_draws[num])};
}

}  // namespace gannet::spec
