#include "lib/model/weights.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "fmt/ranges.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/model/gptq_weights.h"
#include "lib/model/model_format.h"
#include "lib/model/quantized_weights.h"
#include "lib/model/variants.h"

namespace gannet::model {

int64_t WeightView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t WeightView::scale_bytes() const {
  if (!quantized() || shape.empty()) return 0;
  const uint64_t k = static_cast<uint64_t>(shape.back());
  const uint64_t rows = k == 0 ? 0 : static_cast<uint64_t>(numel()) / k;
  const uint64_t scale = static_cast<uint64_t>(DTypeBits(format.scale) / 8);
  uint64_t groups = 0;
  switch (format.granularity) {
    case ScaleGranularity::kTensor:  // one per checkpoint module
      groups = std::max<uint64_t>(1, pieces.size());
      break;
    case ScaleGranularity::kChannel:
      groups = rows;
      break;
    case ScaleGranularity::kGroup:
      if (format.group_size <= 0) return 0;
      groups = rows * (k / format.group_size);
      break;
    case ScaleGranularity::kBlock: {
      if (format.group_size <= 0 || format.block_rows <= 0) return 0;
      const uint64_t br = static_cast<uint64_t>(format.block_rows);
      const uint64_t bc = static_cast<uint64_t>(format.group_size);
      for (const WeightPiece& p : pieces) {
        groups += (static_cast<uint64_t>(p.rows) + br - 1) / br * ((k + bc - 1) / bc);
      }
      break;
    }
    case ScaleGranularity::kNone:
      return 0;
  }
  const uint64_t input_scales =
      format.act == ActivationQuant::kStaticFp8 || format.act == ActivationQuant::kDynamicNvfp4
          ? pieces.size()
          : 0;
  const uint64_t globals = format.global_scale ? pieces.size() : 0;
  return groups * scale + (format.zero_point ? groups : 0) + (input_scales + globals) * 4;
}

namespace {

using LW = LayerWeights;
using MW = ModelWeights;

class SpecBuilder {
 public:
  explicit SpecBuilder(std::vector<WeightSpec>* out) : out_(out) {}
  void Global(std::string name, std::vector<int64_t> shape, WeightInit init, WeightView MW::*slot,
              bool is_index = false) {
    WeightSpec s;
    s.name = std::move(name);
    s.shape = std::move(shape);
    s.init = init;
    s.is_index = is_index;
    s.global_slot = slot;
    out_->push_back(std::move(s));
  }
  void Layer(int layer, std::string name, std::vector<int64_t> shape, WeightInit init,
             WeightView LW::*slot) {
    WeightSpec s;
    s.name = std::move(name);
    s.shape = std::move(shape);
    s.init = init;
    s.layer = layer;
    s.layer_slot = slot;
    out_->push_back(std::move(s));
  }

