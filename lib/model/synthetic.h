// Deterministic random weights with the exact tensor names and shapes of a Gemma-4 checkpoint.
//
// Used to write the tiny test checkpoints (`gannet make-tiny`) and, through FillSyntheticWeight,
// by backends that build a real-size "dummy" model without any checkpoint. Values depend only on
// (seed, tensor name, element index), so a checkpoint regenerates bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "lib/common/dtype.h"
#include "lib/common/json.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"

namespace gannet::model {

struct SyntheticOptions {
  uint64_t seed = 0x9a77e7;
  int num_shards = 1;          // > 1 writes model-0000i-of-0000N.safetensors + index.json
  bool tower_tensors = false;  // add small vision/audio tower tensors (skipped by text-only loads)
};

// The generator, specified so other devices can reproduce it: with key = SplitMix64(seed ^
// FNV-1a-64(name)), element i draws a = SplitMix64(key ^ (2i + 1)), b = SplitMix64(a ^
// 0x5851f42d4c957f2d), u1 = ((a >> 11) + 0.5) / 2^53, u2 = (b >> 11) / 2^53, and
// normal = sqrt(-2 ln u1) cos(2 pi u2) (in double), uniform = u1 - 0.5 / 2^53. Values per init:
// kMatrix normal / sqrt(fan_in); kEmbedding 2 normal / sqrt(fan_in); kNorm 1 + normal / 4;
// kQkNorm (1 + normal / 4) / fan_in^(1/4); kLayerScalar 0.6 + 0.4 uniform;
// kPositiveScale 0.5 + uniform; fan_in = the last dimension. Rounded to bf16 (nearest even).
uint64_t SyntheticKey(uint64_t seed, std::string_view name);

// Fills `count` elements of a weight, starting at element `offset`, as bf16 into out.
void FillSyntheticBf16(std::string_view name, WeightInit init, int64_t fan_in, uint64_t seed,
                       int64_t offset, int64_t count, uint16_t* out);

// The integer tensors (token_ordering): a seeded permutation of [0, n), Fisher-Yates with
// j = SplitMix64(key + i) mod (i + 1), key = SplitMix64(seed ^ FNV-1a-64(name)).
std::vector<int64_t> SyntheticPermutation(uint64_t seed, std::string_view name, int64_t n);

// Writes config.json and the safetensors file(s) for `config_json` into dir (which must exist).
absl::Status WriteSyntheticCheckpoint(const Json& config_json, const std::string& dir,
                                      const SyntheticOptions& options);

}  // namespace gannet::model
