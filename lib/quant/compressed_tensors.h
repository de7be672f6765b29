// config.json's `quantization_config` for compressed-tensors checkpoints, read strictly.
//
// gannet loads `format: pack-quantized` with int4 weight-only schemes (W4A16: symmetric or with
// zero points; strategy group with group_size 32/64/128, or channel) and `float-quantized` (or
// `naive-quantized`) FP8 E4M3 weights (strategy channel, tensor or 128x128 block) with FP8 input
// activations dynamic per token (or per token group), static (an input_scale tensor) or none. Every
// field of the config, of each config group and of its weight arguments is checked: a field gannet
// does not know, or a value that would change what the tensors mean (activation quantization,
// another format or bit width, a KV-cache scheme, sparsity, transforms, activation-ordered groups),
// is an error naming the field and what gannet expects, never ignored. Calibration-only fields
// (observer, observer_kwargs, global_compression_ratio, version) are accepted and unused.
// docs/quantized-formats.md describes the format as the code reads it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/dtype.h"
#include "lib/common/json.h"

namespace gannet::quant {

// One config group: the modules it targets and how their weights are stored.
struct CtScheme {
  std::string name;                  // the config_groups key ("group_0")
  std::vector<std::string> targets;  // module class names ("Linear") or "re:" regexes of names
  bool symmetric = true;             // false: kU4 with zero points
  bool per_channel = false;          // strategy channel (one scale per output row)
  int group_size = 0;                // strategy group: 32, 64 or 128
  // kI4: pack-quantized int4 (weight_packed); kF8E4M3: float-quantized FP8 (an F8_E4M3 `weight`);
  // kF4E2M1: nvfp4-pack-quantized (weight_packed bytes, FP8 scales per 16, a global scale).
  DType elem = DType::kI4;
  bool per_tensor = false;  // FP8 strategy tensor (one scale)
  int block_rows = 0;       // FP8 strategy block: block_structure [128, 128]
  int block_cols = 0;
  ActivationQuant act = ActivationQuant::kNone;  // FP8 input_activations
  int act_group = 0;                             // dynamic per-token groups (FP8_BLOCK: 128)

  // NVIDIA ModelOpt's NVFP4 (lib/quant/modelopt.h): tensors `weight` / `weight_scale_2` /
  // `input_scale` and global scales that multiply, read into this same form.
  bool modelopt = false;

  bool fp8() const { return elem == DType::kF8E4M3; }
  bool nvfp4() const { return elem == DType::kF4E2M1; }
  // The weight's format for an input width k and the scale type its tensor holds.
  WeightFormat Format(int64_t k, DType scale_type) const;
};

struct CtConfig {
  std::vector<CtScheme> schemes;
  std::vector<std::string> ignore;  // module names or "re:" regexes, checked before targets
};

// Parses `q` (the quantization_config object); `source` prefixes errors ("dir/config.json").
// InvalidArgument for malformed values; Unimplemented for well-formed schemes gannet does not run.
absl::StatusOr<CtConfig> ParseCompressedTensorsConfig(const Json& q, std::string_view source);

// compressed-tensors' name match: "re:<regex>" matches when the regex matches at the start of
// `name` (Python's re.match), any other target only `name` exactly.
bool CtNameMatches(std::string_view name, std::string_view target);

// The scheme that quantizes module `module_name` of class `class_name` ("Linear", "Embedding"),
// or nullptr when no scheme targets it or `ignore` names it (by module name, regex or class).
const CtScheme* CtSchemeFor(const CtConfig& config, std::string_view module_name,
                            std::string_view class_name);

// The quantization_config compressed-tensors writes for one scheme over `targets`, leaving out
// `ignore` (what `gannet quantize` writes into config.json): int4 (`per_channel` says channel
// rather than group), or FP8 E4M3 (format.granularity and format.act give the weight strategy
// and the input activations, as llm-compressor's FP8_DYNAMIC / FP8_BLOCK presets write them).
Json CtConfigJson(const WeightFormat& format, bool per_channel,
                  const std::vector<std::string>& targets, const std::vector<std::string>& ignore);

}  // namespace gannet::quant
