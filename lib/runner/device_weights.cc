#include "lib/runner/device_weights.h"

#include <algorithm>
#include <cmath>

#include "lib/common/status.h"
#include "lib/common/units.h"

namespace gannet::runner {

float RoundScaleToDType(double v, DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return RoundToBf16(static_cast<float>(v));
    case DType::kF16:
      return F16ToFloat(FloatToF16(static_cast<float>(v)));
    default:
      return static_cast<float>(v);
  }
}

absl::StatusOr<DeviceWeights> LoadDeviceWeights(const model::ModelConfig& config,
                                                const model::ModelWeights& w,
                                                backend::Backend* backend,
                                                const WeightProgressFn& on_progress,
                                                const WeightCopiedFn& on_copied) {
  DeviceWeights d;
  // Progress is measured against the bytes of the tensors given (a tensor-parallel rank's shard
  // is smaller than its geometry's expected tensors: its embedding holds a vocabulary shard).
  const int64_t total = model::ViewBytes(w);
  int64_t done = 0;
  auto load = [&](std::initializer_list<const model::WeightView*> parts,
                  backend::Tensor* out) -> absl::Status {
    std::vector<const model::WeightView*> v(parts);
    for (const model::WeightView* p : v) {
      if (!p->present()) return absl::OkStatus();  // optional tensor absent for this layer
    }
    absl::StatusOr<backend::OwnedTensor> loaded = backend->LoadWeight(v);
    if (!loaded.ok()) {
      return Annotate(loaded.status(),
                      fmt::format("loading weight '{}' ({} of {} weight bytes "
                                  "loaded so far)",
                                  v[0]->name, FormatBytes(done), FormatBytes(total)));
    }
    backend::OwnedTensor t = *std::move(loaded);
    *out = t.tensor;
    // Each checkpoint tensor is one load's part (none is fused in two), so a copied source is
    // never read again.
    if (on_copied && t.buffer.data() != nullptr) {
      for (const model::WeightView* p : v) {
        if (!p->synthetic) on_copied(*p);
      }
    }
    for (const model::WeightView* p : v) done += p->nbytes();
    if (on_progress && !on_progress(std::min(done, total), total)) {
      return absl::CancelledError("loading the weights was cancelled by the progress callback");
    }
    d.bytes += static_cast<uint64_t>(t.tensor.numel()) * DTypeBits(t.tensor.dtype) / 8;
    for (const model::WeightView* p : v) d.bytes += p->scale_bytes();
    d.storage.push_back(std::move(t));
    return absl::OkStatus();
  };
  const model::TextConfig& c = config.text;
  // The embedding tables are gathered by row (and the tied LM head is the same table): only the
  // matrices the linear layers and the MoE experts read may be quantized.
  for (const model::WeightView* v : {&w.embed_tokens, &w.embed_tokens_per_layer}) {
    if (v->present() && v->quantized()) {
      return UnimplementedError(
          "'{}' is quantized ({}); gannet reads embedding tables in "
          "bf16/f16/f32 only (compressed-tensors: list it in `ignore`)",
          v->name, WeightFormatName(v->format));
    }
  }
  GANNET_RETURN_IF_ERROR(load({&w.embed_tokens}, &d.embed));
  d.lm_head = d.embed;
  if (w.lm_head.present()) GANNET_RETURN_IF_ERROR(load({&w.lm_head}, &d.lm_head));
  GANNET_RETURN_IF_ERROR(load({&w.final_norm}, &d.final_norm));
  d.embed_scale =
      RoundScaleToDType(std::sqrt(static_cast<double>(c.hidden_size)), w.embed_tokens.dtype);
  if (c.has_ple()) {
    GANNET_RETURN_IF_ERROR(load({&w.embed_tokens_per_layer}, &d.ple_table));
    GANNET_RETURN_IF_ERROR(load({&w.per_layer_model_projection}, &d.ple_model_proj));
    GANNET_RETURN_IF_ERROR(load({&w.per_layer_projection_norm}, &d.ple_proj_norm));
    d.ple_token_scale =
        RoundScaleToDType(std::sqrt(static_cast<double>(c.hidden_size_per_layer_input)),
                          w.embed_tokens_per_layer.dtype);
  }
  d.layers.resize(c.num_hidden_layers);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const model::LayerWeights& lw = w.layers[l];
    DeviceLayer& dl = d.layers[l];
    GANNET_RETURN_IF_ERROR(load({&lw.input_layernorm}, &dl.input_norm));
    GANNET_RETURN_IF_ERROR(load({&lw.post_attention_layernorm}, &dl.post_attn_norm));
    GANNET_RETURN_IF_ERROR(load({&lw.pre_feedforward_layernorm}, &dl.pre_ff_norm));
    GANNET_RETURN_IF_ERROR(load({&lw.post_feedforward_layernorm}, &dl.post_ff_norm));
    if (c.IsKvShared(l)) {
      GANNET_RETURN_IF_ERROR(load({&lw.q_proj}, &dl.qkv));
    } else if (c.LayerKEqV(l)) {
      GANNET_RETURN_IF_ERROR(load({&lw.q_proj, &lw.k_proj}, &dl.qkv));
    } else {
      GANNET_RETURN_IF_ERROR(load({&lw.q_proj, &lw.k_proj, &lw.v_proj}, &dl.qkv));
    }
    dl.qkv_cols = static_cast<int>(dl.qkv.dim(0));
    GANNET_RETURN_IF_ERROR(load({&lw.q_norm}, &dl.q_norm));
    GANNET_RETURN_IF_ERROR(load({&lw.k_norm}, &dl.k_norm));
    GANNET_RETURN_IF_ERROR(load({&lw.o_proj}, &dl.o_proj));
    GANNET_RETURN_IF_ERROR(load({&lw.gate_proj, &lw.up_proj}, &dl.gate_up));
    GANNET_RETURN_IF_ERROR(load({&lw.down_proj}, &dl.down));
    dl.intermediate = lw.gate_proj.dim(0);
    GANNET_RETURN_IF_ERROR(load({&lw.layer_scalar}, &dl.layer_scalar));
    GANNET_RETURN_IF_ERROR(load({&lw.per_layer_input_gate}, &dl.ple_gate));
    GANNET_RETURN_IF_ERROR(load({&lw.per_layer_projection}, &dl.ple_proj));
    GANNET_RETURN_IF_ERROR(load({&lw.post_per_layer_input_norm}, &dl.ple_post_norm));
    GANNET_RETURN_IF_ERROR(load({&lw.router_proj}, &dl.router_proj));
    GANNET_RETURN_IF_ERROR(load({&lw.router_scale}, &dl.router_scale));
    GANNET_RETURN_IF_ERROR(load({&lw.router_per_expert_scale}, &dl.per_expert_scale));
    GANNET_RETURN_IF_ERROR(load({&lw.experts_gate_up}, &dl.experts_gate_up));
    GANNET_RETURN_IF_ERROR(load({&lw.experts_down}, &dl.experts_down));
    GANNET_RETURN_IF_ERROR(load({&lw.pre_feedforward_layernorm_2}, &dl.pre_ff_norm_2));
    GANNET_RETURN_IF_ERROR(load({&lw.post_feedforward_layernorm_1}, &dl.post_ff_norm_1));
    GANNET_RETURN_IF_ERROR(load({&lw.post_feedforward_layernorm_2}, &dl.post_ff_norm_2));
  }
  return d;
}

}  // namespace gannet::runner
