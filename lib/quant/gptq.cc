#include "lib/quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>

#include "fmt/ranges.h"
#include "lib/common/status.h"
#include "lib/quant/int4.h"

namespace gannet::quant {
namespace {

constexpr std::string_view kExpected =
    "gannet loads GPTQ int4 checkpoints (bits 4, group_size 32/64/128/-1, checkpoint_format "
    "'gptq' or 'gptq_v2')";

std::string Where(std::string_view source, std::string_view key) {
  return fmt::format("{}: quantization_config.{}", source, key);
}

bool IsAbsent(const Json* v) { return v == nullptr || v->is_null(); }

// Keys that describe how the checkpoint was calibrated or which runtime kernels to use: they do
// not change what the stored tensors mean, so they are accepted and unused.
constexpr std::string_view kGptqInformational[] = {"true_sequential",
                                                   "damp_percent",
                                                   "damp_auto_increment",
                                                   "static_groups",
                                                   "meta",
                                                   "model_name_or_path",
                                                   "model_file_base_name",
                                                   "quantizer",
                                                   "mse",
                                                   "v2",
                                                   "v2_alpha",
                                                   "offload_to_disk",
                                                   "offload_to_disk_path",
                                                   "fail_safe",
                                                   "device",
                                                   "backend",
                                                   "use_exllama",
                                                   "exllama_config",
                                                   "use_cuda_fp16",
                                                   "disable_exllama",
                                                   "model_seqlen",
                                                   "batch_size",
                                                   "pad_token_id",
                                                   "max_input_length",
                                                   "cache_block_outputs",
                                                   "tokenizer",
                                                   "dataset",
                                                   "block_name_to_quantize",
                                                   "module_name_preceding_first_block",
                                                   "modules_in_block_to_quantize",
                                                   "act_group_aware",
                                                   "hyb_act",
                                                   "damp"};

absl::StatusOr<bool> OptionalBool(const Json& q, std::string_view key, bool fallback,
                                  std::string_view source) {
  const Json* v = q.Find(key);
  if (IsAbsent(v)) return fallback;
  if (!v->is_bool()) {
    return InvalidArgumentError("{}: is {}, expected true or false", Where(source, key),
                                Json::TypeName(v->type()));
  }
  return v->AsBool();
}

absl::StatusOr<int> GroupSize(const Json* v, std::string_view where) {
  if (v == nullptr || !v->is_int()) {
    return InvalidArgumentError("{}: missing or not an integer (expected 32, 64, 128 or -1)",
                                where);
  }
  const int64_t g = v->AsInt();
  if (g != 32 && g != 64 && g != 128 && g != -1) {
    return UnimplementedError("{}: {} is not supported (expected 32, 64, 128 or -1); {}", where, g,
                              kExpected);
  }
  return static_cast<int>(g);
}

absl::Status CheckBits(const Json* v, std::string_view where) {
  if (v == nullptr || !v->is_int()) {
    return InvalidArgumentError("{}: missing or not an integer (expected 4)", where);
  }
  if (v->AsInt() != 4) {
    return UnimplementedError("{}: {}-bit weights are not supported (expected 4); {}", where,
                              v->AsInt(), kExpected);
  }
  return absl::OkStatus();
}

constexpr size_t kMaxRegexChars = 512;
constexpr int kMaxRegexNesting = 8;

absl::Status ParseDynamic(const Json& d, std::string_view source, GptqConfig* out) {
  if (!d.is_object()) {
    return InvalidArgumentError("{}: is {}, expected an object of module patterns",
                                Where(source, "dynamic"), Json::TypeName(d.type()));
  }
  for (const auto& [key, value] : d.AsMembers()) {
    const std::string where = Where(source, fmt::format("dynamic.{}", key));
    GptqDynamicRule rule;
    std::string_view pat = key;
    if (pat.rfind("-:", 0) == 0) {
      rule.exclude = true;
      pat.remove_prefix(2);
    } else if (pat.rfind("+:", 0) == 0) {
      pat.remove_prefix(2);
    }
    rule.pattern = std::string(pat);
    GANNET_RETURN_IF_ERROR(ValidateModuleRegex(rule.pattern, where));
    if (!value.is_object()) {
      return InvalidArgumentError("{}: is {}, expected an object of overrides", where,
                                  Json::TypeName(value.type()));
    }
    for (const auto& [field, v] : value.AsMembers()) {
      const std::string fw = fmt::format("{}.{}", where, field);
      if (field == "bits") {
        GANNET_RETURN_IF_ERROR(CheckBits(&v, fw));
      } else if (field == "group_size") {
        GANNET_ASSIGN_OR_RETURN(rule.group_size, GroupSize(&v, fw));
      } else if (field == "desc_act" || field == "sym") {
        if (!v.is_bool()) return InvalidArgumentError("{}: expected true or false", fw);
        (field == "sym" ? rule.sym : rule.desc_act) = v.AsBool();
      } else if (field == "damp_percent" || field == "damp_auto_increment" ||
                 field == "static_groups" || field == "true_sequential" || field == "mse" ||
                 field == "v2" || field == "v2_alpha") {
        // calibration settings
      } else {
        return UnimplementedError(
            "{}: unknown override (expected bits, group_size, desc_act, sym or a calibration "
            "setting); {}",
            fw, kExpected);
      }
    }
    out->dynamic.push_back(std::move(rule));
  }
  return absl::OkStatus();
}

uint32_t Word(const void* p, int64_t i) { return LoadUnaligned<uint32_t>(p, i); }

}  // namespace

absl::Status ValidateModuleRegex(const std::string& pattern, std::string_view where) {
  // std::regex compiles and matches recursively: an untrusted config's pattern is bounded in
  // length and nesting before it is compiled (real ones are a few dozen characters).
  int depth = 0, max_depth = 0;
  for (char ch : pattern) {
    if (ch == '(' || ch == '[') max_depth = std::max(max_depth, ++depth);
    if (ch == ')' || ch == ']') --depth;
  }
  if (pattern.empty() || pattern.size() > kMaxRegexChars || max_depth > kMaxRegexNesting) {
    return InvalidArgumentError(
        "{}: a module pattern of {} characters nested {} deep; expected 1 to {} characters and at "
        "most {} levels",
        where, pattern.size(), max_depth, kMaxRegexChars, kMaxRegexNesting);
  }
  try {
    std::regex re(pattern);
  } catch (const std::regex_error& err) {
    return InvalidArgumentError("{}: '{}' is not a valid regular expression ({})", where, pattern,
                                err.what());
  }
  return absl::OkStatus();
}

bool ModuleRegexMatches(std::string_view name, const std::string& pattern) {
  try {
    const std::regex re(pattern);
    return std::regex_search(name.begin(), name.end(), re, std::regex_constants::match_continuous);
  } catch (const std::regex_error&) {
    return false;  // ValidateModuleRegex refused it when the config was read
  }
}

WeightFormat GptqModuleScheme::Format(int64_t k, DType scale_type) const {
  WeightFormat f =
      WeightFormat::Int4(group_size == -1 ? static_cast<int>(k) : group_size, scale_type);
  if (!sym) {
    f.elem = DType::kU4;
    f.zero_point = true;
  }
  f.input_perm = desc_act;
  return f;
}

absl::StatusOr<GptqConfig> ParseGptqConfig(const Json& q, std::string_view source) {
  if (!q.is_object()) {
    return InvalidArgumentError("{}: quantization_config is {}, expected an object", source,
                                Json::TypeName(q.type()));
  }
  for (const auto& [key, value] : q.AsMembers()) {
    static constexpr std::string_view kMeaning[] = {
        "quant_method",      "method",   "bits",
        "group_size",        "desc_act", "sym",
        "checkpoint_format", "format",   "pack_dtype",
        "lm_head",           "dynamic",  "modules_to_not_convert",
        "is_marlin_format",  "rotation", "adapter",
        "activation"};
    const bool known =
        std::find(std::begin(kMeaning), std::end(kMeaning), key) != std::end(kMeaning) ||
        std::find(std::begin(kGptqInformational), std::end(kGptqInformational), key) !=
            std::end(kGptqInformational);
    if (!known) {
      return UnimplementedError("{}: unknown field; {}", Where(source, key), kExpected);
    }
  }
  GptqConfig out;
  out.method = ZpInt4Method::kGptq;
  GANNET_RETURN_IF_ERROR(CheckBits(q.Find("bits"), Where(source, "bits")));
  GANNET_ASSIGN_OR_RETURN(out.base.group_size,
                          GroupSize(q.Find("group_size"), Where(source, "group_size")));
  GANNET_ASSIGN_OR_RETURN(out.base.desc_act, OptionalBool(q, "desc_act", false, source));
  GANNET_ASSIGN_OR_RETURN(out.base.sym, OptionalBool(q, "sym", true, source));
  GANNET_ASSIGN_OR_RETURN(out.lm_head, OptionalBool(q, "lm_head", false, source));
  GANNET_ASSIGN_OR_RETURN(const bool marlin, OptionalBool(q, "is_marlin_format", false, source));
  if (marlin) {
    return UnimplementedError("{}: Marlin-repacked GPTQ is not supported (expected false); {}",
                              Where(source, "is_marlin_format"), kExpected);
  }
  // GPTQModel writes checkpoint_format; older versions wrote `format`.
  for (const char* key : {"checkpoint_format", "format"}) {
    const Json* v = q.Find(key);
    if (IsAbsent(v)) continue;
    if (!v->is_string()) {
      return InvalidArgumentError("{}: expected a string ('gptq' or 'gptq_v2')",
                                  Where(source, key));
    }
    const std::string& s = v->AsString();
    if (s == "gptq") {
      out.v1_zeros = true;
    } else if (s == "gptq_v2") {
      out.v1_zeros = false;
    } else {
      return UnimplementedError("{}: '{}' is not supported (expected 'gptq' or 'gptq_v2'); {}",
                                Where(source, key), s, kExpected);
    }
  }
  GANNET_RETURN_IF_ERROR(CheckPackDtype(q, source, kExpected));
  // GPTQModel writes the method twice (quant_method and method).
  const Json* method = q.Find("method");
  if (!IsAbsent(method) && !(method->is_string() && method->AsString() == "gptq")) {
    return InvalidArgumentError("{}: expected 'gptq' (as quant_method)", Where(source, "method"));
  }
  // A rotation changes the activations the weights expect, an adapter adds low-rank terms,
  // `activation` quantizes the activations.
  for (const char* key : {"rotation", "adapter", "activation"}) {
    const Json* v = q.Find(key);
    if (!IsAbsent(v) && !(v->is_object() && v->AsMembers().empty())) {
      return UnimplementedError("{}: not supported (expected null); {}", Where(source, key),
                                kExpected);
    }
  }
  const Json* d = q.Find("dynamic");
  if (!IsAbsent(d)) GANNET_RETURN_IF_ERROR(ParseDynamic(*d, source, &out));
  GANNET_RETURN_IF_ERROR(ParseModulesToNotConvert(q, source, &out));
  return out;
}

absl::Status CheckPackDtype(const Json& q, std::string_view source, std::string_view expected) {
  const Json* pack = q.Find("pack_dtype");
  if (!IsAbsent(pack) &&
      !(pack->is_string() && (pack->AsString() == "int32" || pack->AsString() == "torch.int32"))) {
    return UnimplementedError("{}: only int32 words are supported (expected 'int32'); {}",
                              Where(source, "pack_dtype"), expected);
  }
  return absl::OkStatus();
}

absl::Status ParseModulesToNotConvert(const Json& q, std::string_view source, GptqConfig* out) {
  const Json* skip = q.Find("modules_to_not_convert");
  if (IsAbsent(skip)) return absl::OkStatus();
  if (!skip->is_array()) {
    return InvalidArgumentError("{}: expected a list of module names",
                                Where(source, "modules_to_not_convert"));
  }
  for (const Json& e : skip->AsArray()) {
    if (!e.is_string() || e.AsString().empty()) {
      return InvalidArgumentError("{}: every entry must be a non-empty string",
                                  Where(source, "modules_to_not_convert"));
    }
    out->modules_to_not_convert.push_back(e.AsString());
  }
  return absl::OkStatus();
}

std::optional<GptqModuleScheme> GptqSchemeFor(const GptqConfig& config,
                                              std::string_view module_name) {
  for (const std::string& s : config.modules_to_not_convert) {
    if (module_name.find(s) != std::string_view::npos) return std::nullopt;
  }
  GptqModuleScheme s = config.base;
  for (const GptqDynamicRule& r : config.dynamic) {
    if (!ModuleRegexMatches(module_name, r.pattern)) continue;
    if (r.exclude) return std::nullopt;
    if (r.group_size) s.group_size = *r.group_size;
    if (r.desc_act) s.desc_act = *r.desc_act;
    if (r.sym) s.sym = *r.sym;
    break;
  }
  return s;
}

absl::Status ScalesToCanonical(std::string_view module, const void* scales, DType t, int64_t groups,
                               int64_t n, void* out) {
  const size_t bytes = static_cast<size_t>(DTypeBits(t) / 8);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t r = 0; r < n; ++r) {
      const float v = ScaleToF32(scales, t, g * n + r);
      if (!std::isfinite(v)) {
        return DataLossError("'{}.scales' element [{}, {}] is {} (scales must be finite)", module,
                             g, r, v);
      }
      std::memcpy(static_cast<char*>(out) + (r * groups + g) * bytes,
                  static_cast<const char*>(scales) + (g * n + r) * bytes, bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckZeroBias(std::string_view module, const void* bias, DType dtype, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (ScaleToF32(bias, dtype, i) != 0.0f) {
      return UnimplementedError(
          "'{}.bias' element {} is nonzero; Gemma-4's linear layers have no bias and gannet adds "
          "none (expected an all-zero bias or none)",
          module, i);
    }
  }
  return absl::OkStatus();
}

absl::Status GptqToCanonical(const ZpInt4Module& m, const WeightFormat& f, bool v1_zeros,
                             uint8_t* packed, void* scales, uint8_t* zeros, int32_t* perm) {
  const int64_t n = m.n, k = m.k, g = f.group_size, groups = k / g;
  // g_idx: the trivial k / g unless desc_act; with desc_act, the permutation that makes groups
  // contiguous (a stable counting sort by group).
  std::vector<int32_t> order(static_cast<size_t>(k));
  std::vector<int64_t> fill(static_cast<size_t>(groups), 0);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t gi = m.g_idx != nullptr ? LoadUnaligned<int32_t>(m.g_idx, i) : i / g;
    if (!f.input_perm && gi != i / g) {
      return InvalidArgumentError(
          "'{}.g_idx' element {} is {}, but without desc_act input k belongs to group k / {} = "
          "{} (an act-ordered g_idx needs desc_act: true)",
          m.name, i, gi, g, i / g);
    }
    if (gi < 0 || gi >= groups || fill[gi] >= g) {
      return InvalidArgumentError(
          "'{}.g_idx' element {} is {}: expected a group in [0, {}) holding exactly {} inputs",
          m.name, i, gi, groups, g);
    }
    order[gi * g + fill[gi]++] = static_cast<int32_t>(i);
  }
  if (perm != nullptr) std::memcpy(perm, order.data(), order.size() * sizeof(int32_t));
  GANNET_RETURN_IF_ERROR(ScalesToCanonical(m.name, m.scales, f.scale, groups, n, scales));
  const bool to_signed = f.elem == DType::kI4;
  std::vector<uint8_t> natural(f.input_perm ? static_cast<size_t>(k / 2) : 0);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      int z = static_cast<int>((Word(m.qzeros, gi * (n / 8) + r / 8) >> (4 * (r % 8))) & 15u);
      if (v1_zeros) ++z;
      if (z > 15) {
        return DataLossError(
            "'{}.qzeros' [group {}, output {}]: stored 15 means a zero point of 16 in "
            "checkpoint_format 'gptq' (v1), which int4 zero points cannot hold",
            m.name, gi, r);
      }
      if (to_signed && z != 8) {
        return InvalidArgumentError(
            "'{}.qzeros' [group {}, output {}]: zero point {}, but sym: true means 8 (stored {} "
            "in checkpoint_format '{}')",
            m.name, gi, r, z, v1_zeros ? 7 : 8, v1_zeros ? "gptq" : "gptq_v2");
      }
      if (!to_signed) zeros[r * groups + gi] = static_cast<uint8_t>(z);
    }
    // Word (i, r) holds inputs 8i..8i+7 of row r, input 8i+j at bits 4j: on a little-endian
    // host its bytes are the row's canonical bytes 4i..4i+3 (low nibble first), so the rows in
    // input order are the word matrix transposed (signed: each nibble's top bit flipped).
    uint8_t* row = packed + r * (k / 2);
    uint8_t* in_order = f.input_perm ? natural.data() : row;
    for (int64_t i = 0; i < k / 8; ++i) {
      uint32_t w = Word(m.qweight, i * n + r);
      if (to_signed) w ^= 0x88888888u;
      std::memcpy(in_order + 4 * i, &w, 4);
    }
    if (!f.input_perm) continue;
    // Act-order: stored column j takes input order[j].
    auto nib = [&](int64_t x) { return (natural[x / 2] >> (4 * (x % 2))) & 15; };
    for (int64_t j = 0; j < k; j += 2) {
      row[j / 2] = static_cast<uint8_t>(nib(order[j]) | (nib(order[j + 1]) << 4));
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::quant
