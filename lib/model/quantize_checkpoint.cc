#include "lib/model/quantize_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "fmt/format.h"
#include "lib/common/file_util.h"
#include "lib/common/json.h"
#include "lib/common/status.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"
#include "lib/quant/compressed_tensors.h"
#include "lib/quant/fp8.h"
#include "lib/quant/int4.h"
#include "lib/quant/nvfp4.h"

namespace gannet::model {
namespace {

namespace fs = std::filesystem;

// Modules kept in their checkpoint type whatever the group size: the LM head (logit precision),
// the router (tiny, and its softmax ranks experts), the PLE model projection (quantizing the PLE
// path degrades E2B/E4B badly), and the multimodal towers.
// An MTP assistant's centroid table (masked_embedding.centroids, E2B/E4B) stays dense: the
// drafter scores clusters from it by row (Backend::CentroidLogits), which reads dense rows only.
const std::vector<std::string>& DefaultIgnore() {
  static const std::vector<std::string> v = {"lm_head",
                                             "re:.*embed_tokens.*",
                                             "re:.*router.*",
                                             "re:.*per_layer_model_projection.*",
                                             "re:.*vision.*",
                                             "re:.*audio.*",
                                             "re:.*masked_embedding.*"};
  return v;
}

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

// The compressed-tensors tensors of module `module` holding rows [n, k] (f32 values).
void AppendQuantized(const std::string& module, const float* w, int64_t n, int64_t k,
                     DType scale_type, const QuantizeOptions& o, std::vector<TensorToWrite>* out) {
  if (o.float_format.has_value() && o.float_format->elem == DType::kF4E2M1) {
    std::vector<uint8_t> packed(static_cast<size_t>(n * k / 2)),
        scales(static_cast<size_t>(n * k / 16));
    const float global =
        quant::QuantizeNvfp4Rows(scale_type, w, n, k, packed.data(), scales.data());
    out->push_back(
        {module + ".weight_packed", DType::kU8, {n, k / 2}, Bytes(packed.data(), packed.size())});
    out->push_back({module + ".weight_scale",
                    DType::kF8E4M3,
                    {n, k / 16},
                    Bytes(scales.data(), scales.size())});
    out->push_back({module + ".weight_global_scale", DType::kF32, {1}, Bytes(&global, 4)});
    return;
  }
  if (o.float_format.has_value()) {
    WeightFormat f = *o.float_format;
    f.scale = scale_type;
    std::vector<int64_t> scale_shape;
    if (f.granularity == ScaleGranularity::kChannel) {
      scale_shape = {n, 1};
    } else if (f.granularity == ScaleGranularity::kTensor) {
      scale_shape = {1};
    } else {
      scale_shape = {(n + f.block_rows - 1) / f.block_rows, (k + f.group_size - 1) / f.group_size};
    }
    int64_t scale_count = 1;
    for (int64_t d : scale_shape) scale_count *= d;
    std::vector<uint8_t> q(static_cast<size_t>(n * k));
    std::vector<uint8_t> scales(static_cast<size_t>(scale_count) * DTypeBits(scale_type) / 8);
    quant::QuantizeFp8Rows(f, scale_type, w, n, k, q.data(), scales.data());
    out->push_back({module + ".weight", DType::kF8E4M3, {n, k}, Bytes(q.data(), q.size())});
    out->push_back(
        {module + ".weight_scale", scale_type, scale_shape, Bytes(scales.data(), scales.size())});
    return;
  }
  WeightFormat f = Int4FormatOf(o, scale_type);
  if (f.group_size == 0) f.group_size = static_cast<int>(k);
  const int64_t groups = k / f.group_size;
  std::vector<uint8_t> packed(static_cast<size_t>(n * k / 2));
  std::vector<uint8_t> scales(static_cast<size_t>(n * groups) * DTypeBits(scale_type) / 8);
  std::vector<uint8_t> zeros(f.zero_point ? static_cast<size_t>(n * groups) : 0);
  quant::QuantizeInt4Rows(f, w, n, k, packed.data(), scales.data(), zeros.data());
  const int64_t words = (k + 7) / 8;
  std::vector<uint8_t> word_bytes(static_cast<size_t>(n * words * 4));
  quant::CanonicalToCtWords(packed.data(), n, k, o.symmetric, words, word_bytes.data());
  out->push_back({module + ".weight_packed",
                  DType::kI32,
                  {n, words},
                  Bytes(word_bytes.data(), word_bytes.size())});
  out->push_back(
      {module + ".weight_scale", scale_type, {n, groups}, Bytes(scales.data(), scales.size())});
  const int64_t shape[2] = {n, k};
  out->push_back({module + ".weight_shape", DType::kI64, {2}, Bytes(shape, sizeof(shape))});
  if (f.zero_point) {
    std::vector<uint8_t> zp(static_cast<size_t>((n + 7) / 8 * groups * 4));
    quant::CanonicalZeroPointsToCt(zeros.data(), n, groups, zp.data());
    out->push_back({module + ".weight_zero_point",
                    DType::kI32,
                    {(n + 7) / 8, groups},
                    Bytes(zp.data(), zp.size())});
  }
}

}  // namespace

WeightFormat Int4FormatOf(const QuantizeOptions& o, DType scale_type) {
  WeightFormat f = WeightFormat::Int4(o.group_size, scale_type);
  if (!o.symmetric) {
    f.elem = DType::kU4;
    f.zero_point = true;
  }
  return f;
}

absl::StatusOr<QuantizeOptions> ParseWeightDtype(std::string_view spec) {
  QuantizeOptions o;
  std::string_view s = spec;
  if (s.size() > 5 && s.substr(s.size() - 5) == "-asym") {
    o.symmetric = false;
    s.remove_suffix(5);
  }
  if (s == "int4-g32") {
    o.group_size = 32;
  } else if (s == "int4-g64") {
    o.group_size = 64;
  } else if (s == "int4-g128") {
    o.group_size = 128;
  } else if (s == "int4-channel") {
    o.group_size = 0;
  } else if (o.symmetric && s == "nvfp4") {
    o.group_size = 0;
    o.float_format = WeightFormat::Nvfp4();
  } else if (o.symmetric && (s == "fp8-channel" || s == "fp8-tensor" || s == "fp8-block")) {
    WeightFormat f = s == "fp8-channel"  ? WeightFormat::Fp8Channel()
                     : s == "fp8-tensor" ? WeightFormat::Fp8Tensor()
                                         : WeightFormat::Fp8Block(128, 128);
    f.act = ActivationQuant::kDynamicFp8;
    f.act_group = s == "fp8-block" ? 128 : 0;  // FP8_BLOCK quantizes activations per 128 inputs
    o.group_size = 0;
    o.float_format = f;
  } else {
    return InvalidArgumentError(
        "weight dtype '{}': expected int4-g32, int4-g64, int4-g128 or "
        "int4-channel, optionally with -asym, or fp8-channel, fp8-block, fp8-tensor or nvfp4",
        spec);
  }
  return o;
}

absl::StatusOr<QuantizeReport> QuantizeCheckpoint(const std::string& src_dir,
                                                  const std::string& dst_dir,
                                                  const QuantizeOptions& o) {
  const bool nvfp4 = o.float_format.has_value() && o.float_format->elem == DType::kF4E2M1;
  if (nvfp4 && !(*o.float_format == WeightFormat::Nvfp4())) {
    return InvalidArgumentError("quantize: NVFP4 format {} (expected weight-only NVFP4)",
                                WeightFormatName(*o.float_format));
  }
  if (o.float_format.has_value() && !nvfp4 &&
      (o.float_format->elem != DType::kF8E4M3 || WeightFormatError(*o.float_format) != nullptr ||
       (o.float_format->granularity == ScaleGranularity::kBlock &&
        (o.float_format->block_rows != 128 || o.float_format->group_size != 128)) ||
       o.float_format->granularity == ScaleGranularity::kGroup || o.float_format->zero_point)) {
    return InvalidArgumentError(
        "quantize: FP8 format {} (expected channel, tensor or 128x128 "
        "block E4M3 weights)",
        WeightFormatName(*o.float_format));
  }
  if (o.group_size != 0 && o.group_size != 32 && o.group_size != 64 && o.group_size != 128) {
    return InvalidArgumentError(
        "quantize: group size {} (expected 32, 64, 128 or 0 for per "
        "channel)",
        o.group_size);
  }
  std::error_code ec;
  if (fs::exists(dst_dir, ec) && fs::equivalent(src_dir, dst_dir, ec)) {
    return InvalidArgumentError("quantize: the output folder {} is the input folder", dst_dir);
  }
  GANNET_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(src_dir));
  if (!config.quantization_method.empty()) {
    return FailedPreconditionError("quantize: {} is already quantized (quant_method '{}')", src_dir,
                                   config.quantization_method);
  }
  GANNET_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt,
                          Checkpoint::Open(src_dir, {.text_only = false}));
  GANNET_ASSIGN_OR_RETURN(
      std::string config_text,
      ReadFileToString(src_dir + "/config.json", kMaxConfigJsonBytes, "config.json"));
  GANNET_ASSIGN_OR_RETURN(Json root, Json::Parse(config_text, kMaxConfigJsonValues));

  quant::CtConfig ct;
  ct.schemes.push_back(
      quant::CtScheme{"group_0", {"Linear"}, o.symmetric, o.group_size == 0, o.group_size});
  if (o.float_format.has_value()) ct.schemes.back().elem = o.float_format->elem;
  ct.ignore = DefaultIgnore();
  QuantizeReport report;
  // What becomes of each tensor: 2-D Linear weights named `<module>.weight` and the fused 3-D
  // expert tensors (split into per-expert modules) are quantized; everything else is copied.
  std::map<std::string, std::string, std::less<>> quantize_2d;  // tensor -> module
  std::set<std::string, std::less<>> quantize_experts;
  // FP8 quantizes any width (a block row's last block may be narrower).
  auto quantizable = [&](int64_t k) {
    if (nvfp4) return k % 16 == 0;  // groups of 16
    return o.float_format.has_value() || o.group_size == 0 || k % o.group_size == 0;
  };
  for (const WeightSpec& s : ExpectedWeights(config)) {
    if (s.is_index || s.shape.size() < 2) continue;
    const bool experts = s.layer_slot == &LayerWeights::experts_gate_up ||
                         s.layer_slot == &LayerWeights::experts_down;
    const int64_t k = s.shape.back();
    if (experts) {
      const std::string base = s.name.substr(0, s.name.rfind("experts.") + 8);
      const std::string first =
          base + (s.layer_slot == &LayerWeights::experts_gate_up ? "0.gate_proj" : "0.down_proj");
      if (quant::CtSchemeFor(ct, first, "Linear") != nullptr && quantizable(k)) {
        quantize_experts.insert(s.name);
        report.quantized_modules +=
            s.shape[0] * (s.layer_slot == &LayerWeights::experts_gate_up ? 2 : 1);
      }
      continue;  // otherwise the fused tensor stays as it is (not a Linear module)
    }
    if (s.global_slot == &ModelWeights::embed_tokens ||
        s.global_slot == &ModelWeights::embed_tokens_per_layer || s.name.size() < 7 ||
        s.name.substr(s.name.size() - 7) != ".weight") {
      continue;
    }
    const std::string module = s.name.substr(0, s.name.size() - 7);
    if (quant::CtSchemeFor(ct, module, "Linear") == nullptr) {
      ++report.kept_modules;
      continue;
    }
    if (!quantizable(k)) {
      ct.ignore.push_back(module);  // width not a multiple of the group: kept, and said so
      ++report.kept_modules;
      continue;
    }
    quantize_2d.emplace(s.name, module);
    ++report.quantized_modules;
  }

  fs::create_directories(dst_dir, ec);
  if (ec) return InvalidArgumentError("quantize: cannot create {}: {}", dst_dir, ec.message());
  // One output file per input file, same names, so that memory holds one shard at a time.
  std::map<std::string, std::vector<std::string>> by_file;
  for (const std::string& name : ckpt->Names()) {
    by_file[ckpt->Find(name)->file->path()].push_back(name);
  }
  Json weight_map = Json::MakeObject();
  uint64_t total_out = 0;
  std::vector<float> f32;
  for (auto& [path, names] : by_file) {
    std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
      return ckpt->Find(a)->info->begin < ckpt->Find(b)->info->begin;
    });
    std::vector<TensorToWrite> out;
    for (const std::string& name : names) {
      const TensorRef& t = *ckpt->Find(name);
      const DType dt = t.info->dtype;
      report.bytes_in += t.info->nbytes();
      const bool q2 = quantize_2d.count(name) > 0;
      const bool qe = quantize_experts.count(name) > 0;
      if ((q2 || qe) && dt != DType::kBF16 && dt != DType::kF16 && dt != DType::kF32) {
        return UnimplementedError("quantize: tensor '{}' has dtype {}; expected BF16, F16 or F32",
                                  name, DTypeName(dt));
      }
      if (q2) {
        const int64_t n = t.info->shape[0], k = t.info->shape[1];
        f32.resize(static_cast<size_t>(n * k));
        ElementsToF32(t.data(), dt, n * k, f32.data());
        AppendQuantized(quantize_2d.find(name)->second, f32.data(), n, k, dt, o, &out);
      } else if (qe) {
        const int64_t e_count = t.info->shape[0], rows = t.info->shape[1], k = t.info->shape[2];
        const bool gate_up = name.size() >= 12 && name.substr(name.size() - 12) == "gate_up_proj";
        const std::string base = name.substr(0, name.rfind("experts.") + 8);
        f32.resize(static_cast<size_t>(rows * k));
        const size_t eb = static_cast<size_t>(DTypeBits(dt) / 8);
        for (int64_t e = 0; e < e_count; ++e) {
          ElementsToF32(t.data() + static_cast<size_t>(e * rows * k) * eb, dt, rows * k,
                        f32.data());
          if (gate_up) {
            AppendQuantized(fmt::format("{}{}.gate_proj", base, e), f32.data(), rows / 2, k, dt, o,
                            &out);
            AppendQuantized(fmt::format("{}{}.up_proj", base, e), f32.data() + rows / 2 * k,
                            rows / 2, k, dt, o, &out);
          } else {
            AppendQuantized(fmt::format("{}{}.down_proj", base, e), f32.data(), rows, k, dt, o,
                            &out);
          }
        }
      } else {
        out.push_back({name, dt, t.info->shape, Bytes(t.data(), t.info->nbytes())});
      }
    }
    const std::string file = fs::path(path).filename().string();
    for (const TensorToWrite& w : out) {
      weight_map.Set(w.name, Json::String(file));
      report.bytes_out += w.bytes.size();
      total_out += w.bytes.size();
    }
    GANNET_RETURN_IF_ERROR(WriteSafetensors(dst_dir + "/" + file, out, {{"format", "pt"}}));
  }
  if (ckpt->num_shards() > 1 || fs::exists(src_dir + "/model.safetensors.index.json", ec)) {
    Json index = Json::MakeObject();
    Json meta = Json::MakeObject();
    meta.Set("total_size", Json::Int(static_cast<int64_t>(total_out)));
    index.Set("metadata", std::move(meta));
    index.Set("weight_map", std::move(weight_map));
    GANNET_RETURN_IF_ERROR(
        WriteStringToFile(dst_dir + "/model.safetensors.index.json", index.Dump()));
  }
  WeightFormat f = WeightFormat::Int4(o.group_size, DType::kBF16);
  f.zero_point = !o.symmetric;
  if (o.float_format.has_value()) f = *o.float_format;
  root.Set("quantization_config", quant::CtConfigJson(f, o.group_size == 0, {"Linear"}, ct.ignore));
  GANNET_RETURN_IF_ERROR(WriteStringToFile(dst_dir + "/config.json", root.Dump()));
  report.ignore = ct.ignore;
  // The rest of the folder (tokenizer, chat template, generation config, ...), as it is.
  for (fs::directory_iterator it(src_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_regular_file() || name == "config.json" || name == "model.safetensors.index.json" ||
        it->path().extension() == ".safetensors") {
      continue;
    }
    fs::copy_file(it->path(), fs::path(dst_dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec)
      return InvalidArgumentError("quantize: cannot copy {}: {}", it->path().string(),
                                  ec.message());
  }
  if (ec) return InvalidArgumentError("quantize: cannot list {}: {}", src_dir, ec.message());
  return report;
}

}  // namespace gannet::model
