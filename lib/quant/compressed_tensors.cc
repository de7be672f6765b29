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
    "gannet loads compressed-tensors 'pack-quantized' int4 weight-only (W4A16) and "
    "'float-quantized' FP8 E4M3 (channel, tensor or 128x128 block weights; FP8 activations "
    "dynamic per token or static) and 'nvfp4-pack-quantized' NVFP4 checkpoints";

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

// The fields a QuantizationArgs may hold.
absl::Status CheckArgsKeys(const Json& obj, std::string_view source, std::string_view path) {
  return CheckKnownKeys(
      obj,
      {"num_bits", "type", "symmetric", "group_size", "strategy", "block_structure", "dynamic",
       "actorder", "scale_dtype", "zp_dtype", "observer", "observer_kwargs"},
      source, path);
}

// observer / observer_kwargs (calibration settings, unused) must at least have their types.
absl::Status CheckObserver(const Json& w, std::string_view source, const std::string& path) {
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

// `symmetric` must be absent or true (FP8 weights and activations have no zero points).
absl::Status ExpectSymmetric(const Json& w, std::string_view source, const std::string& path) {
  const Json* sym = w.Find("symmetric");
  if (IsAbsent(sym)) return absl::OkStatus();
  if (!sym->is_bool()) {
    return InvalidArgumentError("{}.symmetric: expected true or false", Where(source, path));
  }
  if (!sym->AsBool()) {
    return UnimplementedError(
        "{}.symmetric: asymmetric FP8 (zero points) is not supported (expected true); {}",
        Where(source, path), kExpected);
  }
  return absl::OkStatus();
}

// The strategy as compressed-tensors infers it when absent: group_size > 0 group, -1 channel,
// none tensor.
absl::StatusOr<std::string> Strategy(const Json& w, std::string_view source,
                                     const std::string& path) {
  const Json* strategy = w.Find("strategy");
  const Json* group = w.Find("group_size");
  if (!IsAbsent(strategy)) {
    if (!strategy->is_string()) {
      return InvalidArgumentError("{}.strategy: not a string", Where(source, path));
    }
    return strategy->AsString();
  }
  if (group != nullptr && group->is_int() && group->AsInt() > 0) return std::string("group");
  if (group != nullptr && group->is_int() && group->AsInt() == -1) return std::string("channel");
  if (IsAbsent(group)) return std::string("tensor");
  return InvalidArgumentError("{}.group_size: expected a positive integer, -1 or null",
                              Where(source, path));
}

// scale_dtype null or a float type; zp_dtype null or `zp_types` (the spellings accepted).
absl::Status CheckDtypes(const Json& w, std::string_view source, const std::string& path,
                         std::initializer_list<std::string_view> zp_types) {
  const Json* sd = w.Find("scale_dtype");
  if (!IsAbsent(sd)) {
    if (!sd->is_string()) {
      return InvalidArgumentError("{}.scale_dtype: expected a torch dtype string",
                                  Where(source, path));
    }
    if (!TorchDType(sd->AsString()).has_value()) {
      return UnimplementedError(
          "{}.scale_dtype: '{}' is not supported (expected torch.bfloat16, torch.float16 or "
          "torch.float32)",
          Where(source, path), sd->AsString());
    }
  }
  const Json* zd = w.Find("zp_dtype");
  if (!IsAbsent(zd)) {
    bool ok = false;
    for (std::string_view t : zp_types) ok |= zd->is_string() && zd->AsString() == t;
    if (!ok) {
      return UnimplementedError("{}.zp_dtype: {} is not supported (expected {})",
                                Where(source, path), zd->Dump(), fmt::join(zp_types, " or "));
    }
  }
  return absl::OkStatus();
}

// FP8 E4M3 weights: strategy channel, tensor, or block [128, 128]; static scales.
absl::Status ParseFp8Weights(const Json& w, std::string_view source, const std::string& path,
                             CtScheme* s) {
  s->elem = DType::kF8E4M3;
  GANNET_RETURN_IF_ERROR(ExpectSymmetric(w, source, path));
  GANNET_ASSIGN_OR_RETURN(const std::string st, Strategy(w, source, path));
  const Json* group = w.Find("group_size");
  const Json* block = w.Find("block_structure");
  if (st == "channel" || st == "tensor") {
    if (!IsAbsent(group) && !(st == "channel" && group->is_int() && group->AsInt() == -1)) {
      return InvalidArgumentError(
          "{}.group_size: strategy '{}' takes no group size (expected null)", Where(source, path),
          st);
    }
    if (!IsAbsent(block)) {
      return InvalidArgumentError(
          "{}.block_structure: strategy '{}' takes no block structure (expected null)",
          Where(source, path), st);
    }
    s->per_channel = st == "channel";
    s->per_tensor = st == "tensor";
  } else if (st == "block") {
    if (!IsAbsent(group)) {
      return InvalidArgumentError("{}.group_size: strategy 'block' takes no group size",
                                  Where(source, path));
    }
    // compressed-tensors also accepts the older string spelling "128x128".
    int64_t dims[2] = {0, 0};
    if (block != nullptr && block->is_array() && block->AsArray().size() == 2 &&
        block->AsArray()[0].is_int() && block->AsArray()[1].is_int()) {
      dims[0] = block->AsArray()[0].AsInt();
      dims[1] = block->AsArray()[1].AsInt();
    } else if (block != nullptr && block->is_string()) {
      const std::string& b = block->AsString();
      const size_t x = b.find('x');
      if (x != std::string::npos && x > 0 && x < 6 && b.size() - x - 1 > 0 && b.size() - x < 7 &&
          b.find_first_not_of("0123456789x") == std::string::npos && b.rfind('x') == x) {
        dims[0] = std::stoll(b.substr(0, x));
        dims[1] = std::stoll(b.substr(x + 1));
      }
    }
    if (dims[0] <= 0 || dims[1] <= 0) {
      return InvalidArgumentError(
          "{}.block_structure: missing or malformed (expected [rows, cols], such as [128, 128])",
          Where(source, path));
    }
    if (dims[0] != 128 || dims[1] != 128) {
      return UnimplementedError(
          "{}.block_structure: [{}, {}] is not supported (expected [128, 128], the blocks of "
          "FP8_BLOCK checkpoints); {}",
          Where(source, path), dims[0], dims[1], kExpected);
    }
    s->block_rows = 128;
    s->block_cols = 128;
  } else if (st == "group" || st == "token" || st == "tensor_group" || st == "attn_head") {
    return UnimplementedError(
        "{}.strategy: '{}' is not supported for FP8 weights (expected 'channel', 'tensor' or "
        "'block'); {}",
        Where(source, path), st, kExpected);
  } else {
    return InvalidArgumentError(
        "{}.strategy: unknown strategy '{}' (expected 'channel', 'tensor' or 'block')",
        Where(source, path), st);
  }
  const Json* dyn = w.Find("dynamic");
  if (!IsAbsent(dyn) && !(dyn->is_bool() && !dyn->AsBool())) {
    return UnimplementedError(
        "{}.dynamic: dynamic weight scales are not supported (expected false)",
        Where(source, path));
  }
  const Json* act = w.Find("actorder");
  if (!IsAbsent(act) && !(act->is_bool() && !act->AsBool())) {
    return InvalidArgumentError(
        "{}.actorder: FP8 weights have no activation ordering (expected "
        "null)",
        Where(source, path));
  }
  GANNET_RETURN_IF_ERROR(CheckDtypes(w, source, path, {"torch.float8_e4m3fn", "float8_e4m3fn"}));
  return CheckObserver(w, source, path);
}

// A group's input_activations for FP8 weights: FP8 E4M3, symmetric, and either dynamic per token
// (strategy token; or strategy group with a group size: per-token groups) or static per tensor
// (an input_scale tensor per module).
absl::Status ParseFp8Activations(const Json& a, std::string_view source, const std::string& path,
                                 CtScheme* s) {
  if (!a.is_object()) {
    return InvalidArgumentError("{}: is {}, expected an object", Where(source, path),
                                Json::TypeName(a.type()));
  }
  GANNET_RETURN_IF_ERROR(CheckArgsKeys(a, source, path));
  const Json* bits = a.Find("num_bits");
  const Json* type = a.Find("type");
  if (bits == nullptr || !bits->is_int() || type == nullptr || !type->is_string()) {
    return InvalidArgumentError("{}: num_bits and type missing (expected 8 and 'float')",
                                Where(source, path));
  }
  if (bits->AsInt() != 8 || type->AsString() != "float") {
    return UnimplementedError(
        "{}: {}-bit '{}' activations are not supported (expected 8-bit 'float': FP8 E4M3); {}",
        Where(source, path), bits->AsInt(), type->AsString(), kExpected);
  }
  GANNET_RETURN_IF_ERROR(ExpectSymmetric(a, source, path));
  GANNET_ASSIGN_OR_RETURN(const std::string st, Strategy(a, source, path));
  const Json* dyn = a.Find("dynamic");
  if (!IsAbsent(dyn) && !dyn->is_bool()) {
    return UnimplementedError("{}.dynamic: {} is not supported (expected true or false)",
                              Where(source, path), dyn->Dump());
  }
  const bool dynamic = !IsAbsent(dyn) && dyn->AsBool();
  const Json* group = a.Find("group_size");
  if (!IsAbsent(a.Find("block_structure"))) {
    return UnimplementedError("{}.block_structure: block-scaled activations are not supported",
                              Where(source, path));
  }
  if (dynamic && st == "token") {
    s->act = ActivationQuant::kDynamicFp8;
  } else if (dynamic && st == "group") {
    if (group == nullptr || !group->is_int() || group->AsInt() <= 0 || group->AsInt() > 65536) {
      return InvalidArgumentError(
          "{}.group_size: strategy 'group' needs a positive group size (FP8_BLOCK: 128)",
          Where(source, path));
    }
    s->act = ActivationQuant::kDynamicFp8;
    s->act_group = static_cast<int>(group->AsInt());
  } else if (!dynamic && st == "tensor") {
    s->act = ActivationQuant::kStaticFp8;
  } else if (dynamic && st == "tensor") {
    return UnimplementedError(
        "{}: dynamic per-tensor activation scales (one scale over every token of a batch) are not "
        "supported (expected dynamic per token, or static); {}",
        Where(source, path), kExpected);
  } else {
    return UnimplementedError(
        "{}: {} activation strategy '{}' is not supported (expected dynamic 'token' or 'group', "
        "or static 'tensor'); {}",
        Where(source, path), dynamic ? "dynamic" : "static", st, kExpected);
  }
  if (st != "group" && !IsAbsent(group) && !(group->is_int() && group->AsInt() == -1)) {
    return InvalidArgumentError("{}.group_size: strategy '{}' takes no group size",
                                Where(source, path), st);
  }
  if (!IsAbsent(a.Find("actorder"))) {
    return InvalidArgumentError("{}.actorder: expected null", Where(source, path));
  }
  GANNET_RETURN_IF_ERROR(CheckDtypes(a, source, path, {"torch.float8_e4m3fn", "float8_e4m3fn"}));
  return CheckObserver(a, source, path);
}

// NVFP4 weights and (W4A4) activations: FP4 E2M1, symmetric, strategy tensor_group with groups
// of 16 and FP8 E4M3 group scales (under a global scale).
absl::Status ParseNvfp4Args(const Json& a, std::string_view source, const std::string& path,
                            bool activations) {
  GANNET_RETURN_IF_ERROR(CheckArgsKeys(a, source, path));
  GANNET_RETURN_IF_ERROR(ExpectSymmetric(a, source, path));
  GANNET_ASSIGN_OR_RETURN(const std::string st, Strategy(a, source, path));
  if (st != "tensor_group") {
    return UnimplementedError(
        "{}.strategy: '{}' is not supported for FP4 (expected 'tensor_group': NVFP4); {}",
        Where(source, path), st, kExpected);
  }
  const Json* group = a.Find("group_size");
  if (group == nullptr || !group->is_int() || group->AsInt() != 16) {
    return UnimplementedError("{}.group_size: {} is not supported (expected 16: NVFP4); {}",
                              Where(source, path), group == nullptr ? "missing" : group->Dump(),
                              kExpected);
  }
  const Json* dyn = a.Find("dynamic");
  const bool is_local = dyn != nullptr && dyn->is_string() && dyn->AsString() == "local";
  const bool is_static = IsAbsent(dyn) || (dyn->is_bool() && !dyn->AsBool());
  if (activations ? !is_local : !is_static) {
    return UnimplementedError("{}.dynamic: {} is not supported (expected {}); {}",
                              Where(source, path), dyn == nullptr ? "missing" : dyn->Dump(),
                              activations ? "'local': group scales per token under a static "
                                            "input_global_scale"
                                          : "false",
                              kExpected);
  }
  if (!IsAbsent(a.Find("block_structure")) || !IsAbsent(a.Find("actorder"))) {
    return InvalidArgumentError("{}: NVFP4 has no block_structure or actorder (expected null)",
                                Where(source, path));
  }
  const Json* sd = a.Find("scale_dtype");
  if (!IsAbsent(sd) && !(sd->is_string() && (sd->AsString() == "torch.float8_e4m3fn" ||
                                             sd->AsString() == "float8_e4m3fn"))) {
    return UnimplementedError("{}.scale_dtype: {} is not supported (expected torch.float8_e4m3fn)",
                              Where(source, path), sd->Dump());
  }
  const Json* zd = a.Find("zp_dtype");
  if (!IsAbsent(zd) && !(zd->is_string() && (zd->AsString() == "torch.float8_e4m3fn" ||
                                             zd->AsString() == "float8_e4m3fn"))) {
    return UnimplementedError("{}.zp_dtype: {} is not supported (expected torch.float8_e4m3fn)",
                              Where(source, path), zd->Dump());
  }
  return CheckObserver(a, source, path);
}

absl::Status ParseInt4Weights(const Json& w, std::string_view source, const std::string& path,
                              CtScheme* s);

absl::Status ParseWeights(const Json& w, std::string_view source, const std::string& path,
                          CtScheme* s) {
  if (!w.is_object()) {
    return InvalidArgumentError("{}: is {}, expected an object", Where(source, path),
                                Json::TypeName(w.type()));
  }
  GANNET_RETURN_IF_ERROR(CheckArgsKeys(w, source, path));
  const Json* bits = w.Find("num_bits");
  if (bits == nullptr || !bits->is_int()) {
    return InvalidArgumentError("{}.num_bits: missing or not an integer (expected 4 or 8)",
                                Where(source, path));
  }
  const Json* type = w.Find("type");
  if (type == nullptr || !type->is_string()) {
    return InvalidArgumentError("{}.type: missing or not a string (expected 'int' or 'float')",
                                Where(source, path));
  }
  if (bits->AsInt() == 8 && type->AsString() == "float") {
    return ParseFp8Weights(w, source, path, s);
  }
  if (bits->AsInt() == 4 && type->AsString() == "float") {
    s->elem = DType::kF4E2M1;
    s->group_size = 16;
    return ParseNvfp4Args(w, source, path, false);
  }
  if (bits->AsInt() != 4) {
    return UnimplementedError(
        "{}.num_bits: {} is not supported (expected 4 with type 'int', or 8 with type 'float'); "
        "{}",
        Where(source, path), bits->AsInt(), kExpected);
  }
  return ParseInt4Weights(w, source, path, s);
}

absl::Status ParseInt4Weights(const Json& w, std::string_view source, const std::string& path,
                              CtScheme* s) {
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
  return CheckObserver(w, source, path);
}

}  // namespace

