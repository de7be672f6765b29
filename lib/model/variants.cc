#include "lib/model/variants.h"

#include "lib/common/status.h"
#include "lib/model/weights.h"

namespace gannet::model {
namespace {

struct Shape {
  int64_t hidden, intermediate, layers, heads, kv_heads, global_kv_heads;
  int64_t window, max_pos, vocab;
  bool k_eq_v;
  int64_t kv_shared;
  bool double_wide;
  int64_t ple;  // hidden_size_per_layer_input
  int64_t experts, top_k, moe_inter;
  int full_every;  // layer pattern: (full_every - 1) sliding then 1 full
};

Json LayerTypes(int64_t layers, int full_every) {
  Json a = Json::MakeArray();
  for (int64_t i = 0; i < layers; ++i) {
    bool full = (i + 1) % full_every == 0 || i + 1 == layers;
    a.Push(Json::String(full ? "full_attention" : "sliding_attention"));
  }
  return a;
}

Json RopeParameters() {
  Json sliding = Json::MakeObject();
  sliding.Set("rope_type", Json::String("default"));
  sliding.Set("rope_theta", Json::Number(10000.0));
  Json full = Json::MakeObject();
  full.Set("rope_type", Json::String("proportional"));
  full.Set("partial_rotary_factor", Json::Number(0.25));
  full.Set("rope_theta", Json::Number(1000000.0));
  Json r = Json::MakeObject();
  r.Set("sliding_attention", std::move(sliding));
  r.Set("full_attention", std::move(full));
  return r;
}

Json TextConfigJson(const Shape& s, bool softcap) {
  Json t = Json::MakeObject();
  t.Set("model_type", Json::String("gemma4_text"));
  t.Set("vocab_size", Json::Int(s.vocab));
  t.Set("hidden_size", Json::Int(s.hidden));
  t.Set("intermediate_size", Json::Int(s.intermediate));
  t.Set("num_hidden_layers", Json::Int(s.layers));
  t.Set("num_attention_heads", Json::Int(s.heads));
  t.Set("num_key_value_heads", Json::Int(s.kv_heads));
  if (s.k_eq_v) t.Set("num_global_key_value_heads", Json::Int(s.global_kv_heads));
  t.Set("head_dim", Json::Int(256));
  t.Set("global_head_dim", Json::Int(512));
  t.Set("attention_k_eq_v", Json::Bool(s.k_eq_v));
  t.Set("hidden_activation", Json::String("gelu_pytorch_tanh"));
  t.Set("max_position_embeddings", Json::Int(s.max_pos));
  t.Set("rms_norm_eps", Json::Number(1e-6));
  t.Set("pad_token_id", Json::Int(0));
  t.Set("eos_token_id", Json::Int(1));
  t.Set("bos_token_id", Json::Int(2));
  t.Set("tie_word_embeddings", Json::Bool(true));
  t.Set("rope_parameters", RopeParameters());
  t.Set("attention_bias", Json::Bool(false));
  t.Set("attention_dropout", Json::Number(0.0));
  t.Set("sliding_window", Json::Int(s.window));
  t.Set("layer_types", LayerTypes(s.layers, s.full_every));
  t.Set("final_logit_softcapping", softcap ? Json::Number(30.0) : Json());
  t.Set("use_bidirectional_attention", s.ple ? Json() : Json::String("vision"));
  t.Set("vocab_size_per_layer_input", Json::Int(s.ple ? s.vocab : 0));
  t.Set("hidden_size_per_layer_input", Json::Int(s.ple));
  t.Set("num_kv_shared_layers", Json::Int(s.kv_shared));
  t.Set("enable_moe_block", Json::Bool(s.experts > 0));
  t.Set("use_double_wide_mlp", Json::Bool(s.double_wide));
  t.Set("num_experts", s.experts ? Json::Int(s.experts) : Json());
  t.Set("top_k_experts", s.experts ? Json::Int(s.top_k) : Json());
  t.Set("moe_intermediate_size", s.experts ? Json::Int(s.moe_inter) : Json());
  return t;
}

// The released vision towers (docs/vision.md): the 31B and 26B-A4B write a 1152-wide, 27-layer
// tower that standardizes; the E-series keep HF's defaults (768 wide, 16 layers) with clipped
// linears. Tiny variants keep the bare default object (their checkpoints hold no tower).
Json VisionConfigJson(bool real, bool e_series) {
  Json v = Json::MakeObject();
  v.Set("model_type", Json::String("gemma4_vision"));
  if (!real) return v;
  if (e_series) {
    v.Set("use_clipped_linears", Json::Bool(true));
    return v;
  }
  v.Set("hidden_size", Json::Int(1152));
  v.Set("intermediate_size", Json::Int(4304));
  v.Set("num_hidden_layers", Json::Int(27));
  v.Set("num_attention_heads", Json::Int(16));
  v.Set("num_key_value_heads", Json::Int(16));
  v.Set("head_dim", Json::Int(72));
  v.Set("standardize", Json::Bool(true));
  return v;
}

// The multimodal wrapper the released checkpoints use.
Json Wrapper(Json text, bool audio, Json vision) {
  Json w = Json::MakeObject();
  w.Set("model_type", Json::String("gemma4"));
  Json arch = Json::MakeArray();
  arch.Push(Json::String("Gemma4ForConditionalGeneration"));
  w.Set("architectures", std::move(arch));
  w.Set("text_config", std::move(text));
  w.Set("vision_config", std::move(vision));
  if (audio) {
    Json a = Json::MakeObject();
    a.Set("model_type", Json::String("gemma4_audio"));
    w.Set("audio_config", std::move(a));
  } else {
    w.Set("audio_config", Json());
  }
  w.Set("boi_token_id", Json::Int(255999));
  w.Set("eoi_token_id", Json::Int(258882));
  w.Set("image_token_id", Json::Int(258880));
  w.Set("video_token_id", Json::Int(258884));
  w.Set("boa_token_id", Json::Int(256000));
  w.Set("eoa_token_index", Json::Int(258883));
  w.Set("audio_token_id", Json::Int(258881));
  Json eos = Json::MakeArray();
  eos.Push(Json::Int(1));
  eos.Push(Json::Int(106));
  w.Set("eos_token_id", std::move(eos));
  w.Set("tie_word_embeddings", Json::Bool(true));
  return w;
}

Json Assistant(const Shape& drafter, int64_t backbone, bool ordered, int64_t centroids,
               int64_t top_k) {
  Json w = Json::MakeObject();
  w.Set("model_type", Json::String("gemma4_assistant"));
  Json arch = Json::MakeArray();
  arch.Push(Json::String("Gemma4AssistantForCausalLM"));
  w.Set("architectures", std::move(arch));
  w.Set("text_config", TextConfigJson(drafter, /*softcap=*/false));
  w.Set("backbone_hidden_size", Json::Int(backbone));
  w.Set("use_ordered_embeddings", Json::Bool(ordered));
  w.Set("num_centroids", Json::Int(centroids));
  w.Set("centroid_intermediate_top_k", Json::Int(top_k));
  w.Set("tie_word_embeddings", Json::Bool(true));
  return w;
}

struct Family {
  const char* name;
  Shape real;
  Shape tiny;
  bool audio;
  bool wrapper_tiny;  // tiny checkpoint uses the multimodal wrapper (else gemma4_text)
  // drafter
  int64_t d_hidden, d_inter, d_heads;
  bool ordered;
};

//                      hidden inter  layers heads kv gkv window maxpos   vocab   keqv  shared dw
//                      ple  E   k  Im   every
const Family kFamilies[] = {
    {"31b",
     {5376, 21504, 60, 32, 16, 4, 1024, 262144, 262144, true, 0, false, 0, 0, 0, 0, 6},
     {48, 192, 8, 4, 2, 1, 16, 262144, kTinyVocabSize, true, 0, false, 0, 0, 0, 0, 6},
     false,
     true,
     1024,
     8192,
     32,
     false},
    {"26b-a4b",
     {2816, 2112, 30, 16, 8, 2, 1024, 262144, 262144, true, 0, false, 0, 128, 8, 704, 6},
     {40, 64, 6, 4, 2, 1, 16, 262144, kTinyVocabSize, true, 0, false, 0, 8, 2, 32, 6},
     false,
     true,
     1024,
     8192,
     16,
     false},
    {"e4b",
     {2560, 10240, 42, 8, 2, 2, 512, 131072, 262144, false, 18, false, 256, 0, 0, 0, 6},
     {32, 128, 12, 4, 2, 2, 16, 131072, kTinyVocabSize, false, 6, false, 16, 0, 0, 0, 6},
     true,
     true,
     256,
     2048,
     4,
     true},
    {"e2b",
     {1536, 6144, 35, 8, 1, 1, 512, 131072, 262144, false, 20, true, 256, 0, 0, 0, 5},
     {24, 96, 10, 4, 1, 1, 16, 131072, kTinyVocabSize, false, 5, true, 16, 0, 0, 0, 5},
     true,
     false,
     256,
     2048,
     4,
     true},
};

// 3.6M, 31.3B: a parameter count as model names write it.
std::string FormatCount(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.1f}B", static_cast<double>(n) / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f}K", static_cast<double>(n) / 1e3);
  return fmt::format("{}", n);
}

}  // namespace