 private:
  std::vector<WeightSpec>* out_;
};

}  // namespace

std::vector<WeightSpec> ExpectedWeights(const ModelConfig& m) {
  const TextConfig& c = m.text;
  const std::string& p = m.text_tensor_prefix;
  const int64_t H = c.hidden_size;
  const int64_t V = c.vocab_size;
  const int N = c.num_hidden_layers;
  std::vector<WeightSpec> specs;
  SpecBuilder b(&specs);

  b.Global(p + "embed_tokens.weight", {V, H}, WeightInit::kEmbedding, &MW::embed_tokens);
  b.Global(p + "norm.weight", {H}, WeightInit::kNorm, &MW::final_norm);
  if (!c.tie_word_embeddings) b.Global("lm_head.weight", {V, H}, WeightInit::kMatrix, &MW::lm_head);
  if (c.has_ple()) {
    const int64_t P = c.hidden_size_per_layer_input;
    b.Global(p + "embed_tokens_per_layer.weight", {c.vocab_size_per_layer_input, N * P},
             WeightInit::kEmbedding, &MW::embed_tokens_per_layer);
    b.Global(p + "per_layer_model_projection.weight", {N * P, H}, WeightInit::kMatrix,
             &MW::per_layer_model_projection);
    b.Global(p + "per_layer_projection_norm.weight", {P}, WeightInit::kNorm,
             &MW::per_layer_projection_norm);
  }
  if (m.kind == ModelKind::kAssistant) {
    const int64_t Hb = m.backbone_hidden_size;
    b.Global("pre_projection.weight", {H, 2 * Hb}, WeightInit::kMatrix, &MW::pre_projection);
    b.Global("post_projection.weight", {Hb, H}, WeightInit::kMatrix, &MW::post_projection);
    if (m.use_ordered_embeddings) {
      b.Global("masked_embedding.centroids.weight", {m.num_centroids, H}, WeightInit::kMatrix,
               &MW::centroids);
      b.Global("masked_embedding.token_ordering", {V}, WeightInit::kPermutation,
               &MW::token_ordering, /*is_index=*/true);
    }
  }

  for (int l = 0; l < N; ++l) {
    const std::string lp = fmt::format("{}layers.{}.", p, l);
    const int64_t d = c.LayerHeadDim(l);
    const int64_t nq = c.num_attention_heads;
    const int64_t nkv = c.LayerNumKvHeads(l);
    const int64_t I = c.LayerIntermediateSize(l);
    b.Layer(l, lp + "input_layernorm.weight", {H}, WeightInit::kNorm, &LW::input_layernorm);
    b.Layer(l, lp + "post_attention_layernorm.weight", {H}, WeightInit::kNorm,
            &LW::post_attention_layernorm);
    b.Layer(l, lp + "pre_feedforward_layernorm.weight", {H}, WeightInit::kNorm,
            &LW::pre_feedforward_layernorm);
    b.Layer(l, lp + "post_feedforward_layernorm.weight", {H}, WeightInit::kNorm,
            &LW::post_feedforward_layernorm);
    b.Layer(l, lp + "self_attn.q_proj.weight", {nq * d, H}, WeightInit::kMatrix, &LW::q_proj);
    b.Layer(l, lp + "self_attn.q_norm.weight", {d}, WeightInit::kQkNorm, &LW::q_norm);
    if (!c.IsKvShared(l)) {
      b.Layer(l, lp + "self_attn.k_proj.weight", {nkv * d, H}, WeightInit::kMatrix, &LW::k_proj);
      if (!c.LayerKEqV(l)) {
        b.Layer(l, lp + "self_attn.v_proj.weight", {nkv * d, H}, WeightInit::kMatrix, &LW::v_proj);
      }
      b.Layer(l, lp + "self_attn.k_norm.weight", {d}, WeightInit::kQkNorm, &LW::k_norm);
    }
    b.Layer(l, lp + "self_attn.o_proj.weight", {H, nq * d}, WeightInit::kMatrix, &LW::o_proj);
    b.Layer(l, lp + "mlp.gate_proj.weight", {I, H}, WeightInit::kMatrix, &LW::gate_proj);
    b.Layer(l, lp + "mlp.up_proj.weight", {I, H}, WeightInit::kMatrix, &LW::up_proj);
    b.Layer(l, lp + "mlp.down_proj.weight", {H, I}, WeightInit::kMatrix, &LW::down_proj);
    b.Layer(l, lp + "layer_scalar", {1}, WeightInit::kLayerScalar, &LW::layer_scalar);
    if (c.has_ple()) {
      const int64_t P = c.hidden_size_per_layer_input;
      b.Layer(l, lp + "per_layer_input_gate.weight", {P, H}, WeightInit::kMatrix,
              &LW::per_layer_input_gate);
      b.Layer(l, lp + "per_layer_projection.weight", {H, P}, WeightInit::kMatrix,
              &LW::per_layer_projection);
      b.Layer(l, lp + "post_per_layer_input_norm.weight", {H}, WeightInit::kNorm,
              &LW::post_per_layer_input_norm);
    }
    if (c.enable_moe_block) {
      const int64_t E = c.num_experts, El = c.HeldExperts();
      const int64_t Im = c.moe_intermediate_size;
      b.Layer(l, lp + "router.proj.weight", {E, H}, WeightInit::kMatrix, &LW::router_proj);
      b.Layer(l, lp + "router.scale", {H}, WeightInit::kPositiveScale, &LW::router_scale);
      b.Layer(l, lp + "router.per_expert_scale", {E}, WeightInit::kPositiveScale,
              &LW::router_per_expert_scale);
      b.Layer(l, lp + "experts.gate_up_proj", {El, 2 * Im, H}, WeightInit::kMatrix,
              &LW::experts_gate_up);
      b.Layer(l, lp + "experts.down_proj", {El, H, Im}, WeightInit::kMatrix, &LW::experts_down);
      b.Layer(l, lp + "pre_feedforward_layernorm_2.weight", {H}, WeightInit::kNorm,
              &LW::pre_feedforward_layernorm_2);
      b.Layer(l, lp + "post_feedforward_layernorm_1.weight", {H}, WeightInit::kNorm,
              &LW::post_feedforward_layernorm_1);
      b.Layer(l, lp + "post_feedforward_layernorm_2.weight", {H}, WeightInit::kNorm,
              &LW::post_feedforward_layernorm_2);
    }
  }
  return specs;
}

bool IsIgnorableExtraTensor(const ModelConfig& m, std::string_view name) {
  // A quantized module's tensors (weight_packed, weight_scale, ...) go with its weight.
  std::string weight(name);
  if (m.gptq.has_value()) {
    for (std::string_view suffix : kZpInt4ModuleTensorSuffixes) {
      if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
        weight = std::string(name.substr(0, name.size() - suffix.size())) + ".weight";
        break;
      }
    }
  }
  if (m.compressed_tensors.has_value()) {
    for (std::string_view suffix : kCtModuleTensorSuffixes) {
      if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
        weight = std::string(name.substr(0, name.size() - suffix.size())) + ".weight";
        break;
      }
    }
  }
  if (m.text.tie_word_embeddings && weight == "lm_head.weight") return true;
  const std::string& p = m.text_tensor_prefix;
  for (int l = m.text.FirstKvSharedLayer(); l < m.text.num_hidden_layers; ++l) {
    for (const char* t : {"k_proj.weight", "v_proj.weight", "k_norm.weight", "v_norm.weight"}) {
      if (weight == fmt::format("{}layers.{}.self_attn.{}", p, l, t)) return true;
    }
  }
  return false;
}