WeightFormat CtScheme::Format(int64_t k, DType scale_type) const {
  if (nvfp4()) {
    WeightFormat f = WeightFormat::Nvfp4();
    f.act = act;
    f.act_group = act_group;
    return f;
  }
  if (fp8()) {
    WeightFormat f = per_channel  ? WeightFormat::Fp8Channel()
                     : per_tensor ? WeightFormat::Fp8Tensor()
                                  : WeightFormat::Fp8Block(block_rows, block_cols);
    f.scale = scale_type;
    f.act = act;
    f.act_group = act_group;
    return f;
  }
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
  // The checkpoint's format; a group's own `format` overrides it ("mixed-precision": each group
  // names its own). Each scheme's weights must be in the format compressed-tensors packs them in.
  const Json* top_format = q.Find("format");
  if (top_format == nullptr || !top_format->is_string()) {
    return InvalidArgumentError(
        "{}: missing or not a string (expected 'pack-quantized' or "
        "'float-quantized')",
        Where(source, "format"));
  }
  const std::string model_format = top_format->AsString();
  if (model_format != "pack-quantized" && model_format != "float-quantized" &&
      model_format != "naive-quantized" && model_format != "nvfp4-pack-quantized" &&
      model_format != "mixed-precision") {
    return UnimplementedError(
        "{}: '{}' is not supported (expected 'pack-quantized', 'float-quantized', "
        "'naive-quantized', 'nvfp4-pack-quantized' or 'mixed-precision'); {}",
        Where(source, "format"), model_format, kExpected);
  }
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
    if (!IsAbsent(g.Find("output_activations"))) {
      return UnimplementedError(
          "{}.output_activations: output quantization is not supported (expected null); {}",
          Where(source, path), kExpected);
    }
    const Json* w = g.Find("weights");
    if (IsAbsent(w)) {
      return InvalidArgumentError("{}.weights: missing (expected the weight arguments)",
                                  Where(source, path));
    }
    GANNET_RETURN_IF_ERROR(ParseWeights(*w, source, path + ".weights", &s));
    const Json* in = g.Find("input_activations");
    if (!IsAbsent(in) && s.nvfp4()) {
      if (!in->is_object()) {
        return InvalidArgumentError("{}.input_activations: expected an object",
                                    Where(source, path));
      }
      const Json* ab = in->Find("num_bits");
      const Json* at = in->Find("type");
      if (ab == nullptr || !ab->is_int() || ab->AsInt() != 4 || at == nullptr || !at->is_string() ||
          at->AsString() != "float") {
        return UnimplementedError(
            "{}.input_activations: only FP4 activations (num_bits 4, type float) go with NVFP4 "
            "weights; {}",
            Where(source, path), kExpected);
      }
      GANNET_RETURN_IF_ERROR(ParseNvfp4Args(*in, source, path + ".input_activations", true));
      s.act = ActivationQuant::kDynamicNvfp4;
      s.act_group = 16;
    } else if (!IsAbsent(in)) {
      if (!s.fp8()) {
        return UnimplementedError(
            "{}.input_activations: activation quantization with int4 weights is not supported "
            "(expected null: weight-only W4A16); {}",
            Where(source, path), kExpected);
      }
      GANNET_RETURN_IF_ERROR(ParseFp8Activations(*in, source, path + ".input_activations", &s));
    }
    const Json* fmt_v = g.Find("format");
    std::string group_format = model_format;
    if (!IsAbsent(fmt_v)) {
      if (!fmt_v->is_string()) {
        return InvalidArgumentError("{}.format: expected a string", Where(source, path));
      }
      group_format = fmt_v->AsString();
      if (group_format != "pack-quantized" && group_format != "float-quantized" &&
          group_format != "naive-quantized" && group_format != "nvfp4-pack-quantized") {
        return UnimplementedError(
            "{}.format: '{}' is not supported (expected 'pack-quantized', 'float-quantized', "
            "'naive-quantized' or 'nvfp4-pack-quantized'); {}",
            Where(source, path), group_format, kExpected);
      }
      if (model_format != "mixed-precision" && group_format != model_format) {
        return InvalidArgumentError(
            "{}.format: '{}' but quantization_config.format is '{}' (expected the same, or "
            "'mixed-precision' there)",
            Where(source, path), group_format, model_format);
      }
    } else if (model_format == "mixed-precision") {
      return InvalidArgumentError(
          "{}.format: missing (a 'mixed-precision' checkpoint names each group's format)",
          Where(source, path));
    }
    const bool format_ok =
        s.nvfp4() ? group_format == "nvfp4-pack-quantized"
        : s.fp8() ? (group_format == "float-quantized" || group_format == "naive-quantized")
                  : group_format == "pack-quantized";
    if (!format_ok) {
      return UnimplementedError(
          "{}: {} weights in format '{}' are not supported (expected '{}'); {}",
          Where(source, path + ".format"),
          s.nvfp4() ? "NVFP4"
          : s.fp8() ? "FP8"
                    : "int4",
          group_format,
          s.nvfp4() ? "nvfp4-pack-quantized"
          : s.fp8() ? "float-quantized"
                    : "pack-quantized",
          kExpected);
    }
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

namespace {

// compressed-tensors' QuantizationArgs for FP8 E4M3 (symmetric), as the presets serialize them.
Json Fp8Args(std::string_view strategy, Json group_size, Json block, bool dynamic) {
  Json a = Json::MakeObject();
  a.Set("num_bits", Json::Int(8));
  a.Set("type", Json::String("float"));
  a.Set("symmetric", Json::Bool(true));
  a.Set("group_size", std::move(group_size));
  a.Set("strategy", Json::String(std::string(strategy)));
  a.Set("block_structure", std::move(block));
  a.Set("dynamic", Json::Bool(dynamic));
  a.Set("actorder", Json());
  a.Set("scale_dtype", Json());
  a.Set("zp_dtype", Json());
  a.Set("observer", dynamic ? Json() : Json::String("minmax"));
  a.Set("observer_kwargs", Json::MakeObject());
  return a;
}

}  // namespace

Json CtConfigJson(const WeightFormat& f, bool per_channel, const std::vector<std::string>& targets,
                  const std::vector<std::string>& ignore) {
  const bool fp8 = f.elem == DType::kF8E4M3;
  Json weights = Json::MakeObject();
  Json input;
  if (fp8) {
    Json block;
    if (f.granularity == ScaleGranularity::kBlock) {
      block = Json::MakeArray();
      block.Push(Json::Int(f.block_rows));
      block.Push(Json::Int(f.group_size));
    }
    weights = Fp8Args(f.granularity == ScaleGranularity::kChannel  ? "channel"
                      : f.granularity == ScaleGranularity::kTensor ? "tensor"
                                                                   : "block",
                      Json(), std::move(block), false);
    if (f.act == ActivationQuant::kDynamicFp8) {
      input = f.act_group > 0 ? Fp8Args("group", Json::Int(f.act_group), Json(), true)
                              : Fp8Args("token", Json(), Json(), true);
    } else if (f.act == ActivationQuant::kStaticFp8) {
      input = Fp8Args("tensor", Json(), Json(), false);
    }
  }
  const bool nvfp4 = f.elem == DType::kF4E2M1;
  if (nvfp4) {
    // NVFP4A16 (weight-only), as the preset serializes it.
    weights.Set("num_bits", Json::Int(4));
    weights.Set("type", Json::String("float"));
    weights.Set("symmetric", Json::Bool(true));
    weights.Set("group_size", Json::Int(16));
    weights.Set("strategy", Json::String("tensor_group"));
    weights.Set("dynamic", Json::Bool(false));
    weights.Set("scale_dtype", Json::String("torch.float8_e4m3fn"));
    weights.Set("zp_dtype", Json::String("torch.float8_e4m3fn"));
  }
  const char* format =
      nvfp4 ? "nvfp4-pack-quantized"
      : fp8 ? (f.act == ActivationQuant::kNone ? "naive-quantized" : "float-quantized")
            : "pack-quantized";
  if (!fp8 && !nvfp4) {
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
  }
  Json group = Json::MakeObject();
  Json t = Json::MakeArray();
  for (const std::string& s : targets) t.Push(Json::String(s));
  group.Set("targets", std::move(t));
  group.Set("weights", std::move(weights));
  group.Set("input_activations", std::move(input));
  group.Set("output_activations", Json());
  group.Set("format", Json::String(format));
  Json groups = Json::MakeObject();
  groups.Set("group_0", std::move(group));
  Json q = Json::MakeObject();
  q.Set("config_groups", std::move(groups));
  q.Set("format", Json::String(format));
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
