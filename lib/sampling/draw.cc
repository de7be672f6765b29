#include "lib/sampling/draw.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "lib/common/hash.h"

namespace gannet::sampling {
namespace {

// Order-preserving map of a float to uint32 (larger float, larger key).
uint32_t OrderKey(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

}  // namespace

uint64_t RowSeed(uint64_t request_seed, uint64_t step) {
  return SplitMix64(request_seed ^ SplitMix64(step + 0x632be59bd9b4e019ull));
}

int64_t ArgMax(const float* x, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

uint64_t KeptMass(const float* x, int64_t vocab, const DrawParams& sp,
                  std::vector<uint64_t>* mass) {
  const float max_logit = x[ArgMax(x, vocab)];
  const float min_p = sp.min_p > 0.f ? sp.min_p : 0.f;
  std::vector<uint64_t>& q = *mass;
  q.resize(vocab);
  std::vector<float> w(vocab);
  std::vector<uint32_t> key(vocab);
  for (int64_t i = 0; i < vocab; ++i) {
    w[i] = std::exp((x[i] - max_logit) / sp.temperature);
    // floor(w * 2^32): w * 2^32 is exact in float, the conversion truncates.
    q[i] = static_cast<uint64_t>(w[i] * 4294967296.0f);
    key[i] = OrderKey(x[i]);
  }
  uint32_t threshold = 0;
  if (sp.top_k > 0 && sp.top_k < vocab) {
    std::vector<uint32_t> sorted = key;
    std::nth_element(sorted.begin(), sorted.begin() + (sp.top_k - 1), sorted.end(),
                     std::greater<uint32_t>());
    threshold = sorted[sp.top_k - 1];
  }
  if (sp.top_p < 1.f) {
    // Distinct keys from the top, accumulating q until the target mass is reached.
    std::vector<std::pair<uint32_t, uint64_t>> kept;
    uint64_t total = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      if (key[i] >= threshold) {
        kept.push_back({key[i], q[i]});
        total += q[i];
      }
    }
    std::sort(kept.begin(), kept.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    uint64_t target =
        static_cast<uint64_t>(static_cast<double>(sp.top_p) * static_cast<double>(total));
    if (target == 0) target = 1;
    uint64_t acc = 0;
    for (size_t j = 0; j < kept.size();) {
      size_t e = j;
      while (e < kept.size() && kept[e].first == kept[j].first) acc += kept[e++].second;
      if (acc >= target) {
        threshold = std::max(threshold, kept[j].first);
        break;
      }
      j = e;
    }
  }
  uint64_t kept_mass = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!(key[i] >= threshold && w[i] >= min_p)) q[i] = 0;  // a NaN w is dropped
    kept_mass += q[i];
  }
  return kept_mass;
}

int32_t DrawToken(const float* x, int64_t vocab, const DrawParams& sp) {
  if (sp.greedy()) return static_cast<int32_t>(ArgMax(x, vocab));
  std::vector<uint64_t> weight;
  const uint64_t kept_mass = KeptMass(x, vocab, sp, &weight);
  const double u = static_cast<double>(SplitMix64(sp.seed) >> 11) / 9007199254740992.0;
  const uint64_t r = static_cast<uint64_t>(u * static_cast<double>(kept_mass));
  uint64_t run = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    run += weight[i];
    if (run > r) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(ArgMax(x, vocab));  // nothing kept: min_p > 1, non-finite logits
}

}  // namespace gannet::sampling
