// Argument checks of Backend::Sample shared by every backend, so each rejects the same inputs
// with the same message.
#include "lib/backend/backend.h"
#include "lib/common/status.h"

namespace gannet::backend {

absl::Status CheckSampleArgs(int64_t rows, Tensor params, Tensor banned, Tensor out_ids) {
  if (params.numel() * static_cast<int64_t>(params.elem_bytes()) <
          rows * static_cast<int64_t>(sizeof(sampling::DrawParams)) ||
      out_ids.dtype != DType::kI32 || out_ids.numel() < rows) {
    return InvalidArgumentError("Sample: params must hold {} DrawParams and out_ids {} int32", rows,
                                rows);
  }
  if (banned.valid() && (banned.dtype != DType::kI32 || banned.numel() < rows * kSampleBanSlots)) {
    return InvalidArgumentError("Sample: banned must hold {} x {} int32 token ids", rows,
                                kSampleBanSlots);
  }
  return absl::OkStatus();
}

absl::Status CheckCentroidLogitsArgs(const Tensor& h, const Tensor& table, const Tensor& clusters,
                                     const Tensor& ordering, const Tensor& selected,
                                     const Tensor& logits) {
  if (logits.dtype != DType::kF32 || clusters.dtype != DType::kF32 ||
      ordering.dtype != DType::kI32 || selected.dtype != DType::kI32) {
    return InvalidArgumentError(
        "CentroidLogits: logits and cluster logits must be f32, ordering and selected int32");
  }
  const int64_t rows = h.rows(), vocab = table.dim(0), num = clusters.row_elems();
  const int64_t top_k = selected.row_elems();
  if (table.rank != 2 || h.row_elems() != table.row_elems() || logits.rows() != rows ||
      logits.row_elems() != vocab || clusters.rows() != rows || selected.rows() != rows ||
      ordering.rank != 2 || ordering.dim(0) != num || ordering.dim(0) * ordering.dim(1) != vocab ||
      top_k < 1 || top_k > num) {
    return InvalidArgumentError(
        "CentroidLogits: h [{}, {}], table [{}, {}], {} cluster logits per row, ordering {} x {}, "
        "top {}, logits [{}, {}] do not fit together",
        rows, h.row_elems(), vocab, table.row_elems(), num, ordering.dim(0),
        ordering.rank == 2 ? ordering.dim(1) : 0, top_k, logits.rows(), logits.row_elems());
  }
  return absl::OkStatus();
}

absl::Status CheckShardArgmaxArgs(const Tensor& logits, const Tensor& banned, const Tensor& out) {
  const int64_t rows = logits.rows();
  if (logits.row_elems() < 1) return InvalidArgumentError("ShardArgmax: empty shard");
  if (out.dtype != DType::kF32 || out.rows() != rows || out.row_elems() != 2) {
    return InvalidArgumentError("ShardArgmax: out must be [{}, 2] f32", rows);
  }
  if (banned.valid() && (banned.dtype != DType::kI32 || banned.numel() != rows * kSampleBanSlots)) {
    return InvalidArgumentError("ShardArgmax: banned must be [{}, {}] int32", rows,
                                kSampleBanSlots);
  }
  return absl::OkStatus();
}

}  // namespace gannet::backend
