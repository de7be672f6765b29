#include <cmath>

#include "lib/backend/backend.h"
#include "lib/common/status.h"

namespace gannet::backend {

void ComputeInvFreq(const RopeSpec& rope, int head_dim, float* inv_freq) {
  // HF: 1 / (base ** (arange(0, 2k, 2).float() / head_dim)), evaluated in float32, then / factor.
  const float base = static_cast<float>(rope.theta);
  for (int j = 0; j < head_dim / 2; ++j) {
    if (j < rope.rotated_pairs) {
      float expo = static_cast<float>(2 * j) / static_cast<float>(head_dim);
      float v = 1.0f / std::pow(base, expo);
      inv_freq[j] = v / static_cast<float>(rope.factor);
    } else {
      inv_freq[j] = 0.0f;
    }
  }
}

absl::StatusOr<Buffer> Backend::AllocateZeroed(size_t bytes) {
  GANNET_ASSIGN_OR_RETURN(Buffer b, Allocate((bytes + 3) / 4 * 4));
  if (bytes > 0) {
    GANNET_RETURN_IF_ERROR(
        Fill(b.View(DType::kF32, {static_cast<int64_t>((bytes + 3) / 4)}), 0.0f));
  }
  return b;
}

}  // namespace gannet::backend
