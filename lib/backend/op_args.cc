// Shape checks of the row ops (PostNormResidual, PleCombine, GatherRows) shared by every backend,
// so each rejects the same operands with the same message instead of reading or writing past them.
#include "lib/backend/backend.h"
#include "lib/common/status.h"

namespace gannet::backend {

absl::Status CheckPostNormResidualArgs(int64_t rows, int64_t n, const Tensor& post_weight,
                                       const Tensor& residual, const Tensor& scalar,
                                       const Tensor& next_weight, const Tensor& next_out) {
  if (residual.rows() != rows || residual.row_elems() != n || post_weight.numel() != n ||
      (next_weight.valid() && next_weight.numel() != n) ||
      (scalar.valid() && scalar.numel() != 1)) {
    return InvalidArgumentError("PostNormResidual: x, residual, weights and scalar disagree");
  }
  for (const Tensor* t : {&post_weight, &next_weight, &scalar}) {
    if (t->valid() && t->dtype != DType::kF32) {
      return InvalidArgumentError("PostNormResidual: weights and scalar must be f32, got {}",
                                  DTypeName(t->dtype));
    }
  }
  if (next_out.valid() && (next_out.rows() != rows || next_out.row_elems() != n)) {
    return InvalidArgumentError("PostNormResidual: next output shape mismatch");
  }
  return absl::OkStatus();
}

absl::Status CheckPleCombineArgs(int64_t rows, int64_t width, const Tensor& token_part,
                                 const Tensor& norm_w, const Tensor& out) {
  const int64_t p = norm_w.numel();
  if (p < 1 || width % p != 0 || token_part.row_elems() != width || out.row_elems() != width) {
    return InvalidArgumentError("PleCombine: widths {} / {} do not split into groups of {}", width,
                                token_part.row_elems(), p);
  }
  if (token_part.rows() != rows || out.rows() != rows) {
    return InvalidArgumentError("PleCombine: proj, token part and output rows disagree");
  }
  if (norm_w.dtype != DType::kF32) {
    return InvalidArgumentError("PleCombine: norm weight must be f32, got {}",
                                DTypeName(norm_w.dtype));
  }
  return absl::OkStatus();
}

absl::Status CheckGatherRowsArgs(const Tensor& x, const Tensor& rows, const Tensor& out) {
  if (rows.dtype != DType::kI32) {
    return InvalidArgumentError("GatherRows: row indices must be i32, got {}",
                                DTypeName(rows.dtype));
  }
  if (x.dtype != out.dtype || x.row_elems() != out.row_elems() || out.rows() < rows.numel()) {
    return InvalidArgumentError("GatherRows: x and out disagree");
  }
  return absl::OkStatus();
}

}  // namespace gannet::backend
