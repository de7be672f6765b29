#include <cmath>

#include "lib/backend/backend.h"

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

}  // namespace gannet::backend
