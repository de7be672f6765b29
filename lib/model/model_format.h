// Recognises what a user may hand gannet instead of a bf16 Hugging Face Gemma-4 checkpoint
// folder, so the error names the format and what to do, instead of "cannot open
// model.gguf/config.json: Not a directory" or "missing tensor ...q_proj.weight":
//   - a GGUF file, or a folder of GGUF files (llama.cpp's format);
//   - a single .safetensors file (or any other file) instead of the folder holding it;
//   - quantized checkpoints: GPTQ/AWQ (qweight, qzeros, scales), FP8 and NVFP4 (weight_scale
//     beside 8-bit weights), bitsandbytes (absmax): not supported yet (issue 53 adds them), never
//     silently loaded. compressed-tensors checkpoints are the config reader's
//     (lib/quant/compressed_tensors.h: pack-quantized int4, float-quantized FP8 and NVFP4 load, any
//     other scheme is refused there) and the binder's (quantized_weights.h);
//   - a config.json quantization_config whose method the tensors do not show (plain bf16/f16/f32
//     tensors): the two disagree, so neither is trusted.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"

namespace gannet::model {

// Before config.json is read. Unimplemented for GGUF (the file itself, or a folder without
// config.json that holds .gguf files); InvalidArgument for another file given as the folder.
// OK otherwise (a missing folder or config.json is left to the reader's own error).
absl::Status CheckModelPath(const std::string& model_dir);

// Before the weights are bound. Unimplemented for the tensors of a quantized format (named, with
// an example tensor) or a quantization_config naming any method while the tensors are quantized;
// InvalidArgument when config.json names a quantization method but every weight is a plain
// float tensor.
absl::Status CheckWeightFormat(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace gannet::model
