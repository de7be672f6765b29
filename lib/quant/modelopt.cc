#include "lib/quant/modelopt.h"

#include <algorithm>
#include <string>

#include "fmt/ranges.h"
#include "lib/common/status.h"

namespace gannet::quant {
namespace {

constexpr std::string_view kExpected =
    "gannet loads ModelOpt NVFP4 checkpoints (quant_algo NVFP4, or MIXED_PRECISION whose "
    "quantized_layers are NVFP4), group size 16, without KV-cache quantization";

bool IsAbsent(const Json* v) { return v == nullptr || v->is_null(); }

absl::Status CheckKeys(const Json& obj, std::initializer_list<std::string_view> known,
                       std::string_view where) {
  for (const auto& [key, value] : obj.AsMembers()) {
    bool found = false;
    for (std::string_view k : known) found |= k == key;
    if (!found) {
      return UnimplementedError("{}.{}: unknown field (expected one of: {}); {}", where, key,
                                fmt::join(known, ", "), kExpected);
    }
  }
  return absl::OkStatus();
}

// quant_algo NVFP4 with group_size 16 (absent: 16).
absl::Status CheckNvfp4(const Json& obj, std::string_view where) {
  const Json* algo = obj.Find("quant_algo");
  if (algo == nullptr || !algo->is_string()) {
    return InvalidArgumentError("{}.quant_algo: missing or not a string", where);
  }
  if (algo->AsString() != "NVFP4") {
    return UnimplementedError("{}.quant_algo: '{}' is not supported (expected 'NVFP4'); {}", where,
                              algo->AsString(), kExpected);
  }
  const Json* group = obj.Find("group_size");
  if (!IsAbsent(group) && !(group->is_int() && group->AsInt() == 16)) {
    return UnimplementedError("{}.group_size: {} is not supported (expected 16); {}", where,
                              group->Dump(), kExpected);
  }
  return absl::OkStatus();
}

// "*" and "?" globs as ModelOpt's exclude_modules spell them, as a "re:" target of CtConfig.
std::string GlobToRegexTarget(std::string_view glob) {
  std::string re = "re:";
  for (char c : glob) {
    if (c == '*') {
      re += ".*";
    } else if (c == '?') {
      re += '.';
    } else if (std::string_view("\\^$.|+()[]{}").find(c) != std::string_view::npos) {
      re += '\\';
      re += c;
    } else {
      re += c;
    }
  }
  return re + "$";
}

}  // namespace

absl::StatusOr<CtConfig> ParseModeloptConfig(const Json& root, std::string_view source) {
  if (!root.is_object()) {
    return InvalidArgumentError("{}: the ModelOpt quantization config is not an object", source);
  }
  const Json* nested = root.Find("quantization");
  std::string where;
  const Json* q = &root;
  if (nested != nullptr) {
    GANNET_RETURN_IF_ERROR(CheckKeys(root, {"producer", "quantization"}, source));
    if (!nested->is_object()) {
      return InvalidArgumentError("{}: quantization is not an object", source);
    }
    q = nested;
    where = fmt::format("{}: quantization", source);
  } else {
    where = fmt::format("{}: quantization_config", source);
    const Json* method = root.Find("quant_method");
    if (method == nullptr || !method->is_string() || method->AsString() != "modelopt") {
      return InvalidArgumentError("{}.quant_method: expected 'modelopt'", where);
    }
  }
  GANNET_RETURN_IF_ERROR(
      CheckKeys(*q,
                {"quant_method", "quant_algo", "kv_cache_quant_algo", "group_size",
                 "exclude_modules", "ignore", "quantized_layers", "producer"},
                where));
  const Json* kv = q->Find("kv_cache_quant_algo");
  if (!IsAbsent(kv)) {
    return UnimplementedError(
        "{}.kv_cache_quant_algo: {} is not supported (expected null: gannet's FP8 KV cache is "
        "its own option, not the checkpoint's); {}",
        where, kv->Dump(), kExpected);
  }
  CtConfig out;
  for (const char* key : {"exclude_modules", "ignore"}) {
    const Json* ex = q->Find(key);
    if (IsAbsent(ex)) continue;
    if (!ex->is_array()) {
      return InvalidArgumentError("{}.{}: expected a list of module names or patterns", where, key);
    }
    for (const Json& e : ex->AsArray()) {
      if (!e.is_string() || e.AsString().empty()) {
        return InvalidArgumentError("{}.{}: every entry must be a non-empty string", where, key);
      }
      // Matched through std::regex, which backtracks: a pattern is bounded in length and
      // wildcards (real ones are a module name or two with a `*` or two).
      const std::string& g = e.AsString();
      const size_t stars = static_cast<size_t>(std::count(g.begin(), g.end(), '*'));
      if (g.size() > 256 || stars > 8) {
        return InvalidArgumentError(
            "{}.{}: pattern of {} characters with {} wildcards; at most 256 and 8", where, key,
            g.size(), stars);
      }
      out.ignore.push_back(GlobToRegexTarget(e.AsString()));
    }
  }
  const Json* algo = q->Find("quant_algo");
  if (algo != nullptr && algo->is_string() && algo->AsString() == "MIXED_PRECISION") {
    const Json* layers = q->Find("quantized_layers");
    if (layers == nullptr || !layers->is_object() || layers->AsMembers().empty()) {
      return InvalidArgumentError(
          "{}.quantized_layers: missing or empty (MIXED_PRECISION names each layer's algorithm)",
          where);
    }
    for (const auto& [name, entry] : layers->AsMembers()) {
      const std::string at = fmt::format("{}.quantized_layers.{}", where, name);
      if (!entry.is_object()) return InvalidArgumentError("{}: expected an object", at);
      GANNET_RETURN_IF_ERROR(CheckKeys(entry, {"quant_algo", "group_size"}, at));
      GANNET_RETURN_IF_ERROR(CheckNvfp4(entry, at));
      CtScheme s;
      s.name = name;
      s.targets = {name};
      s.elem = DType::kF4E2M1;
      s.group_size = 16;
      s.act = ActivationQuant::kDynamicNvfp4;
      s.act_group = 16;
      s.modelopt = true;
      out.schemes.push_back(std::move(s));
    }
    return out;
  }
  if (!IsAbsent(q->Find("quantized_layers"))) {
    return InvalidArgumentError("{}.quantized_layers: only MIXED_PRECISION has per-layer entries",
                                where);
  }
  GANNET_RETURN_IF_ERROR(CheckNvfp4(*q, where));
  CtScheme s;
  s.name = "NVFP4";
  s.targets = {"Linear"};
  s.elem = DType::kF4E2M1;
  s.group_size = 16;
  s.act = ActivationQuant::kDynamicNvfp4;  // ModelOpt's NVFP4 is W4A4 (input_scale)
  s.act_group = 16;
  s.modelopt = true;
  out.schemes.push_back(std::move(s));
  return out;
}

}  // namespace gannet::quant
