#include "lib/sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lib/common/status.h"

namespace gannet::sampling {
namespace {

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

}  // namespace

void ApplyPenalties(const SamplingParams& p, const TokenCounts& counts, std::vector<float>* l) {
  auto& logits = *l;
  if (p.repetition_penalty != 1.0f) {
    auto penalise = [&](int32_t t) {
      if (t < 0 || t >= static_cast<int32_t>(logits.size())) return;
      logits[t] =
          logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
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

DrawParams RowDrawParams(const SamplingParams& p, uint64_t step) {
  DrawParams row = p;  // the draw part of the request's params
  row.seed = RowSeed(p.seed, step);
  return row;
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
  r.token = p.greedy() ? Argmax(work) : DrawToken(work.data(), vocab, RowDrawParams(p, step));
  if (top_logprobs > 0) FillLogprobs(logits, top_logprobs, &r);
  return r;
}

void FillLogprobs(std::span<const float> logits, int top_logprobs, SampleResult* r) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double z = 0;
  for (float v : logits) z += std::exp(static_cast<double>(v - mx));
  const double lse = mx + std::log(z);
  r->logprob = static_cast<float>(logits[r->token] - lse);
  const int n = std::min(top_logprobs, vocab);
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  r->top_ids.clear();
  r->top_logprobs.clear();
  for (int i = 0; i < n; ++i) {
    r->top_ids.push_back(ids[i]);
    r->top_logprobs.push_back(static_cast<float>(logits[ids[i]] - lse));
  }
}

}  // namespace gannet::sampling