absl::StatusOr<ModelWeights> BindWeights(const ModelConfig& m, const Checkpoint& ckpt) {
  // A quantized checkpoint would otherwise fail on its first missing bf16 tensor.
  GANNET_RETURN_IF_ERROR(CheckWeightFormat(m, ckpt));
  ModelWeights w;
  w.layers.resize(m.text.num_hidden_layers);
  for (int l = 0; l < m.text.num_hidden_layers; ++l) w.layers[l].index = l;
  std::set<std::string, std::less<>> bound;
  for (const WeightSpec& s : ExpectedWeights(m)) {
    if (m.compressed_tensors.has_value() || m.gptq.has_value()) {
      GANNET_ASSIGN_OR_RETURN(std::optional<WeightView> gathered,
                              m.gptq.has_value() ? BindGptq(m, ckpt, s, &bound)
                                                 : BindCompressedTensors(m, ckpt, s, &bound));
      if (gathered.has_value()) {
        if (s.layer >= 0) {
          w.layers[s.layer].*(s.layer_slot) = *std::move(gathered);
        } else {
          w.*(s.global_slot) = *std::move(gathered);
        }
        continue;
      }
    }
    const TensorRef* t = ckpt.Find(s.name);
    if (t == nullptr) {
      return InvalidArgumentError("{}: missing tensor '{}' (expected shape [{}])", ckpt.dir(),
                                  s.name, fmt::join(s.shape, ", "));
    }
    if (t->info->shape != s.shape) {
      return InvalidArgumentError("{}: tensor '{}' has shape [{}] but the config implies [{}]",
                                  t->file->path(), s.name, fmt::join(t->info->shape, ", "),
                                  fmt::join(s.shape, ", "));
    }
    DType dt = t->info->dtype;
    if (s.is_index) {
      if (dt != DType::kI64 && dt != DType::kI32) {
        return InvalidArgumentError("{}: tensor '{}' has dtype {}, expected I64 or I32",
                                    t->file->path(), s.name, DTypeName(dt));
      }
    } else if (!WeightFormatIsLoadable(WeightFormat::Dense(dt))) {
      return UnimplementedError("{}: tensor '{}' has dtype {}; gannet loads BF16, F16 and F32",
                                t->file->path(), s.name, DTypeName(dt));
    }
    WeightView v{s.name, dt, s.shape, t->data()};
    if (s.layer >= 0) {
      w.layers[s.layer].*(s.layer_slot) = std::move(v);
    } else {
      w.*(s.global_slot) = std::move(v);
    }
    bound.insert(s.name);
  }
  for (const std::string& name : ckpt.Names()) {
    if (bound.count(name)) continue;
    if (IsIgnorableExtraTensor(m, name)) {
      GANNET_LOG_DEBUG("{}: ignoring tensor '{}' (tied or KV-shared)", ckpt.dir(), name);
      continue;
    }
    return InvalidArgumentError("{}: unexpected tensor '{}' (not part of a {} with this config)",
                                ckpt.dir(), name, ModelLabel(m));
  }
  return w;
}