std::string ModelLabel(const ModelConfig& m) {
  const TextConfig& t = m.text;
  if (m.kind == ModelKind::kTarget) {
    for (const Family& f : kFamilies) {
      if (t.hidden_size == f.real.hidden && t.num_hidden_layers == f.real.layers &&
          t.intermediate_size == f.real.intermediate && t.vocab_size == f.real.vocab) {
        return std::string(VariantName(m.variant));
      }
    }
  } else {
    return std::string(VariantName(m.variant));
  }
  std::string_view layout = VariantName(m.variant);  // "gemma4-31b (dense)" -> "dense"
  layout = layout.substr(layout.find('(') + 1);
  layout = layout.substr(0, layout.size() - 1);
  return fmt::format("gemma4 custom ({} layers, hidden {}, {} parameters; {})", t.num_hidden_layers,
                     t.hidden_size, FormatCount(CountParameters(m)), layout);
}

std::vector<std::string> KnownVariantNames() {
  std::vector<std::string> out;
  for (const Family& f : kFamilies) out.push_back(f.name);
  for (const Family& f : kFamilies) out.push_back(std::string(f.name) + "-assistant");
  return out;
}

absl::StatusOr<Json> VariantConfig(std::string_view name, VariantSize size) {
  for (const Family& f : kFamilies) {
    const Shape& s = size == VariantSize::kReal ? f.real : f.tiny;
    if (name == f.name) {
      Json text = TextConfigJson(s, /*softcap=*/true);
      if (size == VariantSize::kTiny && !f.wrapper_tiny) return text;
      // The E-series are the families with per-layer embeddings.
      return Wrapper(std::move(text), f.audio,
                     VisionConfigJson(size == VariantSize::kReal, f.real.ple > 0));
    }
    if (name == std::string(f.name) + "-assistant") {
      // The drafter attends into the target's KV, so it keeps the target's heads, KV heads, head
      // dims and window; widths are its own. 4 layers: 3 sliding + 1 full.
      Shape d = s;
      d.layers = 4;
      d.full_every = 4;
      d.kv_shared = 4;
      d.double_wide = false;
      d.ple = 0;
      d.experts = 0;
      d.max_pos = 131072;
      if (size == VariantSize::kReal) {
        d.hidden = f.d_hidden;
        d.intermediate = f.d_inter;
        d.heads = f.d_heads;
      } else {
        d.hidden = 32;
        d.intermediate = 64;
      }
      const int64_t centroids = size == VariantSize::kReal ? 2048 : 16;
      const int64_t top_k = size == VariantSize::kReal ? 32 : 4;
      return Assistant(d, s.hidden, f.ordered, centroids, top_k);
    }
  }
  return InvalidArgumentError(
      "unknown Gemma-4 variant '{}' (known: 31b, 26b-a4b, e4b, e2b and "
      "their -assistant drafters)",
      name);
}

absl::StatusOr<ModelConfig> DummyModelConfig(std::string_view model_dir) {
  if (!IsDummyModel(model_dir)) {
    return InvalidArgumentError("'{}' is not a dummy:<variant> model", model_dir);
  }
  GANNET_ASSIGN_OR_RETURN(
      Json json, VariantConfig(model_dir.substr(kDummyModelPrefix.size()), VariantSize::kReal));
  return ParseModelConfig(json, model_dir);
}

}  // namespace gannet::model
