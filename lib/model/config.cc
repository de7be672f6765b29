#include "lib/model/config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "lib/common/dtype.h"
#include "lib/common/file_util.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/common/utf8.h"
#include "lib/model/model_format.h"
#include "lib/quant/awq.h"
#include "lib/quant/modelopt.h"

namespace gannet::model {
namespace {

// Reads typed fields out of one JSON object and produces errors that name the file and field.
class FieldReader {
 public:
  FieldReader(const Json& obj, std::string source, std::string path)
      : obj_(obj), source_(std::move(source)), path_(std::move(path)) {}

  std::string Name(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  absl::Status TypeError(std::string_view key, std::string_view want, const Json& got) const {
    return InvalidArgumentError("{}: field '{}' must be {}, got {}", source_, Name(key), want,
                                Json::TypeName(got.type()));
  }

  // Absent or null keeps the default.
  template <typename T>
  absl::Status Int(std::string_view key, T* out, bool null_ok = true) const {
    const Json* v = obj_.Find(key);
    if (v == nullptr || (v->is_null() && null_ok)) return absl::OkStatus();
    if (!v->is_int()) return TypeError(key, "an integer", *v);
    *out = static_cast<T>(v->AsInt());
    if (static_cast<int64_t>(*out) != v->AsInt()) {
      return InvalidArgumentError("{}: field '{}' = {} is out of range", source_, Name(key),
                                  v->AsInt());
    }
    return absl::OkStatus();
  }
  absl::Status Double(std::string_view key, double* out) const {
    const Json* v = obj_.Find(key);
    if (v == nullptr || v->is_null()) return absl::OkStatus();
    if (!v->is_number()) return TypeError(key, "a number", *v);
    *out = v->AsDouble();
    return absl::OkStatus();
  }
  absl::Status OptDouble(std::string_view key, std::optional<double>* out) const {
    const Json* v = obj_.Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (v->is_null()) {
      out->reset();
      return absl::OkStatus();
    }
    if (!v->is_number()) return TypeError(key, "a number or null", *v);
    *out = v->AsDouble();
    return absl::OkStatus();
  }
  absl::Status Bool(std::string_view key, bool* out) const {
    const Json* v = obj_.Find(key);
    if (v == nullptr || v->is_null()) return absl::OkStatus();
    if (!v->is_bool()) return TypeError(key, "true or false", *v);
    *out = v->AsBool();
    return absl::OkStatus();
  }
  absl::Status String(std::string_view key, std::string* out) const {
    const Json* v = obj_.Find(key);
    if (v == nullptr || v->is_null()) return absl::OkStatus();
    if (!v->is_string()) return TypeError(key, "a string", *v);
    *out = v->AsString();
    return absl::OkStatus();
  }
  // An int or a list of ints (eos_token_id).
  absl::Status IntList(std::string_view key, std::vector<int>* out) const {
    const Json* v = obj_.Find(key);
    if (v == nullptr || v->is_null()) return absl::OkStatus();
    // Each id must fit an int: 4294967297 must not become 1, a valid id.
    auto one = [&](const Json& e) -> absl::StatusOr<int> {
      if (e.AsInt() < std::numeric_limits<int>::min() ||
          e.AsInt() > std::numeric_limits<int>::max()) {
        return InvalidArgumentError("{}: field '{}' holds {}, out of range", source_, Name(key),
                                    e.AsInt());
      }
      return static_cast<int>(e.AsInt());
    };
    if (v->is_int()) {
      GANNET_ASSIGN_OR_RETURN(const int id, one(*v));
      *out = {id};
      return absl::OkStatus();
    }
    if (!v->is_array()) return TypeError(key, "an integer or a list of integers", *v);
    out->clear();
    for (const Json& e : v->AsArray()) {
      if (!e.is_int()) return TypeError(key, "a list of integers", e);
      GANNET_ASSIGN_OR_RETURN(const int id, one(e));
      out->push_back(id);
    }
    return absl::OkStatus();
  }

  const std::string& source() const { return source_; }

 private:
  const Json& obj_;
  std::string source_;
  std::string path_;
};

absl::Status ParseRope(const Json& obj, const FieldReader& parent, std::string_view layer_key,
                       RopeParams* out) {
  std::string where = parent.Name("rope_parameters." + std::string(layer_key));
  FieldReader r(obj, parent.source(), where);
  std::string type = out->type == RopeType::kDefault ? "default" : "proportional";
  GANNET_RETURN_IF_ERROR(r.String("rope_type", &type));
  if (type == "default") {
    out->type = RopeType::kDefault;
  } else if (type == "proportional") {
    out->type = RopeType::kProportional;
  } else {
    return UnimplementedError("{}: {}.rope_type '{}' is not supported (default, proportional)",
                              parent.source(), where, type);
  }
  GANNET_RETURN_IF_ERROR(r.Double("rope_theta", &out->theta));
  GANNET_RETURN_IF_ERROR(r.Double("partial_rotary_factor", &out->partial_rotary_factor));
  GANNET_RETURN_IF_ERROR(r.Double("factor", &out->factor));
  if (!(out->theta > 0)) {
    return InvalidArgumentError("{}: {}.rope_theta must be > 0", parent.source(), where);
  }
  if (!(out->partial_rotary_factor > 0 && out->partial_rotary_factor <= 1)) {
    return InvalidArgumentError("{}: {}.partial_rotary_factor must be in (0, 1]", parent.source(),
                                where);
  }
  if (!(out->factor > 0)) {
    return InvalidArgumentError("{}: {}.factor must be > 0", parent.source(), where);
  }
  if (out->type == RopeType::kDefault && out->partial_rotary_factor != 1.0) {
    return UnimplementedError("{}: {}: partial rotation with rope_type 'default' is not supported",
                              parent.source(), where);
  }
  return absl::OkStatus();
}

// Applies the newer HF serialization ("per_layer_config": {"5": {"head_dim": 512, ...}}), which
// must agree with a single full-layer geometry.
absl::Status ApplyPerLayerConfig(const Json& plc, const FieldReader& r, TextConfig* c,
                                 bool* saw_full_kv_override, bool* saw_full_hd_override) {
  if (!plc.is_object()) return r.TypeError("per_layer_config", "an object", plc);
  for (const auto& [key, val] : plc.AsMembers()) {
    int64_t layer = -1;
    if (key == "full_attention" || key == "sliding_attention") continue;  // per-type views
    // Digits only (stoi would read "5abc" as 5), at most 9 of them: no overflow.
    const bool digits =
        !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) {
      return InvalidArgumentError("{}: per_layer_config key '{}' is not a layer index", r.source(),
                                  EscapeForMessage(key));
    }
    layer = std::stoll(key);
    if (layer < 0 || layer >= c->num_hidden_layers) {
      return InvalidArgumentError("{}: per_layer_config layer {} is out of range [0, {})",
                                  r.source(), layer, c->num_hidden_layers);
    }
    if (!val.is_object()) return r.TypeError("per_layer_config." + key, "an object", val);
    FieldReader lr(val, r.source(), "per_layer_config." + key);
    bool sliding = c->is_sliding(layer);
    int hd = sliding ? c->head_dim : c->global_head_dim;
    int kv = -1;
    GANNET_RETURN_IF_ERROR(lr.Int("head_dim", &hd));
    GANNET_RETURN_IF_ERROR(lr.Int("num_key_value_heads", &kv));
    if (sliding) {
      if (hd != c->head_dim || (kv != -1 && kv != c->num_key_value_heads)) {
        return UnimplementedError(
            "{}: per_layer_config.{} changes the geometry of a sliding layer; gannet supports one "
            "sliding geometry",
            r.source(), key);
      }
      continue;
    }
    // One full-layer geometry: a second full layer may not give another head_dim.
    if (*saw_full_hd_override && hd != c->global_head_dim) {
      return UnimplementedError(
          "{}: per_layer_config gives full layers different head_dim ({} and {})", r.source(),
          c->global_head_dim, hd);
    }
    c->global_head_dim = hd;
    *saw_full_hd_override = true;
    if (kv != -1) {
      if (*saw_full_kv_override && kv != c->num_global_key_value_heads) {
        return UnimplementedError("{}: per_layer_config gives full layers different KV head counts",
                                  r.source());
      }
      c->num_global_key_value_heads = kv;
      *saw_full_kv_override = true;
    }
  }
  return absl::OkStatus();
}

// Upper bounds of every count and size, before anything is sized from them.
absl::Status CheckBounds(const TextConfig& c, const FieldReader& r) {
  const struct {
    const char* name;
    int64_t value, max;
  } limits[] = {
      {"num_hidden_layers", c.num_hidden_layers, kMaxLayers},
      {"num_attention_heads", c.num_attention_heads, kMaxHeads},
      {"num_key_value_heads", c.num_key_value_heads, kMaxHeads},
      {"num_global_key_value_heads", c.num_global_key_value_heads, kMaxHeads},
      {"head_dim", c.head_dim, kMaxHeadDim},
      {"global_head_dim", c.global_head_dim, kMaxHeadDim},
      {"hidden_size", c.hidden_size, kMaxHidden},
      {"intermediate_size", c.intermediate_size, kMaxIntermediate},
      {"vocab_size", c.vocab_size, kMaxVocab},
      {"vocab_size_per_layer_input", c.vocab_size_per_layer_input, kMaxVocab},
      {"hidden_size_per_layer_input", c.hidden_size_per_layer_input, kMaxHidden},
      {"max_position_embeddings", c.max_position_embeddings, kMaxPositions},
      {"sliding_window", c.sliding_window, kMaxPositions},
      {"num_experts", c.num_experts, kMaxExperts},
      {"top_k_experts", c.top_k_experts, kMaxExperts},
      {"moe_intermediate_size", c.moe_intermediate_size, kMaxIntermediate},
      {"num_kv_shared_layers", c.num_kv_shared_layers, kMaxLayers},
  };
  for (const auto& l : limits) {
    if (l.value > l.max) {
      return InvalidArgumentError("{}: {} is {}, above the largest gannet accepts ({})", r.source(),
                                  r.Name(l.name), l.value, l.max);
    }
  }
  return absl::OkStatus();
}

absl::Status ParseTextConfig(const Json& obj, const std::string& source, const std::string& path,
                             TextConfig* c) {
  if (!obj.is_object()) {
    return InvalidArgumentError("{}: '{}' must be an object", source, path.empty() ? "root" : path);
  }
  FieldReader r(obj, source, path);
  GANNET_RETURN_IF_ERROR(r.Int("vocab_size", &c->vocab_size));
  GANNET_RETURN_IF_ERROR(r.Int("hidden_size", &c->hidden_size));
  GANNET_RETURN_IF_ERROR(r.Int("intermediate_size", &c->intermediate_size));
  GANNET_RETURN_IF_ERROR(r.Int("num_hidden_layers", &c->num_hidden_layers));
  GANNET_RETURN_IF_ERROR(r.Int("num_attention_heads", &c->num_attention_heads));
  GANNET_RETURN_IF_ERROR(r.Int("num_key_value_heads", &c->num_key_value_heads));
  GANNET_RETURN_IF_ERROR(r.Int("head_dim", &c->head_dim));
  GANNET_RETURN_IF_ERROR(r.Int("global_head_dim", &c->global_head_dim));
  GANNET_RETURN_IF_ERROR(r.Int("num_global_key_value_heads", &c->num_global_key_value_heads));
  GANNET_RETURN_IF_ERROR(r.String("hidden_activation", &c->hidden_activation));
  GANNET_RETURN_IF_ERROR(r.Int("max_position_embeddings", &c->max_position_embeddings));
  GANNET_RETURN_IF_ERROR(r.Double("rms_norm_eps", &c->rms_norm_eps));
  GANNET_RETURN_IF_ERROR(r.Int("pad_token_id", &c->pad_token_id));
  GANNET_RETURN_IF_ERROR(r.IntList("eos_token_id", &c->eos_token_ids));
  GANNET_RETURN_IF_ERROR(r.Int("bos_token_id", &c->bos_token_id));
  GANNET_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &c->tie_word_embeddings));
  GANNET_RETURN_IF_ERROR(r.Bool("attention_bias", &c->attention_bias));
  GANNET_RETURN_IF_ERROR(r.Int("sliding_window", &c->sliding_window));
  GANNET_RETURN_IF_ERROR(r.OptDouble("final_logit_softcapping", &c->final_logit_softcapping));
  GANNET_RETURN_IF_ERROR(r.String("use_bidirectional_attention", &c->use_bidirectional_attention));
  GANNET_RETURN_IF_ERROR(r.Int("vocab_size_per_layer_input", &c->vocab_size_per_layer_input));
  GANNET_RETURN_IF_ERROR(r.Int("hidden_size_per_layer_input", &c->hidden_size_per_layer_input));
  GANNET_RETURN_IF_ERROR(r.Bool("attention_k_eq_v", &c->attention_k_eq_v));
  GANNET_RETURN_IF_ERROR(r.Int("num_kv_shared_layers", &c->num_kv_shared_layers));
  GANNET_RETURN_IF_ERROR(r.Bool("enable_moe_block", &c->enable_moe_block));
  GANNET_RETURN_IF_ERROR(r.Bool("use_double_wide_mlp", &c->use_double_wide_mlp));
  GANNET_RETURN_IF_ERROR(r.Int("num_experts", &c->num_experts));
  GANNET_RETURN_IF_ERROR(r.Int("top_k_experts", &c->top_k_experts));
  GANNET_RETURN_IF_ERROR(r.Int("moe_intermediate_size", &c->moe_intermediate_size));

