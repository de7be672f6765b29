// A quantized model's weights written back densely: the f32 reference a quantized model's
// outputs must equal (the same values, dequantized once on the host).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "tests/testing/tiny_models.h"

namespace gannet::testing {

// `src`'s tensors with every quantized weight of `q` replaced by its dequantized values in f32
// under the plain checkpoint name (fused experts as the 3-D tensor), written to `dst` as one file.
absl::Status WriteDequantizedReference(const std::string& src, const LoadedModel& q,
                                       const std::string& dst);

}  // namespace gannet::testing
