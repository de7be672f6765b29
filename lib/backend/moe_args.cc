// Argument checks of Backend::MoeRoute and MoeExperts (shapes, and the expert range of expert
// parallelism) shared by every backend, so each rejects the same inputs with the same message.
#include "lib/backend/backend.h"
#include "lib/common/status.h"

namespace gannet::backend {

int64_t MoeTotalExperts(const MoeExpertsArgs& a) {
  return a.total_experts > 0 ? a.total_experts : a.gate_up.dim(0);
}

absl::Status CheckMoeExpertRange(const MoeExpertsArgs& a) {
  const int64_t held = a.gate_up.dim(0);
  if (a.total_experts < 0 || a.expert_begin < 0 || a.expert_begin + held > MoeTotalExperts(a)) {
    return InvalidArgumentError(
        "MoeExperts: experts [{}, {}) held here lie outside the model's {} (total_experts)",
        a.expert_begin, a.expert_begin + held, MoeTotalExperts(a));
  }
  return absl::OkStatus();
}

absl::Status CheckMoeRouteShapes(const MoeRouteArgs& a) {
  const int64_t tokens = a.x.rows(), hidden = a.x.row_elems(), experts = a.router_proj.dim(0);
  if (a.router_proj.rank != 2 || a.router_proj.row_elems() != hidden ||
      a.router_scale.numel() != hidden || a.per_expert_scale.numel() != experts) {
    return InvalidArgumentError(
        "MoeRoute: router_proj [E, {}], router_scale [{}] and per_expert_scale [E] expected "
        "(got {} router elements, {} scales, {} per-expert scales for {} experts)",
        hidden, hidden, a.router_proj.numel(), a.router_scale.numel(), a.per_expert_scale.numel(),
        experts);
  }
  if (a.top_k <= 0 || a.top_k > experts) {
    return InvalidArgumentError("MoeRoute: top_k {} with {} experts", a.top_k, experts);
  }
  for (const Tensor* t : {&a.topk_ids, &a.topk_weights}) {
    if (t->rows() != tokens || t->row_elems() != a.top_k) {
      return InvalidArgumentError("MoeRoute: topk_ids and topk_weights must be [{}, {}]", tokens,
                                  a.top_k);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckMoeExpertsShapes(const MoeExpertsArgs& a) {
  const int64_t tokens = a.x.rows(), hidden = a.x.row_elems();
  if (a.gate_up.rank != 3 || a.down.rank != 3 || a.gate_up.dim(1) % 2 != 0 ||
      a.gate_up.dim(2) != hidden || a.down.dim(0) != a.gate_up.dim(0) || a.down.dim(1) != hidden ||
      a.down.dim(2) != a.gate_up.dim(1) / 2) {
    return InvalidArgumentError("MoeExperts: expert weight shapes do not match hidden {}", hidden);
  }
  if (a.topk_ids.rows() != tokens || a.topk_weights.rows() != tokens ||
      a.topk_weights.row_elems() != a.topk_ids.row_elems() || a.topk_ids.row_elems() < 1) {
    return InvalidArgumentError("MoeExperts: topk_ids and topk_weights must both be [{}, top_k]",
                                tokens);
  }
  if (a.out.rows() != tokens || a.out.row_elems() != hidden) {
    return InvalidArgumentError("MoeExperts: out must be [{}, {}]", tokens, hidden);
  }
  return CheckMoeExpertRange(a);
}

}  // namespace gannet::backend
