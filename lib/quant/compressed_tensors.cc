#include "lib/quant/compressed_tensors.h"

#include <algorithm>
#include <optional>
#include <regex>
#include <set>

#include "fmt/ranges.h"
#include "lib/common/status.h"

namespace gannet::quant {
namespace {

constexpr std::string_view kExpected =
    "gannet loads compressed-tensors 'pack-quantized' int4 weight-only (W4A16) checkpoints";

std::string Where(std::string_view source, std::string_view path) {
  return fmt::format("{}: quantization_config.{}", source, path);
}

// Every key of `obj` must be in `known`.
absl::Status CheckKnownKeys(const Json& obj, std::initializer_list<std::string_view> known,
                            std::string_view source, std::string_view path) {
  for (const auto& [key, value] : obj.AsMembers()) {
    bool found = false;
    for (std::string_view k : known) found |= k == key;
    if (!found) {
      return UnimplementedError("{}: unknown field (expected one of: {}); {}",
                                Where(source, path.empty() ? key : fmt::format("{}.{}", path, key)),
                                fmt::join(known, ", "), kExpected);
    }
  }
  return absl::OkStatus();
}

constexpr size_t kMaxRegexChars = 512;
constexpr int kMaxRegexNesting = 8;

bool IsAbsent(const Json* v) { return v == nullptr || v->is_null(); }

absl::StatusOr<std::vector<std::string>> StringList(const Json* v, std::string_view source,
                                                    std::string_view path, bool required) {
  std::vector<std::string> out;
  if (IsAbsent(v)) {
    if (required)
      return InvalidArgumentError("{}: missing (expected a list of strings)", Where(source, path));
    return out;
  }
  if (!v->is_array()) {
    return InvalidArgumentError("{}: is {}, expected a list of strings", Where(source, path),
                                Json::TypeName(v->type()));
  }
  for (const Json& e : v->AsArray()) {
    if (!e.is_string() || e.AsString().empty()) {
      return InvalidArgumentError("{}: every entry must be a non-empty string",
                                  Where(source, path));
    }
    const std::string& s = e.AsString();
    if (s.rfind("re:", 0) == 0) {
      // std::regex compiles and matches recursively: an untrusted config's pattern is bounded in
      // length and nesting before it is compiled (real ones are a few dozen characters).
      int depth = 0, max_depth = 0;
      for (char ch : s) {
        if (ch == '(' || ch == '[') max_depth = std::max(max_depth, ++depth);
        if (ch == ')' || ch == ']') --depth;
      }
      if (s.size() > kMaxRegexChars || max_depth > kMaxRegexNesting) {
        return InvalidArgumentError(
            "{}: regular expression of {} characters nested {} deep; at "
            "most {} characters and {} levels",
            Where(source, path), s.size(), max_depth, kMaxRegexChars, kMaxRegexNesting);
      }
      try {
        std::regex re(s.substr(3));
      } catch (const std::regex_error& err) {
        return InvalidArgumentError("{}: '{}' is not a valid regular expression ({})",
                                    Where(source, path), s, err.what());
      }
    }
    out.push_back(s);
  }
  if (required && out.empty()) {
    return InvalidArgumentError("{}: empty (expected at least one target)", Where(source, path));
  }
  return out;
}

absl::Status ExpectString(const Json* v, std::string_view expected, std::string_view source,
                          std::string_view path, bool unimplemented) {
  if (v == nullptr || !v->is_string()) {
    return InvalidArgumentError("{}: missing or not a string (expected '{}')", Where(source, path),
                                expected);
  }
  if (v->AsString() != expected) {
    if (unimplemented) {
      return UnimplementedError("{}: '{}' is not supported (expected '{}'); {}",
                                Where(source, path), v->AsString(), expected, kExpected);
    }
    return InvalidArgumentError("{}: '{}' (expected '{}')", Where(source, path), v->AsString(),
                                expected);
  }
  return absl::OkStatus();
}

// The torch dtype spellings compressed-tensors writes ("torch.bfloat16" or "bfloat16").
std::optional<DType> TorchDType(std::string_view s) {
  if (s.rfind("torch.", 0) == 0) s.remove_prefix(6);
  if (s == "bfloat16") return DType::kBF16;
  if (s == "float16" || s == "half") return DType::kF16;
  if (s == "float32" || s == "float") return DType::kF32;
  return std::nullopt;
}

absl::Status ParseWeights(const Json& w, std::string_view source, const std::string& path,
                          CtScheme* s) {
  if (!w.is_object()) {
    return InvalidArgumentError("{}: is {}, expected an object", Where(source, path),
                                Json::TypeName(w.type()));
  }
  GANNET_RETURN_IF_ERROR(CheckKnownKeys(
      w,
      {"num_bits", "type", "symmetric", "group_size", "strategy", "block_structure", "dynamic",
       "actorder", "scale_dtype", "zp_dtype", "observer", "observer_kwargs"},
      source, path));
  const Json* bits = w.Find("num_bits");
  if (bits == nullptr || !bits->is_int()) {
    return InvalidArgumentError("{}.num_bits: missing or not an integer (expected 4)",
                                Where(source, path));
  }
  if (bits->AsInt() != 4) {
    return UnimplementedError("{}.num_bits: {} is not supported (expected 4); {}",
                              Where(source, path), bits->AsInt(), kExpected);
  }
  GANNET_RETURN_IF_ERROR(ExpectString(w.Find("type"), "int", source, path + ".type", true));
  const Json* sym = w.Find("symmetric");
  if (IsAbsent(sym)) {
    s->symmetric = true;  // compressed-tensors' default
  } else if (!sym->is_bool()) {
    return InvalidArgumentError("{}.symmetric: expected true or false", Where(source, path));
  } else {
    s->symmetric = sym->AsBool();
  }
  const Json* strategy = w.Find("strategy");
  const Json* group = w.Find("group_size");
  // compressed-tensors infers an absent strategy from the group size: > 0 group, -1 channel,
  // none tensor.
  std::string st;
  if (IsAbsent(strategy)) {
    if (group != nullptr && group->is_int() && group->AsInt() > 0) {
      st = "group";
    } else if (group != nullptr && group->is_int() && group->AsInt() == -1) {
      st = "channel";
    } else if (IsAbsent(group)) {
      st = "tensor";
    } else {
      return InvalidArgumentError("{}.group_size: expected a positive integer, -1 or null",
                                  Where(source, path));
    }
  } else if (!strategy->is_string()) {
    return InvalidArgumentError("{}.strategy: not a string (expected 'group' or 'channel')",
                                Where(source, path));
  } else {
    st = strategy->AsString();
  }
  if (st == "group") {
    if (group == nullptr || !group->is_int()) {
      return InvalidArgumentError(
          "{}.group_size: missing or not an integer (strategy 'group' "
          "needs 32, 64 or 128)",
          Where(source, path));
    }
    const int64_t g = group->AsInt();
    if (g != 32 && g != 64 && g != 128) {
      return UnimplementedError("{}.group_size: {} is not supported (expected 32, 64 or 128)",
                                Where(source, path), g);
    }
    s->group_size = static_cast<int>(g);
  } else if (st == "channel") {
    if (!IsAbsent(group) && !(group->is_int() && group->AsInt() == -1)) {
      return InvalidArgumentError(
          "{}.group_size: strategy 'channel' takes no group size (expected "
          "null)",
          Where(source, path));
    }
    s->per_channel = true;
  } else if (st == "tensor" || st == "block" || st == "token" || st == "tensor_group" ||
             st == "attn_head") {
    return UnimplementedError(
        "{}.strategy: '{}' is not supported for int4 weights (expected "
        "'group' or 'channel'); {}",
        Where(source, path), st, kExpected);
  } else {
    return InvalidArgumentError(
        "{}.strategy: unknown strategy '{}' (expected 'group' or "
        "'channel')",
        Where(source, path), st);
  }
  if (!IsAbsent(w.Find("block_structure"))) {
    return UnimplementedError("{}.block_structure: block scales are not supported (expected null)",
                              Where(source, path));
  }
  const Json* dyn = w.Find("dynamic");
  if (!IsAbsent(dyn) && !(dyn->is_bool() && !dyn->AsBool())) {
    return UnimplementedError(
        "{}.dynamic: dynamic weight scales are not supported (expected "
        "false)",
        Where(source, path));
  }
  const Json* act = w.Find("actorder");
  if (!IsAbsent(act)) {
    const bool off = act->is_bool() && !act->AsBool();
    // "weight"/"static" reorder only during calibration: the stored groups stay contiguous.
    const bool plain =
        act->is_string() && (act->AsString() == "weight" || act->AsString() == "static");
    if (act->is_string() && act->AsString() == "group") {
      return UnimplementedError(
          "{}.actorder: 'group' (activation-ordered groups with a "
          "weight_g_idx tensor) is not supported (expected null, 'weight' or "
          "'static')",
          Where(source, path));
    }
    if (!off && !plain) {
      return InvalidArgumentError("{}.actorder: expected null, false, 'weight' or 'static'",
                                  Where(source, path));
    }
  }
  for (const char* key : {"scale_dtype", "zp_dtype"}) {
    const Json* v = w.Find(key);
    if (IsAbsent(v)) continue;
    if (!v->is_string()) {
      return InvalidArgumentError("{}.{}: expected a torch dtype string", Where(source, path), key);
    }
    const bool ok = std::string_view(key) == "scale_dtype"
                        ? TorchDType(v->AsString()).has_value()
                        : (v->AsString() == "torch.int8" || v->AsString() == "int8");
    if (!ok) {
      return UnimplementedError(
          "{}.{}: '{}' is not supported (expected {})", Where(source, path), key, v->AsString(),
          std::string_view(key) == "scale_dtype" ? "torch.bfloat16, torch.float16 or torch.float32"
                                                 : "torch.int8");
    }
  }
  const Json* ok = w.Find("observer_kwargs");
  if (!IsAbsent(ok) && !ok->is_object()) {
    return InvalidArgumentError("{}.observer_kwargs: expected an object", Where(source, path));
  }
  const Json* obs = w.Find("observer");
  if (!IsAbsent(obs) && !obs->is_string()) {
    return InvalidArgumentError("{}.observer: expected a string", Where(source, path));
  }
  return absl::OkStatus();
}

}  // namespace

WeightFormat CtScheme::Format(int64_t k, DType scale_type) const {
  WeightFormat f = WeightFormat::Int4(per_channel ? static_cast<int>(k) : group_size, scale_type);
  if (!symmetric) {
    f.elem = DType::kU4;
    f.zero_point = true;
  }
  return f;
}

absl::StatusOr<CtConfig> ParseCompressedTensorsConfig(const Json& q, std::string_view source) {
  if (!q.is_object()) {
    return InvalidArgumentError("{}: quantization_config is {}, expected an object", source,
                                Json::TypeName(q.type()));
  }
  GANNET_RETURN_IF_ERROR(
      CheckKnownKeys(q,
                     {"quant_method", "format", "config_groups", "ignore", "quantization_status",
                      "global_compression_ratio", "kv_cache_scheme", "sparsity_config",
                      "transform_config", "version", "moe_sparsity_config"},
                     source, ""));
  GANNET_RETURN_IF_ERROR(
      ExpectString(q.Find("quant_method"), "compressed-tensors", source, "quant_method", true));
  GANNET_RETURN_IF_ERROR(ExpectString(q.Find("format"), "pack-quantized", source, "format", true));
  GANNET_RETURN_IF_ERROR(ExpectString(q.Find("quantization_status"), "compressed", source,
                                      "quantization_status", false));
  for (const char* key : {"kv_cache_scheme", "transform_config", "moe_sparsity_config"}) {
    const Json* v = q.Find(key);
    // An empty object is what some versions write for "none".
    if (!IsAbsent(v) && !(v->is_object() && v->AsMembers().empty())) {
      return UnimplementedError("{}: not supported (expected null); {}", Where(source, key),
                                kExpected);
    }
  }
  const Json* sparsity = q.Find("sparsity_config");
  if (!IsAbsent(sparsity) && !(sparsity->is_object() && sparsity->AsMembers().empty())) {
    return UnimplementedError("{}: sparse weights are not supported (expected null or {{}})",
                              Where(source, "sparsity_config"));
  }
  const Json* version = q.Find("version");
  if (!IsAbsent(version) && !version->is_string()) {
    return InvalidArgumentError("{}: expected a string", Where(source, "version"));
  }
  const Json* ratio = q.Find("global_compression_ratio");
  if (!IsAbsent(ratio) && !ratio->is_number()) {
    return InvalidArgumentError("{}: expected a number or null",
                                Where(source, "global_compression_ratio"));
  }
  CtConfig out;
  GANNET_ASSIGN_OR_RETURN(out.ignore, StringList(q.Find("ignore"), source, "ignore", false));
  const Json* groups = q.Find("config_groups");
  if (groups == nullptr || !groups->is_object() || groups->AsMembers().empty()) {
    return InvalidArgumentError("{}: missing or empty (expected an object of config groups)",
                                Where(source, "config_groups"));
  }
  for (const auto& [name, g] : groups->AsMembers()) {
    const std::string path = "config_groups." + name;
    if (!g.is_object()) {
      return InvalidArgumentError("{}: is {}, expected an object", Where(source, path),
                                  Json::TypeName(g.type()));
    }
    GANNET_RETURN_IF_ERROR(CheckKnownKeys(
        g, {"targets", "weights", "input_activations", "output_activations", "format"}, source,
        path));
    CtScheme s;
    s.name = name;
    GANNET_ASSIGN_OR_RETURN(s.targets,
                            StringList(g.Find("targets"), source, path + ".targets", true));
    for (const char* key : {"input_activations", "output_activations"}) {
      if (!IsAbsent(g.Find(key))) {
        return UnimplementedError(
            "{}.{}: activation quantization is not supported (expected "
            "null: weight-only W4A16); {}",
            Where(source, path), key, kExpected);
      }
    }
    const Json* fmt_v = g.Find("format");
    if (!IsAbsent(fmt_v)) {
      GANNET_RETURN_IF_ERROR(ExpectString(fmt_v, "pack-quantized", source, path + ".format", true));
    }
    const Json* w = g.Find("weights");
    if (IsAbsent(w)) {
      return InvalidArgumentError("{}.weights: missing (expected the int4 weight arguments)",
                                  Where(source, path));
    }
    GANNET_RETURN_IF_ERROR(ParseWeights(*w, source, path + ".weights", &s));
    out.schemes.push_back(std::move(s));
  }
  return out;
}

bool CtNameMatches(std::string_view name, std::string_view target) {
  if (target.rfind("re:", 0) == 0) {
    // Checked to compile at parse time; ParseCompressedTensorsConfig's caller never passes others.
    try {
      const std::regex re(std::string(target.substr(3)));
      return std::regex_search(name.begin(), name.end(), re,
                               std::regex_constants::match_continuous);
    } catch (const std::regex_error&) {
      return false;
    }
  }
  return name == target;
}

const CtScheme* CtSchemeFor(const CtConfig& config, std::string_view module_name,
                            std::string_view class_name) {
  auto matches = [&](const std::string& t) {
    return CtNameMatches(module_name, t) || (t.rfind("re:", 0) != 0 && t == class_name);
  };
  for (const std::string& t : config.ignore) {
    if (matches(t)) return nullptr;
  }
  for (const CtScheme& s : config.schemes) {
    for (const std::string& t : s.targets) {
      if (matches(t)) return &s;
    }
  }
  return nullptr;
}

Json CtConfigJson(const WeightFormat& f, bool per_channel, const std::vector<std::string>& targets,
                  const std::vector<std::string>& ignore) {
  Json weights = Json::MakeObject();
  weights.Set("num_bits", Json::Int(4));
  weights.Set("type", Json::String("int"));
  weights.Set("symmetric", Json::Bool(!f.zero_point));
  weights.Set("group_size", per_channel ? Json() : Json::Int(f.group_size));
  weights.Set("strategy", Json::String(per_channel ? "channel" : "group"));
  weights.Set("block_structure", Json());
  weights.Set("dynamic", Json::Bool(false));
  weights.Set("actorder", Json());
  weights.Set("scale_dtype", Json());
  weights.Set("zp_dtype", f.zero_point ? Json::String("torch.int8") : Json());
  weights.Set("observer", Json::String("minmax"));
  weights.Set("observer_kwargs", Json::MakeObject());
  Json group = Json::MakeObject();
  Json t = Json::MakeArray();
  for (const std::string& s : targets) t.Push(Json::String(s));
  group.Set("targets", std::move(t));
  group.Set("weights", std::move(weights));
  group.Set("input_activations", Json());
  group.Set("output_activations", Json());
  group.Set("format", Json::String("pack-quantized"));
  Json groups = Json::MakeObject();
  groups.Set("group_0", std::move(group));
  Json q = Json::MakeObject();
  q.Set("config_groups", std::move(groups));
  q.Set("format", Json::String("pack-quantized"));
  q.Set("global_compression_ratio", Json());
  Json ig = Json::MakeArray();
  for (const std::string& s : ignore) ig.Push(Json::String(s));
  q.Set("ignore", std::move(ig));
  q.Set("kv_cache_scheme", Json());
  q.Set("quant_method", Json::String("compressed-tensors"));
  q.Set("quantization_status", Json::String("compressed"));
  q.Set("sparsity_config", Json::MakeObject());
  q.Set("transform_config", Json());
  q.Set("version", Json::String("0.20.1"));
  return q;
}

}  // namespace gannet::quant