  if (c->num_hidden_layers <= 0) {
    return InvalidArgumentError("{}: {} must be > 0", source, r.Name("num_hidden_layers"));
  }
  GANNET_RETURN_IF_ERROR(CheckBounds(*c, r));
  // layer_types: absent means the 5:1 pattern; the last layer is forced to full (as HF does).
  c->layer_types.clear();
  if (const Json* lt = obj.Find("layer_types"); lt != nullptr && !lt->is_null()) {
    if (!lt->is_array()) return r.TypeError("layer_types", "a list of strings", *lt);
    for (size_t i = 0; i < lt->AsArray().size(); ++i) {
      const Json& e = lt->AsArray()[i];
      if (!e.is_string()) return r.TypeError("layer_types", "a list of strings", e);
      if (e.AsString() == "sliding_attention") {
        c->layer_types.push_back(LayerType::kSliding);
      } else if (e.AsString() == "full_attention") {
        c->layer_types.push_back(LayerType::kFull);
      } else {
        return InvalidArgumentError(
            "{}: {}[{}] is '{}': unknown layer type (sliding_attention, full_attention)", source,
            r.Name("layer_types"), i, e.AsString());
      }
    }
    if (static_cast<int>(c->layer_types.size()) != c->num_hidden_layers) {
      return InvalidArgumentError("{}: {} has {} entries but num_hidden_layers is {}", source,
                                  r.Name("layer_types"), c->layer_types.size(),
                                  c->num_hidden_layers);
    }
  } else {
    for (int i = 0; i < c->num_hidden_layers; ++i) {
      c->layer_types.push_back((i + 1) % 6 ? LayerType::kSliding : LayerType::kFull);
    }
  }
  if (c->layer_types.back() != LayerType::kFull) {
    GANNET_LOG_WARNING("{}: the last layer must be full_attention; forcing it (as HF does)",
                       source);
    c->layer_types.back() = LayerType::kFull;
  }

