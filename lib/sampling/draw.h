// The token draw shared by every sampling path: the host sampler (lib/sampling/sampling.h), the
// CPU backend's Backend::Sample and, bit for bit up to exp() rounding, the CUDA sampling kernel.
// One definition means a request gets the same tokens whichever path serves it.
//
// Greedy (DrawParams::greedy(): temperature <= 0 or top_k == 1): the arg-max, ties to the lowest
// id. Otherwise, with w = exp((x - max x) / temperature) and q = floor(w * 2^32): keep logits >=
// the top_k-th largest; then keep logits >= the largest threshold whose kept q-mass reaches top_p x
// the top-k q-mass; then keep w >= min_p; the token is the first, in id order, at which the running
// kept q-mass exceeds floor(u x total kept q-mass), u = (SplitMix64(seed) >> 11) / 2^53.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/sampling/draw_params.h"

namespace gannet::sampling {

// One row's draw (kernels/sampling/draw_params.h, the one sampling-row struct): what a request's
// SamplingParams (sampling.h) become for output token `step` (RowDrawParams), and what
// Backend::Sample and the CUDA sampling kernel read per logits row.
using kernels::DrawParams;

// Token ids per row that a backend masks to -inf before the draw (a request's stop ids while it is
// short of min_tokens); rows with more are sampled on the host.
inline constexpr int kBanSlots = 8;

int32_t DrawToken(const float* logits, int64_t vocab, const DrawParams& params);

// The arg-max of a row, ties to the lowest id: the greedy token.
int64_t ArgMax(const float* logits, int64_t vocab);

// The fixed-point masses a sampled (non-greedy) DrawToken draws from: (*mass)[i] = q_i for the
// kept ids and 0 for the others (resized to vocab); returns their sum, <= vocab x 2^32. DrawToken
// draws through this very function, so other code (spec/speculative.h) sees exactly its
// distribution. The sum is 0 only when nothing is kept (min_p > 1, which ValidateSamplingParams
// rejects, or non-finite logits); DrawToken then returns the arg-max. `params.seed` is not read.
uint64_t KeptMass(const float* logits, int64_t vocab, const DrawParams& params,
                  std::vector<uint64_t>* mass);

// The seed of output token `step` of a request seeded with `request_seed`.
uint64_t RowSeed(uint64_t request_seed, uint64_t step);

}  // namespace gannet::sampling
