// Argument checks of Backend::Sample shared by every backend, so each rejects the same inputs
// with the same message.
#include "lib/backend/backend.h"
#include "lib/common/status.h"

namespace gannet::backend {

absl::Status CheckSampleArgs(int64_t rows, Tensor params, Tensor banned, Tensor out_ids) {
  if (params.numel() * static_cast<int64_t>(params.elem_bytes()) <
          rows * static_cast<int64_t>(sizeof(SamplingParams)) ||
      out_ids.dtype != DType::kI32 || out_ids.numel() < rows) {
    return InvalidArgumentError("Sample: params must hold {} SamplingParams and out_ids {} int32",
                                rows, rows);
  }
  if (banned.valid() &&
      (banned.dtype != DType::kI32 || banned.numel() < rows * kSampleBanSlots)) {
    return InvalidArgumentError("Sample: banned must hold {} x {} int32 token ids", rows,
                                kSampleBanSlots);
  }
  return absl::OkStatus();
}

}  // namespace gannet::backend
