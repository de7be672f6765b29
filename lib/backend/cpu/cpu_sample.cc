// Token sampling on the CPU: Backend::Sample through sampling::DrawToken (lib/sampling/draw.h),
// the one definition the host sampler and the GPU kernel share -- written plainly, sorting where
// the GPU kernel radix-selects, with the same fixed-point weights, so both pick the same token
// for the same seed unless exp() rounds differently at a boundary.
#include <cmath>
#include <cstring>

#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/cpu_math.h"
#include "lib/sampling/draw.h"

namespace gannet::backend {

absl::Status CpuBackend::Sample(Tensor logits, Tensor params, Tensor banned, Tensor out_ids) {
  GANNET_RETURN_IF_ERROR(cpu::RequireF32(logits, "Sample logits"));
  const int64_t rows = logits.rows();
  const int64_t vocab = logits.row_elems();
  GANNET_RETURN_IF_ERROR(CheckSampleArgs(rows, params, banned, out_ids));
  if (vocab < 1) return InvalidArgumentError("Sample: empty vocabulary");
  const auto* sp = static_cast<const sampling::DrawParams*>(params.data);
  pool().ParallelFor(rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const sampling::DrawParams& p = sp[r];
      if (banned.valid()) {
        for (int k = 0; k < kSampleBanSlots; ++k) {
          const int32_t id = banned.as<int32_t>()[r * kSampleBanSlots + k];
          if (id >= 0 && id < vocab) logits.as<float>()[r * logits.stride0() + id] = -INFINITY;
        }
      }
      out_ids.as<int32_t>()[r] =
          sampling::DrawToken(logits.as<float>() + r * logits.stride0(), vocab, p);
    }
  });
  return absl::OkStatus();
}

absl::Status CpuBackend::ShardArgmax(Tensor logits, Tensor banned, int64_t id_offset, Tensor out) {
  GANNET_RETURN_IF_ERROR(cpu::RequireF32(logits, "ShardArgmax logits"));
  GANNET_RETURN_IF_ERROR(CheckShardArgmaxArgs(logits, banned, out));
  const int64_t rows = logits.rows(), cols = logits.row_elems();
  for (int64_t r = 0; r < rows; ++r) {
    float* x = logits.as<float>() + r * logits.stride0();
    for (int k = 0; banned.valid() && k < kSampleBanSlots; ++k) {
      const int64_t id = banned.as<int32_t>()[r * kSampleBanSlots + k] - id_offset;
      if (id >= 0 && id < cols) x[id] = -INFINITY;
    }
    const int64_t best = sampling::ArgMax(x, cols);
    float* o = out.as<float>() + r * out.stride0();
    o[0] = x[best];
    const int32_t id = static_cast<int32_t>(best + id_offset);
    std::memcpy(&o[1], &id, sizeof id);
  }
  return absl::OkStatus();
}

}  // namespace gannet::backend
