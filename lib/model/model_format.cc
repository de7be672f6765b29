#include "lib/model/model_format.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string_view>

#include "fmt/ranges.h"
#include "lib/common/dtype.h"
#include "lib/common/file_util.h"
#include "lib/common/status.h"

namespace gannet::model {
namespace {

constexpr std::string_view kWhatGannetLoads =
    "gannet loads Hugging Face checkpoint folders (config.json, *.safetensors, tokenizer.json) "
    "with bf16 weights, such as google/gemma-4-e4b-it";
constexpr std::string_view kNotYet =
    "of the quantized formats gannet loads compressed-tensors checkpoints (pack-quantized int4, "
    "float-quantized FP8, nvfp4-pack-quantized NVFP4), NVIDIA ModelOpt NVFP4 (with its "
    "hf_quant_config.json), GPTQ and AWQ int4 (with their quantization_config); other FP8 "
    "checkpoints, bitsandbytes and GGUF are not supported yet: use the original bf16 checkpoint";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool EndsWithIgnoreCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  s = s.substr(s.size() - suffix.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(suffix[i]))) {
      return false;
    }
  }
  return true;
}

bool StartsWithGgufMagic(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char magic[4] = {};
  const size_t n = std::fread(magic, 1, sizeof(magic), f);
  std::fclose(f);
  return n == sizeof(magic) && std::string_view(magic, 4) == "GGUF";
}

// The first .gguf file of a folder ("" if none).
std::string FirstGgufFile(const std::string& dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (EndsWithIgnoreCase(name, ".gguf")) return name;
  }
  return "";
}

// Tensor name endings of the quantized formats, and the format each shows.
struct QuantSignature {
  std::string_view suffix;
  std::string_view format;
};
constexpr QuantSignature kQuantSignatures[] = {
    {".qweight", "GPTQ or AWQ (packed int4 qweight, qzeros, scales)"},
    {".qzeros", "GPTQ or AWQ (packed int4 qweight, qzeros, scales)"},
    {".g_idx", "GPTQ (packed int4 qweight, qzeros, scales, g_idx)"},
    {".weight_packed", "compressed-tensors (packed weight_packed, weight_scale)"},
    {".weight.absmax", "bitsandbytes (absmax, quant_map)"},
    {".weight.quant_map", "bitsandbytes (absmax, quant_map)"},
    {".weight_scale_inv", "block-scaled FP8 (weight_scale_inv)"},
    {".weight_scale", "FP8 or NVFP4 (8-bit weights with weight_scale)"},
};

bool IsQuantizedDType(DType t) {
  switch (t) {
    case DType::kU8:
    case DType::kI8:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kF8E8M0:
    case DType::kF6E2M3:
    case DType::kF6E3M2:
    case DType::kF4E2M1:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::Status CheckModelPath(const std::string& model_dir) {
  struct stat st;
  if (::stat(model_dir.c_str(), &st) != 0) return absl::OkStatus();  // the reader says NotFound
  if (S_ISREG(st.st_mode)) {
    if (EndsWithIgnoreCase(model_dir, ".gguf") || StartsWithGgufMagic(model_dir)) {
      return UnimplementedError(
          "{} is a GGUF file, llama.cpp's format, which gannet does not load; {}: give "
          "model_dir (the CLI's -m) the folder of the original checkpoint",
          model_dir, kWhatGannetLoads);
    }
    if (EndsWithIgnoreCase(model_dir, ".safetensors")) {
      return InvalidArgumentError(
          "{} is a safetensors file; model_dir (the CLI's -m) is the checkpoint folder that holds "
          "it with config.json and tokenizer.json: give {}",
          model_dir, std::filesystem::path(model_dir).parent_path().string());
    }
    return InvalidArgumentError("{} is a file, not a checkpoint folder; {}", model_dir,
                                kWhatGannetLoads);
  }
  if (S_ISDIR(st.st_mode) && !FileExists(model_dir + "/config.json")) {
    const std::string gguf = FirstGgufFile(model_dir);
    if (!gguf.empty()) {
      return UnimplementedError(
          "{} holds GGUF files ({}), llama.cpp's format, which gannet does not load, and no "
          "config.json; {}",
          model_dir, gguf, kWhatGannetLoads);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckWeightFormat(const ModelConfig& config, const Checkpoint& checkpoint) {
  // compressed-tensors pack-quantized int4, GPTQ and AWQ: their configs parsed strictly, their
  // tensors checked one by one as they are bound (quantized_weights.h, gptq_weights.h).
  if (config.compressed_tensors.has_value()) return absl::OkStatus();
  if (config.gptq.has_value()) {
    // Which modules are quantized is the tensors' to say (gptq_weights.h), but a GPTQ/AWQ config
    // over a checkpoint without a single qweight is the mismatch below.
    for (const std::string& name : checkpoint.Names()) {
      if (EndsWith(name, ".qweight")) return absl::OkStatus();
    }
  }
  const std::string named =
      config.quantization_method.empty()
          ? std::string()
          : fmt::format("; config.json's quantization_config names quant_method '{}'",
                        config.quantization_method);
  // NVIDIA ModelOpt's NVFP4 (uint8 `weight` beside weight_scale and weight_scale_2) without the
  // config that says so (hf_quant_config.json) is named as such before its uint8 weights are seen
  // as an unknown 8-bit format.
  for (const std::string& name : checkpoint.Names()) {
    if (EndsWith(name, ".weight_scale_2")) {
      return UnimplementedError(
          "{}: a quantized checkpoint: NVIDIA ModelOpt NVFP4 (weight, weight_scale, "
          "weight_scale_2; tensor '{}') without its quantization config (hf_quant_config.json, "
          "or quantization_config with quant_method 'modelopt'){}; {}",
          checkpoint.dir(), name, named, kNotYet);
    }
  }
  std::set<std::string> float_dtypes;
  for (const std::string& name : checkpoint.Names()) {
    for (const QuantSignature& s : kQuantSignatures) {
      if (EndsWith(name, s.suffix)) {
        return UnimplementedError("{}: a quantized checkpoint: {} (tensor '{}'){}; {}",
                                  checkpoint.dir(), s.format, name, named, kNotYet);
      }
    }
    const DType dtype = checkpoint.Find(name)->info->dtype;
    if (EndsWith(name, ".weight") && IsQuantizedDType(dtype)) {
      return UnimplementedError("{}: a quantized checkpoint: tensor '{}' has dtype {}{}; {}",
                                checkpoint.dir(), name, DTypeName(dtype), named, kNotYet);
    }
    float_dtypes.insert(std::string(DTypeName(dtype)));
  }
  if (!config.quantization_method.empty()) {
    return InvalidArgumentError(
        "{}/config.json has a quantization_config (quant_method '{}') but the weights are plain "
        "{} tensors, with none of the tensors that method writes: the config and the weights "
        "disagree. If these are the original unquantized weights, remove quantization_config "
        "from config.json; {}",
        checkpoint.dir(), config.quantization_method, fmt::join(float_dtypes, "/"), kNotYet);
  }
  return absl::OkStatus();
}

}  // namespace gannet::model