  if (const Json* rp = obj.Find("rope_parameters"); rp != nullptr && !rp->is_null()) {
    if (!rp->is_object()) return r.TypeError("rope_parameters", "an object", *rp);
    for (const auto& [key, val] : rp->AsMembers()) {
      if (!val.is_object()) return r.TypeError("rope_parameters." + key, "an object", val);
      if (key == "sliding_attention") {
        GANNET_RETURN_IF_ERROR(ParseRope(val, r, key, &c->rope_sliding));
      } else if (key == "full_attention") {
        GANNET_RETURN_IF_ERROR(ParseRope(val, r, key, &c->rope_full));
      } else {
        return InvalidArgumentError("{}: rope_parameters has unknown layer type '{}'", source, key);
      }
    }
  }

  bool saw_full_kv_override = false, saw_full_hd_override = false;
  if (const Json* plc = obj.Find("per_layer_config"); plc != nullptr && !plc->is_null()) {
    GANNET_RETURN_IF_ERROR(
        ApplyPerLayerConfig(*plc, r, c, &saw_full_kv_override, &saw_full_hd_override));
    // The overrides are bounded like the fields they replace.
    GANNET_RETURN_IF_ERROR(CheckBounds(*c, r));
    if (saw_full_kv_override && !c->attention_k_eq_v) {
      // Newer HF only writes a full-layer KV override when k_eq_v; honour it as written.
      if (c->num_global_key_value_heads != c->num_key_value_heads) {
        return UnimplementedError(
            "{}: per_layer_config overrides full-layer KV heads without attention_k_eq_v", source);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Positive(const std::string& source, std::string_view name, int64_t v) {
  if (v <= 0) return InvalidArgumentError("{}: {} must be > 0, got {}", source, name, v);
  return absl::OkStatus();
}

// Stop ids: at most kMaxEosIds, each a token of the vocabulary (the engine would otherwise drop an
// id past the vocabulary and never stop on it).
absl::Status CheckEosIds(const std::vector<int>& ids, int64_t vocab_size, std::string_view source,
                         std::string_view field) {
  if (static_cast<int64_t>(ids.size()) > kMaxEosIds) {
    return InvalidArgumentError("{}: {} lists {} ids (at most {})", source, field, ids.size(),
                                kMaxEosIds);
  }
  for (int id : ids) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgumentError("{}: {} {} outside vocab_size {}", source, field, id, vocab_size);
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTextConfig(const TextConfig& c, const std::string& source, ModelKind kind) {
  GANNET_RETURN_IF_ERROR(Positive(source, "vocab_size", c.vocab_size));
  GANNET_RETURN_IF_ERROR(Positive(source, "hidden_size", c.hidden_size));
  GANNET_RETURN_IF_ERROR(Positive(source, "intermediate_size", c.intermediate_size));
  GANNET_RETURN_IF_ERROR(Positive(source, "num_attention_heads", c.num_attention_heads));
  GANNET_RETURN_IF_ERROR(Positive(source, "num_key_value_heads", c.num_key_value_heads));
  GANNET_RETURN_IF_ERROR(Positive(source, "head_dim", c.head_dim));
  GANNET_RETURN_IF_ERROR(Positive(source, "global_head_dim", c.global_head_dim));
  GANNET_RETURN_IF_ERROR(Positive(source, "max_position_embeddings", c.max_position_embeddings));
  if (c.sliding_window <= 0) {
    return InvalidArgumentError("{}: sliding_window must be > 0, got {}", source, c.sliding_window);
  }
  if (c.head_dim % 2 || c.global_head_dim % 2) {
    return InvalidArgumentError("{}: head_dim ({}) and global_head_dim ({}) must be even for RoPE",
                                source, c.head_dim, c.global_head_dim);
  }
  if (c.num_attention_heads % c.num_key_value_heads) {
    return InvalidArgumentError(
        "{}: num_attention_heads ({}) is not a multiple of num_key_value_heads ({})", source,
        c.num_attention_heads, c.num_key_value_heads);
  }
  if (c.num_global_key_value_heads < 0) {
    return InvalidArgumentError("{}: num_global_key_value_heads must be >= 0", source);
  }
  if (c.attention_k_eq_v && c.num_global_key_value_heads > 0 &&
      c.num_attention_heads % c.num_global_key_value_heads) {
    return InvalidArgumentError(
        "{}: num_attention_heads ({}) is not a multiple of num_global_key_value_heads ({})", source,
        c.num_attention_heads, c.num_global_key_value_heads);
  }
  if (!(c.rms_norm_eps > 0)) return InvalidArgumentError("{}: rms_norm_eps must be > 0", source);
  if (c.hidden_activation != "gelu_pytorch_tanh" && c.hidden_activation != "gelu_tanh") {
    return UnimplementedError(
        "{}: hidden_activation '{}' is not supported (Gemma-4 uses gelu_pytorch_tanh)", source,
        c.hidden_activation);
  }
  if (c.attention_bias) {
    return UnimplementedError("{}: attention_bias=true is not supported (Gemma-4 has no biases)",
                              source);
  }
  if (c.final_logit_softcapping && !(*c.final_logit_softcapping > 0)) {
    return InvalidArgumentError("{}: final_logit_softcapping must be > 0 or null", source);
  }
  if (c.use_bidirectional_attention == "all") {
    return UnimplementedError(
        "{}: use_bidirectional_attention='all' (an encoder configuration) is not supported",
        source);
  }
  if (!c.use_bidirectional_attention.empty() && c.use_bidirectional_attention != "vision") {
    return InvalidArgumentError(
        "{}: use_bidirectional_attention '{}' is not one of null, "
        "'vision', 'all'",
        source, c.use_bidirectional_attention);
  }
  if (c.num_kv_shared_layers < 0 || c.num_kv_shared_layers > c.num_hidden_layers) {
    return InvalidArgumentError(
        "{}: num_kv_shared_layers ({}) must be in [0, num_hidden_layers={}]", source,
        c.num_kv_shared_layers, c.num_hidden_layers);
  }
  if (kind == ModelKind::kTarget) {
    if (c.num_kv_shared_layers == c.num_hidden_layers) {
      return InvalidArgumentError(
          "{}: num_kv_shared_layers ({}) equals num_hidden_layers: a target model needs layers "
          "that own KV",
          source, c.num_kv_shared_layers);
    }
    for (int l = c.FirstKvSharedLayer(); l < c.num_hidden_layers; ++l) {
      if (c.KvDonor(l) < 0) {
        return InvalidArgumentError(
            "{}: layer {} ({}) is KV-shared but no earlier non-shared layer has its type "
            "(num_kv_shared_layers={})",
            source, l, LayerTypeName(c.layer_types[l]), c.num_kv_shared_layers);
      }
    }
  }
  if (c.enable_moe_block) {
    if (c.num_experts <= 0 || c.top_k_experts <= 0 || c.moe_intermediate_size <= 0) {
      return InvalidArgumentError(
          "{}: enable_moe_block needs num_experts, top_k_experts and moe_intermediate_size > 0 "
          "(got {}, {}, {})",
          source, c.num_experts, c.top_k_experts, c.moe_intermediate_size);
    }
    if (c.top_k_experts > c.num_experts) {
      return InvalidArgumentError("{}: top_k_experts ({}) exceeds num_experts ({})", source,
                                  c.top_k_experts, c.num_experts);
    }
  }
  if (c.hidden_size_per_layer_input < 0) {
    return InvalidArgumentError("{}: hidden_size_per_layer_input must be >= 0", source);
  }
  if (c.has_ple() && c.vocab_size_per_layer_input <= 0) {
    return InvalidArgumentError(
        "{}: hidden_size_per_layer_input > 0 needs vocab_size_per_layer_input > 0", source);
  }
  if (c.has_ple() && c.vocab_size_per_layer_input > c.vocab_size) {
    return InvalidArgumentError("{}: vocab_size_per_layer_input ({}) exceeds vocab_size ({})",
                                source, c.vocab_size_per_layer_input, c.vocab_size);
  }
  if (c.bos_token_id < 0 || c.bos_token_id >= c.vocab_size || c.pad_token_id < 0 ||
      c.pad_token_id >= c.vocab_size) {
    return InvalidArgumentError("{}: bos_token_id ({}) / pad_token_id ({}) outside vocab_size {}",
                                source, c.bos_token_id, c.pad_token_id, c.vocab_size);
  }
  return CheckEosIds(c.eos_token_ids, c.vocab_size, source, "eos_token_id");
}

// vision_config (HF's Gemma4VisionConfig): absent fields keep HF's defaults; every value the tower
// sizes something from is bounded before use.
absl::Status ParseVisionConfig(const Json& obj, const std::string& source, VisionConfig* c) {
  const std::string path = "vision_config";
  if (!obj.is_object()) return InvalidArgumentError("{}: '{}' must be an object", source, path);
  FieldReader r(obj, source, path);
  std::string model_type = "gemma4_vision";
  GANNET_RETURN_IF_ERROR(r.String("model_type", &model_type));
  if (model_type != "gemma4_vision") {
    return UnimplementedError("{}: {} '{}' is not gemma4_vision", source, r.Name("model_type"),
                              model_type);
  }
  GANNET_RETURN_IF_ERROR(r.Int("hidden_size", &c->hidden_size));
  GANNET_RETURN_IF_ERROR(r.Int("intermediate_size", &c->intermediate_size));
  GANNET_RETURN_IF_ERROR(r.Int("num_hidden_layers", &c->num_hidden_layers));
  GANNET_RETURN_IF_ERROR(r.Int("num_attention_heads", &c->num_attention_heads));
  GANNET_RETURN_IF_ERROR(r.Int("num_key_value_heads", &c->num_key_value_heads));
  GANNET_RETURN_IF_ERROR(r.Int("head_dim", &c->head_dim));
  GANNET_RETURN_IF_ERROR(r.String("hidden_activation", &c->hidden_activation));
  GANNET_RETURN_IF_ERROR(r.Double("rms_norm_eps", &c->rms_norm_eps));
  GANNET_RETURN_IF_ERROR(r.Int("pooling_kernel_size", &c->pooling_kernel_size));
  GANNET_RETURN_IF_ERROR(r.Int("patch_size", &c->patch_size));
  GANNET_RETURN_IF_ERROR(r.Int("position_embedding_size", &c->position_embedding_size));
  GANNET_RETURN_IF_ERROR(r.Bool("use_clipped_linears", &c->use_clipped_linears));
  GANNET_RETURN_IF_ERROR(r.Bool("standardize", &c->standardize));
  bool attention_bias = false;
  GANNET_RETURN_IF_ERROR(r.Bool("attention_bias", &attention_bias));
  // Older serializations write rope_theta flat; HF folds it into rope_parameters (which wins).
  GANNET_RETURN_IF_ERROR(r.Double("rope_theta", &c->rope_theta));
  if (const Json* rp = obj.Find("rope_parameters"); rp != nullptr && !rp->is_null()) {
    if (!rp->is_object()) return r.TypeError("rope_parameters", "an object", *rp);
    FieldReader rr(*rp, source, path + ".rope_parameters");
    std::string type = "axial";
    GANNET_RETURN_IF_ERROR(rr.String("rope_type", &type));
    // HF rewrites "default" to the config's default type, axial (modeling_rope_utils), and some
    // configs write it.
    if (type != "axial" && type != "default") {
      return UnimplementedError("{}: {} '{}' is not supported (the vision tower's RoPE is axial)",
                                source, rr.Name("rope_type"), type);
    }
    GANNET_RETURN_IF_ERROR(rr.Double("rope_theta", &c->rope_theta));
  }

  const struct {
    const char* name;
    int64_t value, max;
  } limits[] = {
      {"hidden_size", c->hidden_size, kMaxHidden},
      {"intermediate_size", c->intermediate_size, kMaxIntermediate},
      {"num_hidden_layers", c->num_hidden_layers, kMaxLayers},
      {"num_attention_heads", c->num_attention_heads, kMaxHeads},
      {"num_key_value_heads", c->num_key_value_heads, kMaxHeads},
      {"head_dim", c->head_dim, kMaxHeadDim},
      {"pooling_kernel_size", c->pooling_kernel_size, 64},
      {"patch_size", c->patch_size, 256},
      {"position_embedding_size", c->position_embedding_size, kMaxPositions},
  };
  for (const auto& l : limits) {
    if (l.value <= 0 || l.value > l.max) {
      return InvalidArgumentError("{}: {} is {}; it must be in [1, {}]", source, r.Name(l.name),
                                  l.value, l.max);
    }
  }
  if (c->num_attention_heads % c->num_key_value_heads) {
    return InvalidArgumentError("{}: {} ({}) is not a multiple of num_key_value_heads ({})", source,
                                r.Name("num_attention_heads"), c->num_attention_heads,
                                c->num_key_value_heads);
  }
  if (c->head_dim % 4) {
    // Two halves (x, y), each rotated as pairs: HF splits the head into 2 * (head_dim / 4) dims
    // per axis, which covers the head only for a multiple of 4.
    return InvalidArgumentError("{}: {} ({}) must be a multiple of 4 for the 2-D RoPE", source,
                                r.Name("head_dim"), c->head_dim);
  }
  if (!(c->rms_norm_eps > 0)) {
    return InvalidArgumentError("{}: {} must be > 0", source, r.Name("rms_norm_eps"));
  }
  if (!(c->rope_theta > 0) || !std::isfinite(c->rope_theta)) {
    return InvalidArgumentError("{}: {}.rope_parameters.rope_theta must be a finite number > 0",
                                source, path);
  }
  if (c->hidden_activation != "gelu_pytorch_tanh" && c->hidden_activation != "gelu_tanh") {
    return UnimplementedError(
        "{}: {} '{}' is not supported (the Gemma-4 vision tower uses gelu_pytorch_tanh)", source,
        r.Name("hidden_activation"), c->hidden_activation);
  }
  if (attention_bias) {
    return UnimplementedError("{}: {}=true is not supported (the vision tower has no biases)",
                              source, r.Name("attention_bias"));
  }
  return absl::OkStatus();
}

Variant DetectVariant(const ModelConfig& m) {
  if (m.kind == ModelKind::kAssistant) return Variant::kAssistant;
  const TextConfig& t = m.text;
  if (t.enable_moe_block) return Variant::kMoe26BA4B;
  if (t.has_ple()) return t.use_double_wide_mlp ? Variant::kE2B : Variant::kE4B;
  return Variant::kDense31B;
}

}  // namespace

std::string_view LayerTypeName(LayerType t) {
  return t == LayerType::kSliding ? "sliding_attention" : "full_attention";
}

std::string_view VariantName(Variant v) {
  switch (v) {
    case Variant::kDense31B:
      return "gemma4-31b (dense)";
    case Variant::kMoe26BA4B:
      return "gemma4-26b-a4b (moe)";
    case Variant::kE4B:
      return "gemma4-e4b (ple, kv-sharing)";
    case Variant::kE2B:
      return "gemma4-e2b (ple, kv-sharing, double-wide mlp)";
    case Variant::kAssistant:
      return "gemma4-assistant (mtp drafter)";
  }
  return "?";
}

int TextConfig::FullNumKvHeads() const {
  if (attention_k_eq_v && num_global_key_value_heads > 0) return num_global_key_value_heads;
  return num_key_value_heads;
}

int TextConfig::LayerNumKvHeads(int layer) const {
  return is_sliding(layer) ? num_key_value_heads : FullNumKvHeads();
}

int TextConfig::KvDonor(int layer) const {
  int first_shared = FirstKvSharedLayer();
  if (layer < first_shared) return layer;
  for (int l = first_shared - 1; l >= 0; --l) {
    if (layer_types[l] == layer_types[layer]) return l;
  }
  return -1;
}

int64_t TextConfig::LayerIntermediateSize(int layer) const {
  bool shared = num_kv_shared_layers > 0 && layer >= FirstKvSharedLayer();
  return intermediate_size * (use_double_wide_mlp && shared ? 2 : 1);
}

int TextConfig::NumLayersOfType(LayerType t) const {
  int n = 0;
  for (LayerType lt : layer_types) n += lt == t;
  return n;
}

absl::Status CheckImageTokenIds(const ModelConfig& m) {
  if (!m.vision) {
    return FailedPreconditionError("the model has no vision_config: it cannot take images");
  }
  const struct {
    const char* name;
    int id;
  } ids[] = {{"boi_token_id", m.boi_token_id},
             {"image_token_id", m.image_token_id},
             {"eoi_token_id", m.eoi_token_id}};
  for (const auto& t : ids) {
    if (t.id < 0 || t.id >= m.text.vocab_size) {
      return InvalidArgumentError("{} ({}) is outside the vocabulary [0, {})", t.name, t.id,
                                  m.text.vocab_size);
    }
  }
  if (m.boi_token_id == m.image_token_id || m.boi_token_id == m.eoi_token_id ||
      m.image_token_id == m.eoi_token_id) {
    return InvalidArgumentError(
        "boi_token_id ({}), image_token_id ({}) and eoi_token_id ({}) must "
        "differ",
        m.boi_token_id, m.image_token_id, m.eoi_token_id);
  }
  return absl::OkStatus();
}

float EmbeddingScale(int64_t hidden_size) {
  return RoundToBf16(static_cast<float>(std::sqrt(static_cast<double>(hidden_size))));
}

absl::StatusOr<ModelConfig> ParseModelConfig(const Json& root, std::string_view source_view) {
  std::string source(source_view);
  if (!root.is_object()) return InvalidArgumentError("{}: the top level must be an object", source);
  ModelConfig m;
  FieldReader r(root, source, "");
  GANNET_RETURN_IF_ERROR(r.String("model_type", &m.model_type));
  if (m.model_type.empty()) {
    return InvalidArgumentError(
        "{}: missing 'model_type' (expected gemma4, gemma4_text or gemma4_assistant)", source);
  }
  if (m.model_type == "gemma4" || m.model_type == "gemma4_assistant") {
    const Json* tc = root.Find("text_config");
    if (tc == nullptr || tc->is_null()) {
      return InvalidArgumentError("{}: model_type '{}' needs a 'text_config' object", source,
                                  m.model_type);
    }
    m.kind = m.model_type == "gemma4" ? ModelKind::kTarget : ModelKind::kAssistant;
    if (const Json* tmt = tc->Find("model_type");
        tmt != nullptr && tmt->is_string() && tmt->AsString() != "gemma4_text") {
      return UnimplementedError("{}: text_config.model_type '{}' is not gemma4_text", source,
                                tmt->AsString());
    }
    GANNET_RETURN_IF_ERROR(ParseTextConfig(*tc, source, "text_config", &m.text));
    m.text_tensor_prefix = m.kind == ModelKind::kTarget ? "model.language_model." : "model.";
  } else if (m.model_type == "gemma4_text") {
    m.kind = ModelKind::kTarget;
    GANNET_RETURN_IF_ERROR(ParseTextConfig(root, source, "", &m.text));
    m.text_tensor_prefix = "model.";
  } else {
    return UnimplementedError(
        "{}: model_type '{}' is not a Gemma-4 text model (gemma4, gemma4_text, gemma4_assistant)",
        source, m.model_type);
  }

  if (m.kind == ModelKind::kTarget && m.model_type == "gemma4") {
    GANNET_RETURN_IF_ERROR(r.Int("boi_token_id", &m.boi_token_id));
    GANNET_RETURN_IF_ERROR(r.Int("eoi_token_id", &m.eoi_token_id));
    GANNET_RETURN_IF_ERROR(r.Int("image_token_id", &m.image_token_id));
    GANNET_RETURN_IF_ERROR(r.Int("video_token_id", &m.video_token_id));
    GANNET_RETURN_IF_ERROR(r.Int("boa_token_id", &m.boa_token_id));
    GANNET_RETURN_IF_ERROR(r.Int("eoa_token_index", &m.eoa_token_id));
    GANNET_RETURN_IF_ERROR(r.Int("eoa_token_id", &m.eoa_token_id));
    GANNET_RETURN_IF_ERROR(r.Int("audio_token_id", &m.audio_token_id));
    bool tie = m.text.tie_word_embeddings;
    GANNET_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &tie));
    m.text.tie_word_embeddings = tie;
    const Json* vc = root.Find("vision_config");
    const Json* ac = root.Find("audio_config");
    m.has_vision_config = vc != nullptr && !vc->is_null();
    m.has_audio_config = ac != nullptr && !ac->is_null();
    if (m.has_vision_config) {
      m.vision.emplace();
      GANNET_RETURN_IF_ERROR(ParseVisionConfig(*vc, source, &*m.vision));
    }
  }
  m.eos_token_ids = m.text.eos_token_ids;
  if (m.model_type == "gemma4") GANNET_RETURN_IF_ERROR(r.IntList("eos_token_id", &m.eos_token_ids));

  if (m.kind == ModelKind::kAssistant) {
    GANNET_RETURN_IF_ERROR(r.Int("backbone_hidden_size", &m.backbone_hidden_size));
    GANNET_RETURN_IF_ERROR(r.Bool("use_ordered_embeddings", &m.use_ordered_embeddings));
    GANNET_RETURN_IF_ERROR(r.Int("num_centroids", &m.num_centroids));
    GANNET_RETURN_IF_ERROR(r.Int("centroid_intermediate_top_k", &m.centroid_intermediate_top_k));
    bool tie = m.text.tie_word_embeddings;
    GANNET_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &tie));
    m.text.tie_word_embeddings = tie;
    // HF: a drafter's layers are all KV-shared; 0 means "all".
    if (m.text.num_kv_shared_layers == 0) m.text.num_kv_shared_layers = m.text.num_hidden_layers;
    // An assistant's text_config carries no PLE; HF validates both fields are 0, and configs
    // written by the converter set them. Absent keys would take the target defaults, so a missing
    // key here means 0.
    if (root.Find("text_config")->Find("hidden_size_per_layer_input") == nullptr) {
      m.text.hidden_size_per_layer_input = 0;
    }
    if (root.Find("text_config")->Find("vocab_size_per_layer_input") == nullptr) {
      m.text.vocab_size_per_layer_input = 0;
    }
    const TextConfig& t = m.text;
    if (t.hidden_size_per_layer_input != 0 || t.vocab_size_per_layer_input != 0) {
      return InvalidArgumentError(
          "{}: an assistant must have hidden_size_per_layer_input = vocab_size_per_layer_input = "
          "0 (got {}, {})",
          source, t.hidden_size_per_layer_input, t.vocab_size_per_layer_input);
    }
    if (t.enable_moe_block || t.use_double_wide_mlp) {
      return InvalidArgumentError(
          "{}: an assistant must have enable_moe_block = use_double_wide_mlp = false", source);
    }
    if (t.num_kv_shared_layers != t.num_hidden_layers) {
      return InvalidArgumentError(
          "{}: all layers of an assistant must be KV-shared: num_kv_shared_layers is {}, "
          "num_hidden_layers is {}",
          source, t.num_kv_shared_layers, t.num_hidden_layers);
    }
    GANNET_RETURN_IF_ERROR(Positive(source, "backbone_hidden_size", m.backbone_hidden_size));
    if (m.backbone_hidden_size > kMaxHidden) {
      return InvalidArgumentError(
          "{}: backbone_hidden_size is {}, above the largest gannet accepts ({})", source,
          m.backbone_hidden_size, kMaxHidden);
    }
    if (m.use_ordered_embeddings) {
      GANNET_RETURN_IF_ERROR(Positive(source, "num_centroids", m.num_centroids));
      if (t.vocab_size % m.num_centroids) {
        return InvalidArgumentError("{}: vocab_size ({}) is not a multiple of num_centroids ({})",
                                    source, t.vocab_size, m.num_centroids);
      }
      if (m.centroid_intermediate_top_k <= 0 || m.centroid_intermediate_top_k > m.num_centroids) {
        return InvalidArgumentError(
            "{}: centroid_intermediate_top_k ({}) must be in [1, num_centroids={}]", source,
            m.centroid_intermediate_top_k, m.num_centroids);
      }
    }
  }
  GANNET_RETURN_IF_ERROR(ValidateTextConfig(m.text, source, m.kind));
  // A gemma4 config's own top-level list replaces text_config's: checked the same way.
  GANNET_RETURN_IF_ERROR(CheckEosIds(m.eos_token_ids, m.text.vocab_size, source, "eos_token_id"));
  m.variant = DetectVariant(m);
  for (const char* key : {"quantization_config", "compression_config"}) {
    const Json* q = root.Find(key);
    if (q == nullptr || q->is_null() || !m.quantization_method.empty()) continue;
    const Json* method = q->is_object() ? q->Find("quant_method") : nullptr;
    m.quantization_method = method != nullptr && method->is_string()        ? method->AsString()
                            : std::string_view(key) == "compression_config" ? "compressed-tensors"
                                                                            : "unknown";
    if (m.quantization_method == "compressed-tensors") {
      // Every compressed-tensors config is read strictly: a format or scheme gannet does not run
      // is refused here, naming the field, before any tensor is looked at.
      GANNET_ASSIGN_OR_RETURN(m.compressed_tensors,
                              quant::ParseCompressedTensorsConfig(*q, source));
    } else if (m.quantization_method == "gptq") {
      GANNET_ASSIGN_OR_RETURN(m.gptq, quant::ParseGptqConfig(*q, source));
    } else if (m.quantization_method == "awq") {
      GANNET_ASSIGN_OR_RETURN(m.gptq, quant::ParseAwqConfig(*q, source));
    } else if (m.quantization_method == "modelopt") {
      // ModelOpt's NVFP4 becomes the same schemes (lib/quant/modelopt.h).
      GANNET_ASSIGN_OR_RETURN(m.compressed_tensors, quant::ParseModeloptConfig(*q, source));
    }
  }
  return m;
}

