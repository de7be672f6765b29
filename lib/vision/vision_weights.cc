#include "lib/vision/vision_weights.h"

#include <cmath>
#include <set>

#include "lib/common/dtype.h"
#include "lib/common/status.h"

namespace gannet::vision {
namespace {

constexpr std::string_view kTower = "model.vision_tower.";
constexpr std::string_view kProjector = "model.embed_vision.";

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

class Binder {
 public:
  explicit Binder(const model::Checkpoint& ckpt) : ckpt_(ckpt) {}

  absl::Status Bind(const std::string& name, std::vector<int64_t> shape, model::WeightView* out) {
    const model::TensorRef* t = ckpt_.Find(name);
    if (t == nullptr) {
      return NotFoundError("{}: the vision tower needs tensor '{}', which is missing", ckpt_.dir(),
                           name);
    }
    const DType dt = t->info->dtype;
    if (dt != DType::kBF16 && dt != DType::kF16 && dt != DType::kF32) {
      return UnimplementedError(
          "{}: tensor '{}' has dtype {}; the vision tower loads BF16, F16 "
          "and F32",
          ckpt_.dir(), name, DTypeName(dt));
    }
    // A scalar buffer may be stored as [] or [1].
    const bool scalar_ok = shape.empty() && t->info->shape == std::vector<int64_t>{1};
    if (t->info->shape != shape && !scalar_ok) {
      return InvalidArgumentError("{}: tensor '{}' has shape {}, the config needs {}", ckpt_.dir(),
                                  name, ShapeText(t->info->shape), ShapeText(shape));
    }
    if (t->data() == nullptr) {
      return FailedPreconditionError("{}: tensor '{}' was not read", ckpt_.dir(), name);
    }
    *out = model::WeightView{name, dt, shape, t->data()};
    bound_.insert(name);
    return absl::OkStatus();
  }

  absl::Status Scalar(const std::string& name, float* out) {
    model::WeightView v;
    GANNET_RETURN_IF_ERROR(Bind(name, {}, &v));
    ElementsToF32(v.data, v.dtype, 1, out);
    return absl::OkStatus();
  }

  absl::Status Linear(const model::VisionConfig& c, const std::string& module, int64_t out,
                      int64_t in, VisionLinear* l) {
    GANNET_RETURN_IF_ERROR(Bind(module + ".linear.weight", {out, in}, &l->weight));
    if (!c.use_clipped_linears) return absl::OkStatus();
    GANNET_RETURN_IF_ERROR(Scalar(module + ".input_min", &l->clip.in_min));
    GANNET_RETURN_IF_ERROR(Scalar(module + ".input_max", &l->clip.in_max));
    GANNET_RETURN_IF_ERROR(Scalar(module + ".output_min", &l->clip.out_min));
    GANNET_RETURN_IF_ERROR(Scalar(module + ".output_max", &l->clip.out_max));
    const ClipBounds& b = l->clip;
    // NaN fails both comparisons.
    if (!(b.in_min <= b.in_max) || !(b.out_min <= b.out_max)) {
      return InvalidArgumentError(
          "{}: clip bounds of '{}' are reversed or NaN (input [{}, {}], output [{}, {}])",
          ckpt_.dir(), module, b.in_min, b.in_max, b.out_min, b.out_max);
    }
    return absl::OkStatus();
  }

  // Every vision tensor of the checkpoint must have been bound.
  absl::Status CheckNoExtras() const {
    for (const std::string& name : ckpt_.Names()) {
      if (!model::Checkpoint::IsVisionTensor(name) || bound_.count(name)) continue;
      return InvalidArgumentError(
          "{}: unexpected vision tensor '{}' (not part of this config's vision tower)", ckpt_.dir(),
          name);
    }
    return absl::OkStatus();
  }

 private:
  const model::Checkpoint& ckpt_;
  std::set<std::string> bound_;
};

}  // namespace

absl::StatusOr<VisionWeights> BindVisionWeights(const model::ModelConfig& config,
                                                const model::Checkpoint& checkpoint) {
  if (!config.vision) {
    return FailedPreconditionError("{}: the config has no vision_config", checkpoint.dir());
  }
  const model::VisionConfig& c = *config.vision;
  const std::string tower(kTower), proj(kProjector);
  const int64_t h = c.hidden_size, d = c.head_dim;
  const int64_t qd = int64_t{c.num_attention_heads} * d, kvd = int64_t{c.num_key_value_heads} * d;
  Binder b(checkpoint);
  VisionWeights w;
  GANNET_RETURN_IF_ERROR(
      b.Bind(tower + "patch_embedder.input_proj.weight", {h, c.patch_dim()}, &w.input_proj));
  GANNET_RETURN_IF_ERROR(b.Bind(tower + "patch_embedder.position_embedding_table",
                                {2, c.position_embedding_size, h}, &w.position_table));
  if (c.standardize) {
    GANNET_RETURN_IF_ERROR(b.Bind(tower + "std_bias", {h}, &w.std_bias));
    GANNET_RETURN_IF_ERROR(b.Bind(tower + "std_scale", {h}, &w.std_scale));
  }
  GANNET_RETURN_IF_ERROR(b.Bind(proj + "embedding_projection.weight", {config.text.hidden_size, h},
                                &w.embedding_projection));
  w.layers.resize(c.num_hidden_layers);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    VisionLayerWeights& lw = w.layers[l];
    const std::string p = tower + "encoder.layers." + std::to_string(l) + ".";
    GANNET_RETURN_IF_ERROR(b.Bind(p + "input_layernorm.weight", {h}, &lw.input_layernorm));
    GANNET_RETURN_IF_ERROR(
        b.Bind(p + "post_attention_layernorm.weight", {h}, &lw.post_attention_layernorm));
    GANNET_RETURN_IF_ERROR(
        b.Bind(p + "pre_feedforward_layernorm.weight", {h}, &lw.pre_feedforward_layernorm));
    GANNET_RETURN_IF_ERROR(
        b.Bind(p + "post_feedforward_layernorm.weight", {h}, &lw.post_feedforward_layernorm));
    GANNET_RETURN_IF_ERROR(b.Bind(p + "self_attn.q_norm.weight", {d}, &lw.q_norm));
    GANNET_RETURN_IF_ERROR(b.Bind(p + "self_attn.k_norm.weight", {d}, &lw.k_norm));
    GANNET_RETURN_IF_ERROR(b.Linear(c, p + "self_attn.q_proj", qd, h, &lw.q_proj));
    GANNET_RETURN_IF_ERROR(b.Linear(c, p + "self_attn.k_proj", kvd, h, &lw.k_proj));
    GANNET_RETURN_IF_ERROR(b.Linear(c, p + "self_attn.v_proj", kvd, h, &lw.v_proj));
    GANNET_RETURN_IF_ERROR(b.Linear(c, p + "self_attn.o_proj", h, qd, &lw.o_proj));
    GANNET_RETURN_IF_ERROR(b.Linear(c, p + "mlp.gate_proj", c.intermediate_size, h, &lw.gate_proj));
    GANNET_RETURN_IF_ERROR(b.Linear(c, p + "mlp.up_proj", c.intermediate_size, h, &lw.up_proj));
    GANNET_RETURN_IF_ERROR(b.Linear(c, p + "mlp.down_proj", h, c.intermediate_size, &lw.down_proj));
  }
  GANNET_RETURN_IF_ERROR(b.CheckNoExtras());
  return w;
}

}  // namespace gannet::vision
