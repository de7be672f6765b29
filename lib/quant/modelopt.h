// NVIDIA ModelOpt's quantization config (hf_quant_config.json, or config.json's
// quantization_config with quant_method "modelopt"), read strictly for its NVFP4 checkpoints.
//
// gannet reads ModelOpt's NVFP4 as the same NVFP4 weights as compressed-tensors' (FP4 E2M1 pairs
// in uint8, FP8 E4M3 scales per 16 inputs, a per-tensor f32 scale), with its own tensor names
// (`weight`, `weight_scale`, `weight_scale_2`, `input_scale`) and its own global scale, which
// multiplies where compressed-tensors' divides (docs/quantized-formats.md §6). The config
// becomes a quant::CtConfig (the one form the binder reads) whose schemes have `modelopt` set:
//   quant_algo NVFP4            one scheme targeting every Linear, `exclude_modules` (globs, `*`
//                               and `?`) as `ignore`
//   quant_algo MIXED_PRECISION  one scheme per NVFP4 entry of `quantized_layers` (by exact
//                               module name); any other algorithm there is UNIMPLEMENTED
// Everything else (FP8 and the other algorithms, group sizes other than 16, a KV-cache
// algorithm, unknown fields) is an error naming the field.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "lib/common/json.h"
#include "lib/quant/compressed_tensors.h"

namespace gannet::quant {

// `q` is either hf_quant_config.json's root ({"producer", "quantization": {...}}) or config.json's
// flat quantization_config ({"quant_method": "modelopt", "quant_algo", ...}); `source` prefixes
// errors.
absl::StatusOr<CtConfig> ParseModeloptConfig(const Json& q, std::string_view source);

}  // namespace gannet::quant