absl::StatusOr<ModelConfig> ParseModelConfigText(std::string_view json_text,
                                                 std::string_view source) {
  if (json_text.size() > static_cast<size_t>(kMaxConfigJsonBytes)) {
    return InvalidArgumentError("{}: {} bytes, more than a config.json may have ({})", source,
                                json_text.size(), kMaxConfigJsonBytes);
  }
  auto json = Json::Parse(json_text, kMaxConfigJsonValues);
  if (!json.ok()) return Annotate(json.status(), source);
  return ParseModelConfig(*json, source);
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  GANNET_RETURN_IF_ERROR(CheckModelPath(model_dir));
  std::string path = model_dir + "/config.json";
  GANNET_ASSIGN_OR_RETURN(std::string text,
                          ReadFileToString(path, kMaxConfigJsonBytes, "config.json"));
  GANNET_ASSIGN_OR_RETURN(ModelConfig m, ParseModelConfigText(text, path));
  // ModelOpt exports describe their quantization in hf_quant_config.json (older ones only there).
  const std::string hf_quant = model_dir + "/hf_quant_config.json";
  if (m.quantization_method.empty() && FileExists(hf_quant)) {
    GANNET_ASSIGN_OR_RETURN(
        std::string qtext, ReadFileToString(hf_quant, kMaxConfigJsonBytes, "hf_quant_config.json"));
    auto qjson = Json::Parse(qtext, kMaxConfigJsonValues);
    if (!qjson.ok()) return Annotate(qjson.status(), hf_quant);
    m.quantization_method = "modelopt";
    GANNET_ASSIGN_OR_RETURN(m.compressed_tensors, quant::ParseModeloptConfig(*qjson, hf_quant));
  }
  return m;
}

}  // namespace gannet::model
