#include "lib/sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lib/common/status.h"

namespace gannet::sampling {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int32_t Argmax(std::span<const float> v) {
  // First maximum: ties go to the lowest id; NaN never wins.
  int32_t best = 0;
  float bv = -INFINITY;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] > bv) {
      bv = v[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

void ApplyPenalties(const SamplingParams& p, const TokenCounts& counts, std::vector<float>* l) {
  auto& logits = *l;
  if (p.repetition_penalty != 1.0f) {
    auto penalise = [&](int32_t t) {
      if (t < 0 || t >= static_cast<int32_t>(logits.size())) return;
      logits[t] = logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
    };
    for (const auto& [t, n] : counts.prompt()) penalise(t);
    for (const auto& [t, n] : counts.output()) {
      if (!counts.prompt().contains(t)) penalise(t);
    }
  }
  for (const auto& [t, n] : counts.output()) {
    if (t < 0 || t >= static_cast<int32_t>(logits.size())) continue;
    logits[t] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
  }
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  auto finite = [](float v) { return std::isfinite(v); };
  if (!finite(p.temperature) || p.temperature < 0) {
    return InvalidArgumentError("sampling: temperature must be >= 0, got {}", p.temperature);
  }
  if (p.top_k < 0) return InvalidArgumentError("sampling: top_k must be >= 0, got {}", p.top_k);
  if (!finite(p.top_p) || p.top_p <= 0 || p.top_p > 1) {
    return InvalidArgumentError("sampling: top_p must be in (0, 1], got {}", p.top_p);
  }
  if (!finite(p.min_p) || p.min_p < 0 || p.min_p > 1) {
    return InvalidArgumentError("sampling: min_p must be in [0, 1], got {}", p.min_p);
  }
  if (!finite(p.repetition_penalty) || p.repetition_penalty <= 0) {
    return InvalidArgumentError("sampling: repetition_penalty must be > 0, got {}",
                                p.repetition_penalty);
  }
  if (!finite(p.presence_penalty) || !finite(p.frequency_penalty)) {
    return InvalidArgumentError("sampling: presence/frequency penalties must be finite");
  }
  return absl::OkStatus();
}

void TokenCounts::AddPrompt(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) ++prompt_[t];
}

double CounterUniform(uint64_t seed, uint64_t step) {
  uint64_t x = SplitMix(seed ^ SplitMix(step + 0x632be59bd9b4e019ull));
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);
}

SampleResult Sample(std::span<const float> logits, const SamplingParams& p,
                    const TokenCounts* counts, uint64_t step, int top_logprobs,
                    std::vector<float>* scratch) {
  SampleResult r;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  std::span<const float> work = logits;
  if (counts != nullptr && p.needs_penalties()) {
    scratch->assign(logits.begin(), logits.end());
    ApplyPenalties(p, *counts, scratch);
    work = *scratch;
  }
  if (p.greedy()) {
    r.token = Argmax(work);
  } else {
    // Candidates sorted by (logit desc, id asc), cut by top_k.
    std::vector<int32_t> ids(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    auto better = [&](int32_t a, int32_t b) {
      return work[a] > work[b] || (work[a] == work[b] && a < b);
    };
    int32_t k = p.top_k > 0 ? std::min(p.top_k, vocab) : vocab;
    const bool need_sorted = p.top_k > 0 || p.top_p < 1.0f;
    if (need_sorted) {
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
      ids.resize(k);
    }
    float mx = -INFINITY;
    for (int32_t id : ids) mx = std::max(mx, work[id]);
    std::vector<double> probs(ids.size());
    double sum = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      probs[i] = std::exp(static_cast<double>(work[ids[i]] - mx) / p.temperature);
      sum += probs[i];
    }
    size_t keep = ids.size();
    if (p.top_p < 1.0f) {
      double cum = 0;
      for (size_t i = 0; i < ids.size(); ++i) {
        cum += probs[i] / sum;
        if (cum >= p.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    if (p.min_p > 0.0f) {
      // The top probability is the largest entry (first when sorted).
      double top = *std::max_element(probs.begin(), probs.begin() + keep);
      size_t w = 0;
      for (size_t i = 0; i < keep; ++i) {
        if (probs[i] >= p.min_p * top) {
          probs[w] = probs[i];
          ids[w] = ids[i];
          ++w;
        }
      }
      keep = w;
    }
    double total = 0;
    for (size_t i = 0; i < keep; ++i) total += probs[i];
    double u = CounterUniform(p.seed, step) * total;
    r.token = ids[keep - 1];
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += probs[i];
      if (u < cum) {
        r.token = ids[i];
        break;
      }
    }
  }
  if (top_logprobs > 0) {
    float mx = -INFINITY;
    for (float v : logits) mx = std::max(mx, v);
    double z = 0;
    for (float v : logits) z += std::exp(static_cast<double>(v - mx));
    const double lse = mx + std::log(z);
    r.logprob = static_cast<float>(logits[r.token] - lse);
    int n = std::min(top_logprobs, vocab);
    std::vector<int32_t> ids(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int i = 0; i < n; ++i) {
      r.top_ids.push_back(ids[i]);
      r.top_logprobs.push_back(static_cast<float>(logits[ids[i]] - lse));
    }
  }
  return r;
}

}  // namespace gannet::sampling
