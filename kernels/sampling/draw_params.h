// The one sampling row of gannet: what a logits row is drawn with, from the C ABI's request
// mapping (a request's sampling::SamplingParams is a DrawParams plus its penalties) through the
// scheduler, the host sampler, the speculative verifier and Backend::Sample down to the CUDA
// sampling kernel, which reads an array of them. Plain C++ (no CUDA, no lib/): kernels/ and lib/
// share this one definition; the constexpr greedy() is callable in device code
// (--expt-relaxed-constexpr, cmake/GannetWarnings.cmake).
#pragma once

#include <cstdint>

namespace gannet::kernels {

struct DrawParams {
  // The default is greedy, as gannet.h documents for gannet_request_t.temperature (0 = greedy).
  float temperature = 0.0f;
  int32_t top_k = 0;   // <= 0 or >= vocab: off
  float top_p = 1.0f;  // >= 1: off
  float min_p = 0.0f;  // <= 0: off
  // A request's seed in its SamplingParams; a row's, RowSeed(request seed, output index), once
  // the request becomes rows (sampling::RowDrawParams).
  uint64_t seed = 0;

  // The one greedy rule: the draw is the arg-max (ties to the lowest id) and uses no randomness.
  // top_k == 1 keeps only the arg-max, so it is greedy whatever the temperature.
  constexpr bool greedy() const { return temperature <= 0.0f || top_k == 1; }

  // The greedy row: what rows that only need the arg-max (padding, greedy drafts) draw with.
  static constexpr DrawParams Greedy() { return DrawParams{}; }
};
// The layout the device reads (Backend::Sample's params: rows x 24 bytes).
static_assert(sizeof(DrawParams) == 24 && alignof(DrawParams) == 8, "DrawParams is 24 bytes");

}  // namespace gannet::kernels
