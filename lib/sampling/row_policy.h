// Where and how one logits row is sampled (ARCHITECTURE.md "Sample").
//
// A row is sampled on the backend (the step's Backend::Sample; no logits cross to the host)
// unless the request needs the logits on the host: penalties, logprobs, or more stop ids to mask
// before min_tokens than the device draw's ban slots. Both paths draw with draw.h, so a request's
// tokens never depend on the path or on the batch. Before min_tokens a request's stop ids are
// masked to -inf: as banned ids on the device, by SampleOnHost on the host.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lib/sampling/draw.h"
#include "lib/sampling/sampling.h"

namespace gannet::sampling {

// One row's request: its parameters and how far it is.
struct RowRequest {
  const SamplingParams* params = nullptr;
  int32_t logprobs = 0;
  int64_t num_output = 0;  // tokens generated so far: the output index this row samples
  int32_t min_tokens = 0;
  std::span<const int32_t> stop_token_ids;  // sorted, unique, inside the vocabulary
};

struct RowChoice {
  DrawParams draw;                  // what the device draws with
  bool host = false;                // copy the logits and sample with SampleOnHost
  std::span<const int32_t> banned;  // device path: ids masked before the draw (<= kBanSlots)
};

RowChoice ChooseRowSampling(const RowRequest& row);

// The rows of a speculative verify chunk with `num_drafts` drafts: row j samples output index
// row.num_output + j. Greedy requests keep the device draw per row (the acceptance test compares
// arg-maxes); requests that sample need every row on the host (rejection sampling, spec/verify.h),
// as does every row of a chunk where one row needs the host.
std::vector<RowChoice> ChooseVerifySampling(const RowRequest& row, int num_drafts);

// The logits a host draw of `row` uses: stop ids masked to -inf before min_tokens, then the
// penalties over the request's counts plus `pending` output tokens (drafts assumed accepted
// before this row).
void PrepareRowLogits(std::span<const float> logits, const RowRequest& row,
                      const TokenCounts* counts, std::span<const int32_t> pending,
                      std::vector<float>* out);

// The host path: stop ids masked before min_tokens, then penalties, draw and logprobs (Sample).
// `row_scratch` and `scratch` are reused between calls.
SampleResult SampleOnHost(std::span<const float> logits, const RowRequest& row,
                          const TokenCounts* counts, std::vector<float>* row_scratch,
                          std::vector<float>* scratch);

}  // namespace gannet::sampling
