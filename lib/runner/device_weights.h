// The model's weights in backend memory, in the layout the runner's recipe uses: q/k/v fused into
// one projection, gate/up fused into one, vectors in the backend's own format.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"

namespace gannet::runner {

struct DeviceLayer {
  backend::Tensor input_norm, post_attn_norm, pre_ff_norm, post_ff_norm;
  backend::Tensor qkv;  // [n_q*d + (k, v | k) rows, H]
  backend::Tensor q_norm, k_norm;
  backend::Tensor o_proj;   // [H, n_q*d]
  backend::Tensor gate_up;  // [2I, H]
  backend::Tensor down;     // [H, I]
  backend::Tensor layer_scalar;
  backend::Tensor ple_gate, ple_proj, ple_post_norm;
  backend::Tensor router_proj, router_scale, per_expert_scale;
  backend::Tensor experts_gate_up, experts_down;
  backend::Tensor pre_ff_norm_2, post_ff_norm_1, post_ff_norm_2;
  int64_t intermediate = 0;
  int qkv_cols = 0;
};

struct DeviceWeights {
  backend::Tensor embed;    // [V, H]
  backend::Tensor lm_head;  // [V, H]
  backend::Tensor final_norm;
  backend::Tensor ple_table, ple_model_proj, ple_proj_norm;
  std::vector<DeviceLayer> layers;
  float embed_scale = 1.0f;      // sqrt(H) in the embedding's dtype
  float ple_token_scale = 1.0f;  // sqrt(P) in the PLE table's dtype
  std::vector<backend::OwnedTensor> storage;
  uint64_t bytes = 0;  // of every weight tensor, owned or read in place
};

// Called after each weight with the bytes loaded so far and in all (bf16 sizes); returning false
// cancels the load (Cancelled).
using WeightProgressFn = std::function<bool(int64_t done, int64_t total)>;
// Called for each checkpoint tensor the backend copied into memory of its own (fused parts,
// converted types) once the copy exists and nothing will read the source again: the engine
// gives those bytes back on the CPU, where the rest is read in place, so that the weights are
// not held twice (Checkpoint::ReleaseRange). Not called for tensors used in place.
using WeightCopiedFn = std::function<void(const model::WeightView& source)>;

absl::StatusOr<DeviceWeights> LoadDeviceWeights(const model::ModelConfig& config,
                                                const model::ModelWeights& weights,
                                                backend::Backend* backend,
                                                const WeightProgressFn& on_progress = {},
                                                const WeightCopiedFn& on_copied = {});

// v rounded to the precision of dtype, as HF casts its scale buffers to the weight dtype.
float RoundScaleToDType(double v, DType dtype);

}  // namespace gannet::runner
