// The vision tower's weights as the HF checkpoint names them (model.vision_tower.*, and the
// projector model.embed_vision.*), bound from a Checkpoint opened with vision_only (checkpoint.h),
// so a text-only load never reads them. Views point into the Checkpoint's memory and must not
// outlive it. The clip bounds of clipped linears are scalars read at bind time.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"

namespace gannet::vision {

// A clipped linear's bounds: its input is clamped to [in_min, in_max] before the product and
// its output to [out_min, out_max] after (infinite without use_clipped_linears).
struct ClipBounds {
  float in_min = -std::numeric_limits<float>::infinity();
  float in_max = std::numeric_limits<float>::infinity();
  float out_min = -std::numeric_limits<float>::infinity();
  float out_max = std::numeric_limits<float>::infinity();
};

struct VisionLinear {
  model::WeightView weight;  // [out, in]: <module>.linear.weight
  ClipBounds clip;
};

struct VisionLayerWeights {
  model::WeightView input_layernorm, post_attention_layernorm;              // [H]
  model::WeightView pre_feedforward_layernorm, post_feedforward_layernorm;  // [H]
  model::WeightView q_norm, k_norm;                                         // [d]
  VisionLinear q_proj, k_proj, v_proj;  // [n_q * d, H], [n_kv * d, H], [n_kv * d, H]
  VisionLinear o_proj;                  // [H, n_q * d]
  VisionLinear gate_proj, up_proj;      // [I, H]
  VisionLinear down_proj;               // [H, I]
};

struct VisionWeights {
  model::WeightView input_proj;            // [H, 3 * patch^2]
  model::WeightView position_table;        // [2, position_embedding_size, H]: x rows, y rows
  model::WeightView std_bias, std_scale;   // [H], only with standardize
  model::WeightView embedding_projection;  // [text hidden, H]
  std::vector<VisionLayerWeights> layers;
};

// Binds every tensor the config's vision tower needs. FailedPrecondition without a vision
// config; NotFound naming a missing tensor; InvalidArgument for a wrong shape, an unexpected
// vision tensor or clip bounds that are NaN or reversed; Unimplemented for a dtype other than
// bf16, f16 or f32. `checkpoint` must hold its data (read_data).
absl::StatusOr<VisionWeights> BindVisionWeights(const model::ModelConfig& config,
                                                const model::Checkpoint& checkpoint);

}  // namespace gannet::vision
