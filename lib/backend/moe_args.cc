// Argument checks of Backend::MoeExperts' expert range (expert parallelism) shared by every
// backend, so each rejects the same inputs with the same message.
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

}  // namespace gannet::backend