ModelWeights SyntheticWeights(const ModelConfig& m, uint64_t seed) {
  ModelWeights w;
  w.layers.resize(m.text.num_hidden_layers);
  for (int l = 0; l < m.text.num_hidden_layers; ++l) w.layers[l].index = l;
  for (const WeightSpec& s : ExpectedWeights(m)) {
    WeightView v{s.name, s.is_index ? DType::kI64 : DType::kBF16, s.shape, nullptr};
    v.synthetic = true;
    v.seed = seed;
    v.init = s.init;
    if (s.layer >= 0) {
      w.layers[s.layer].*(s.layer_slot) = std::move(v);
    } else {
      w.*(s.global_slot) = std::move(v);
    }
  }
  return w;
}

int64_t CountParameters(const ModelConfig& config) {
  int64_t n = 0;
  for (const WeightSpec& s : ExpectedWeights(config)) {
    int64_t e = 1;
    for (int64_t d : s.shape) e *= d;
    n += e;
  }
  return n;
}

std::vector<const WeightView*> AllViews(const ModelWeights& w) {
  std::vector<const WeightView*> out = {&w.embed_tokens,
                                        &w.lm_head,
                                        &w.final_norm,
                                        &w.embed_tokens_per_layer,
                                        &w.per_layer_model_projection,
                                        &w.per_layer_projection_norm,
                                        &w.pre_projection,
                                        &w.post_projection,
                                        &w.centroids,
                                        &w.token_ordering};
  for (const LayerWeights& l : w.layers) {
    for (const WeightView* v : {&l.input_layernorm,
                                &l.post_attention_layernorm,
                                &l.pre_feedforward_layernorm,
                                &l.post_feedforward_layernorm,
                                &l.q_proj,
                                &l.q_norm,
                                &l.k_proj,
                                &l.v_proj,
                                &l.k_norm,
                                &l.o_proj,
                                &l.gate_proj,
                                &l.up_proj,
                                &l.down_proj,
                                &l.layer_scalar,
                                &l.per_layer_input_gate,
                                &l.per_layer_projection,
                                &l.post_per_layer_input_norm,
                                &l.router_proj,
                                &l.router_scale,
                                &l.router_per_expert_scale,
                                &l.experts_gate_up,
                                &l.experts_down,
                                &l.pre_feedforward_layernorm_2,
                                &l.post_feedforward_layernorm_1,
                                &l.post_feedforward_layernorm_2}) {
      out.push_back(v);
    }
  }
  return out;
}

