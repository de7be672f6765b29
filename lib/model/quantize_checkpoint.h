// `gannet quantize`: a bf16 (or f16/f32) Gemma-4 checkpoint folder to a compressed-tensors
// pack-quantized int4 checkpoint (docs/quantized-formats.md), as llm-compressor's round-to-nearest
// W4A16 scheme writes it (or float-quantized FP8: `.weight` in F8_E4M3 and `.weight_scale`, as
// its FP8_DYNAMIC / FP8_BLOCK presets write them): weight_packed / weight_scale / weight_shape (and
// weight_zero_point when asymmetric) per quantized Linear module, scales in the weight's own type,
// and a quantization_config (config group "group_0" targeting Linear, with an `ignore` list) in
// config.json. What is quantized: every Linear of the text decoder (attention, MLP, PLE
// gate/projection, the MoE experts as per-expert modules experts.{i}.{gate,up,down}_proj, which is
// how compressed-tensors stores quantized MoE experts). Kept as they are, and named in `ignore`:
// the LM head, the router, the PLE model projection, the vision/audio towers, and any module whose
// input width is not a multiple of the group size. Embeddings and norms are not Linear modules
// and stay as they are. Every other file of the folder (tokenizer, chat template, ...) is copied.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/dtype.h"

namespace gannet::model {

struct QuantizeOptions {
  int group_size = 32;    // int4: 32, 64 or 128; 0: per output channel
  bool symmetric = true;  // int4: false: asymmetric (kU4 with zero points)
  // Set: FP8 E4M3 weights instead of int4 (compressed-tensors float-quantized): the weight
  // strategy (kChannel, kTensor, or kBlock 128x128) and the input activations written into the
  // config, the scales stored in the weight's own type; or NVFP4 (WeightFormat::Nvfp4(),
  // nvfp4-pack-quantized, weight-only: NVFP4A16).
  std::optional<WeightFormat> float_format;
};

// Parses "int4-g32", "int4-g64", "int4-g128", "int4-channel" (each optionally "-asym"), and the
// FP8 schemes: "fp8-channel" (llm-compressor's FP8_DYNAMIC: per-channel weights, activations
// dynamic per token), "fp8-block" (FP8_BLOCK: 128x128 weight blocks, activations dynamic per 128
// inputs of a token), "fp8-tensor" (one weight scale per module, activations dynamic per token),
// "nvfp4" (NVFP4A16: FP4 weights, FP8 scales per 16 inputs, a global scale; weight-only).
absl::StatusOr<QuantizeOptions> ParseWeightDtype(std::string_view spec);

// The int4 format of `o` (float_format unset) with scales of `scale_type`; group_size 0 (per
// channel) stays 0 for the caller to set to each weight's K.
WeightFormat Int4FormatOf(const QuantizeOptions& o, DType scale_type);

struct QuantizeReport {
  int64_t quantized_modules = 0;
  int64_t kept_modules = 0;  // Linear modules left as they were (ignored)
  uint64_t bytes_in = 0, bytes_out = 0;
  std::vector<std::string> ignore;  // as written into config.json
};

// Writes the quantized checkpoint of `src_dir` into `dst_dir` (created; must not be src_dir).
// Target models only (an assistant checkpoint is Unimplemented); a checkpoint that is already
// quantized is refused by the config reader.
absl::StatusOr<QuantizeReport> QuantizeCheckpoint(const std::string& src_dir,
                                                  const std::string& dst_dir,
                                                  const QuantizeOptions& options);

}  // namespace gannet::model
