// The pieces of a Gemma-4 decoder layer that the target (model_runner.cc) and the MTP drafter
// (lib/spec/drafter.cc) run alike; each caller keeps its own q/k/v preparation (the drafter's
// layers are Q-only over the target's KV) and its residual wiring.
#pragma once

#include "absl/status/status.h"
#include "lib/backend/backend.h"
#include "lib/model/config.h"
#include "lib/runner/device_weights.h"
#include "lib/runner/kv_storage.h"

namespace gannet::runner {

// out[n, hidden] = o_proj(paged attention of q [n, heads, head_dim] over `kv`) for layer `layer`
// of `c` (window and heads from the layer type; `kv`, passed by value, must be of the layer type's
// group: Internal otherwise); `attn` is scratch of at least n rows of heads x head_dim.
absl::Status AttendAndProject(backend::Backend* be, const model::TextConfig& c, int layer,
                              backend::Tensor q, backend::LayerKvView kv,
                              const backend::StepMetadata& md, backend::Tensor attn,
                              backend::Tensor o_proj, backend::Tensor out);

// out[n, hidden] = down(gelu_tanh(gate) * up) with [gate | up] = gate_up(h); `gate_up` and `mlp`
// are scratch of at least n rows of 2 x and 1 x the layer's intermediate size.
absl::Status GatedMlp(backend::Backend* be, const DeviceLayer& layer, backend::Tensor h,
                      backend::Tensor gate_up, backend::Tensor mlp, backend::Tensor out);

}  // namespace gannet::runner