int64_t ViewBytes(const ModelWeights& w) {
  int64_t bytes = 0;
  for (const WeightView* v : AllViews(w)) {
    if (v->present()) bytes += static_cast<int64_t>(v->nbytes() + v->scale_bytes());
  }
  return bytes;
}

double DecodeStepWeightBytes(const ModelConfig& config, int batch) {
  return DecodeStepWeightBytes(config, SyntheticWeights(config, 0), batch);
}

double DecodeStepWeightBytes(const ModelConfig& config, const ModelWeights& weights, int batch) {
  const TextConfig& c = config.text;
  const double b = std::max(batch, 1);
  double experts_read = 1.0;  // fraction of each layer's experts a step reads
  if (c.num_experts > 0) {
    const double e = c.num_experts;
    experts_read = 1.0 - std::pow(1.0 - c.top_k_experts / e, b);
  }
  double bytes = 0;
  for (const WeightSpec& s : ExpectedWeights(config)) {
    const WeightView& v =
        s.layer >= 0 ? weights.layers[s.layer].*(s.layer_slot) : weights.*(s.global_slot);
    double numel = 1;
    for (int64_t d : s.shape) numel *= static_cast<double>(d);
    // The view's own storage: its element type and, quantized, its scales per element.
    const double elem = v.present() ? static_cast<double>(v.stored_bytes()) /
                                          std::max(1.0, static_cast<double>(v.numel()))
                                    : (s.is_index ? 8.0 : 2.0);
    const bool gathered = s.global_slot == &ModelWeights::embed_tokens_per_layer ||
                          (s.global_slot == &ModelWeights::embed_tokens && !c.tie_word_embeddings);
    if (gathered) {
      const double rows = static_cast<double>(s.shape[0]);
      numel *= std::min(b, rows) / rows;
    } else if (s.layer_slot == &LayerWeights::experts_gate_up ||
               s.layer_slot == &LayerWeights::experts_down) {
      numel *= experts_read;
    }
    bytes += numel * elem;
  }
  return bytes;
}

absl::Status QuantizeAtLoad(ModelWeights* weights, const WeightFormat& format) {
  if (format.elem != DType::kI4 && format.elem != DType::kU4) {
    return UnimplementedError("quantizing at load to {}: only int4 formats are supported",
                              WeightFormatName(format));
  }
  for (LayerWeights& l : weights->layers) {
    for (WeightView* v : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj,
                          &l.down_proj, &l.per_layer_input_gate, &l.per_layer_projection}) {
      if (!v->present()) continue;
      if (v->quantized() || !v->pieces.empty()) {
        return InvalidArgumentError(
            "'{}' is already quantized ({}): quantizing at load takes a bf16/f16/f32 checkpoint",
            v->name, WeightFormatName(v->format));
      }
      if (v->shape.size() != 2 ||
          (v->dtype != DType::kBF16 && v->dtype != DType::kF16 && v->dtype != DType::kF32)) {
        return InvalidArgumentError("'{}' ({}) is not a bf16/f16/f32 matrix to quantize", v->name,
                                    DTypeName(v->dtype));
      }
      const int64_t k = v->shape[1];
      WeightFormat f = format;
      if (f.group_size == 0) f.group_size = static_cast<int>(k);  // per channel
      f.scale = v->dtype;  // as `gannet quantize` stores them: the bytes are the same
      if (k % f.group_size != 0) continue;
      if (const char* why = WeightFormatError(f)) {
        return InvalidArgumentError("quantizing at load: {}", why);
      }
      v->format = f;
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::model
