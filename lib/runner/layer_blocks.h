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
// of `c` (window, heads and group from the layer type); `attn` is scratch of at least n rows of
// heads x head_dim.
absl::Status AttendAndProject(backend::Backend* be, const model::TextConfig& c, int layer,
                              backend::Tensor q, const KvStorage::LayerKv& kv,
                              const backend::StepMetadata& md, backend::Tensor attn,
                              backend::Tensor o_proj, backend::Tensor out);

// A post-norm residual update (Backend::PostNormResidual's arguments but its next output) whose
// result the following projection reads: the runner hands it to that projection, which the
// backend may fuse it into (Backend::PostNormResidualLinear).
struct PostNormIn {
  backend::Tensor x, post_weight, residual, scalar, next_weight;
  float eps = 1e-6f;
};

// Linear(in, w, out), with `norm` (when given) applied first: its next output written to (or, when
// fused, standing for) `in`, which is then next_out, or the residual without a next weight.
absl::Status NormedLinear(backend::Backend* be, const PostNormIn* norm, backend::Tensor in,
                          backend::Tensor w, backend::Tensor out);

// out[n, hidden] = down(gelu_tanh(gate) * up) with [gate | up] = gate_up(h); `gate_up` and `mlp`
// are scratch of at least n rows of 2 x and 1 x the layer's intermediate size. With `norm`, h is
// that update's next output (NormedLinear).
absl::Status GatedMlp(backend::Backend* be, const DeviceLayer& layer, backend::Tensor h,
                      backend::Tensor gate_up, backend::Tensor mlp, backend::Tensor out,
                      const PostNormIn* norm = nullptr);

}  // namespace gannet::runner
