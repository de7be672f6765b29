// Deterministic random weights with the exact tensor names and shapes of a Gemma-4 checkpoint.
//
// Used to write the tiny test checkpoints (`gannet make-tiny`) and, through FillSyntheticWeight,
// by backends that build a real-size "dummy" model without any checkpoint. Values depend only on
// (seed, tensor name, element index), so a checkpoint regenerates bit for bit.
#pragma once

#include <cstdint>
#include <string>

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

// Fills `count` elements of a tensor described by `spec`, starting at element `offset`, as bf16
// (or int64 for index tensors), into out.
void FillSyntheticBf16(const WeightSpec& spec, uint64_t seed, int64_t offset, int64_t count,
                       uint16_t* out);

// Writes config.json and the safetensors file(s) for `config_json` into dir (which must exist).
absl::Status WriteSyntheticCheckpoint(const Json& config_json, const std::string& dir,
                                      const SyntheticOptions& options);

}  // namespace gannet::model
