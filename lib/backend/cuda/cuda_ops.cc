// The CUDA backend's elementwise, norm, embedding, gather, softcap and sampling ops.
#include <cstring>

#include "kernels/activation/elementwise.h"
#include "kernels/norm/norm.h"
#include "kernels/sampling/sampling.h"
#include "kernels/spec/spec.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/backend/cuda/cuda_status.h"
#include "lib/backend/cuda/cuda_util.h"

namespace gannet::backend {

absl::Status CudaBackend::Embed(Tensor ids, Tensor table, float scale, Tensor out) {
  GANNET_RETURN_IF_ERROR(RequireDType(ids, DType::kI32, "Embed ids"));
  GANNET_RETURN_IF_ERROR(RequireMatrixDType(table, "Embed table"));
  const DType table_type = table.dtype;
  if (!table.contiguous()) return InvalidArgumentError("Embed: the table must be contiguous");
  GANNET_ASSIGN_OR_RETURN(kernels::Mat o, MatOf(out, "Embed output"));
  const int64_t n = ids.numel();
  const int64_t width = table.row_elems();
  if (out.rows() != n || out.row_elems() != width) {
    return InvalidArgumentError("Embed: output shape does not match [{}, {}]", n, width);
  }
  GANNET_RETURN_IF_ERROR(
      CheckInt32("Embed", {{"table rows", table.dim(0)}, {"tokens", n}, {"width", width}}));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchEmbed(
      ids.as<int32_t>(), static_cast<int>(n), table.data, table_type,
      static_cast<int>(table.dim(0)), static_cast<int>(width), scale, o, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::RmsNorm(Tensor x, Tensor weight, float eps, Tensor out) {
  const int64_t n = x.shape[x.rank - 1];
  if (weight.valid() && (weight.numel() != n || weight.dtype != DType::kF32)) {
    return InvalidArgumentError("RmsNorm: weight must be {} f32 values", n);
  }
  // Contiguous tensors normalise every group of n values (per-head norms); strided ones per row.
  GANNET_ASSIGN_OR_RETURN(kernels::Mat xm, MatOf(x, "RmsNorm input"));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat om, MatOf(out, "RmsNorm output"));
  int64_t rows = 0;
  if (x.contiguous() && out.contiguous()) {
    rows = x.numel() / n;
    xm.ld = om.ld = n;
  } else if (x.row_elems() == n && out.row_elems() == n) {
    rows = x.rows();
  } else {
    return InvalidArgumentError("RmsNorm: strided views must be [rows, n]");
  }
  if (out.numel() != rows * n) return InvalidArgumentError("RmsNorm: output size mismatch");
  GANNET_RETURN_IF_ERROR(CheckInt32("RmsNorm", {{"rows", rows}, {"row length", n}}));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchRmsNorm(
      xm, F32OrNull(weight), eps, om, static_cast<int>(rows), static_cast<int>(n), stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::PostNormResidual(Tensor x, Tensor post_weight, Tensor residual,
                                           Tensor scalar, Tensor next_weight, Tensor next_out,
                                           float eps) {
  const RowView v = Rows(x);
  GANNET_RETURN_IF_ERROR(
      CheckPostNormResidualArgs(v.rows, v.n, post_weight, residual, scalar, next_weight, next_out));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat xm, MatOf(x, "PostNormResidual input"));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat rm, MatOf(residual, "PostNormResidual residual"));
  kernels::Mat nm;
  if (next_out.valid()) {
    GANNET_ASSIGN_OR_RETURN(nm, MatOf(next_out, "PostNormResidual next output"));
  }
  GANNET_RETURN_IF_ERROR(CheckInt32("PostNormResidual", {{"rows", v.rows}, {"hidden", v.n}}));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchPostNormResidual(
      xm, post_weight.as<float>(), rm, F32OrNull(scalar), F32OrNull(next_weight), nm, eps,
      static_cast<int>(v.rows), static_cast<int>(v.n), stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::NormAddPostNormResidual(Tensor a, Tensor a_weight, Tensor b,
                                                  Tensor b_weight, Tensor post_weight,
                                                  Tensor residual, Tensor scalar,
                                                  Tensor next_weight, Tensor next_out, float eps) {
  const RowView v = Rows(a);
  const bool fuses = kernels::NormAddPostNormResidualFuses(v.rows, v.n) &&
                     a.dtype == DType::kBF16 && b.dtype == DType::kBF16 &&
                     residual.dtype == DType::kF32 &&
                     (!next_out.valid() || next_out.dtype == DType::kBF16);
  if (!fuses) {
    return Backend::NormAddPostNormResidual(a, a_weight, b, b_weight, post_weight, residual, scalar,
                                            next_weight, next_out, eps);
  }
  if (b.rows() != v.rows || b.row_elems() != v.n || residual.rows() != v.rows ||
      residual.row_elems() != v.n || post_weight.numel() != v.n ||
      (a_weight.valid() && a_weight.numel() != v.n) ||
      (b_weight.valid() && b_weight.numel() != v.n) ||
      (next_out.valid() && (next_out.rows() != v.rows || next_out.row_elems() != v.n))) {
    return InvalidArgumentError("NormAddPostNormResidual: a, b, residual and weights disagree");
  }
  for (const Tensor* t : {&a_weight, &b_weight, &post_weight}) {
    if (t->valid()) {
      GANNET_RETURN_IF_ERROR(RequireDType(*t, DType::kF32, "NormAddPostNormResidual weight"));
    }
  }
  GANNET_ASSIGN_OR_RETURN(kernels::Mat am, MatOf(a, "NormAddPostNormResidual a"));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat bm, MatOf(b, "NormAddPostNormResidual b"));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat rm, MatOf(residual, "NormAddPostNormResidual residual"));
  kernels::Mat nm;
  if (next_out.valid()) {
    GANNET_ASSIGN_OR_RETURN(nm, MatOf(next_out, "NormAddPostNormResidual next output"));
  }
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchNormAddPostNormResidual(
      am, F32OrNull(a_weight), bm, F32OrNull(b_weight), post_weight.as<float>(), rm,
      F32OrNull(scalar), F32OrNull(next_weight), nm, eps, static_cast<int>(v.rows),
      static_cast<int>(v.n), stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::GeluTanhMul(Tensor gate, Tensor up, Tensor out) {
  const RowView v = Rows(gate);
  if (up.rows() != v.rows || up.row_elems() != v.n || out.rows() != v.rows ||
      out.row_elems() != v.n) {
    return InvalidArgumentError("GeluTanhMul: shape mismatch");
  }
  GANNET_ASSIGN_OR_RETURN(kernels::Mat g, MatOf(gate, "GeluTanhMul gate"));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat u, MatOf(up, "GeluTanhMul up"));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat o, MatOf(out, "GeluTanhMul output"));
  GANNET_RETURN_IF_ERROR(CheckInt32("GeluTanhMul", {{"rows", v.rows}, {"width", v.n}}));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchGeluTanhMul(g, u, o, static_cast<int>(v.rows),
                                                         static_cast<int>(v.n), stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::Add(Tensor a, Tensor b, Tensor out) {
  const RowView v = Rows(a);
  if (b.rows() != v.rows || b.row_elems() != v.n || out.rows() != v.rows ||
      out.row_elems() != v.n) {
    return InvalidArgumentError("Add: shape mismatch");
  }
  GANNET_ASSIGN_OR_RETURN(kernels::Mat am, MatOf(a, "Add a"));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat bm, MatOf(b, "Add b"));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat om, MatOf(out, "Add output"));
  GANNET_RETURN_IF_ERROR(CheckInt32("Add", {{"rows", v.rows}, {"width", v.n}}));
  GANNET_CUDA_RETURN_IF_ERROR(
      kernels::LaunchAdd(am, bm, om, static_cast<int>(v.rows), static_cast<int>(v.n), stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::PleCombine(Tensor proj, Tensor token_part, Tensor norm_w,
                                     float proj_scale, float combine_scale, float eps, Tensor out) {
  const int64_t p = norm_w.numel();
  const RowView v = Rows(proj);
  GANNET_RETURN_IF_ERROR(CheckPleCombineArgs(v.rows, v.n, token_part, norm_w, out));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat pm, MatOf(proj, "PleCombine projection"));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat tm, MatOf(token_part, "PleCombine token part"));
  GANNET_ASSIGN_OR_RETURN(kernels::Mat om, MatOf(out, "PleCombine output"));
  GANNET_RETURN_IF_ERROR(CheckInt32("PleCombine", {{"rows", v.rows}, {"width", v.n}}));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchPleCombine(
      pm, tm, norm_w.as<float>(), proj_scale, combine_scale, eps, om, static_cast<int>(v.rows),
      static_cast<int>(v.n), static_cast<int>(p), stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::GatherRows(Tensor x, Tensor rows, Tensor out) {
  GANNET_RETURN_IF_ERROR(CheckGatherRowsArgs(x, rows, out));
  const int64_t eb = static_cast<int64_t>(x.elem_bytes());
  GANNET_RETURN_IF_ERROR(
      CheckInt32("GatherRows", {{"source rows", x.rows()}, {"gathered rows", rows.numel()}}));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchGatherRows(
      x.data, x.stride0() * eb, static_cast<int>(x.rows()), rows.as<int32_t>(),
      static_cast<int>(rows.numel()), out.data, out.stride0() * eb, x.row_elems() * eb, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::Softcap(Tensor x, float cap) {
  GANNET_RETURN_IF_ERROR(RequireDType(x, DType::kF32, "Softcap input"));
  const RowView v = Rows(x);
  GANNET_RETURN_IF_ERROR(CheckInt32("Softcap", {{"rows", v.rows}, {"width", v.n}}));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchSoftcap(
      x.as<float>(), v.ld, cap, static_cast<int>(v.rows), static_cast<int>(v.n), stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::CentroidLogits(Tensor h, Tensor table, Tensor clusters, Tensor ordering,
                                         Tensor selected, Tensor logits) {
  GANNET_RETURN_IF_ERROR(CheckCentroidLogitsArgs(h, table, clusters, ordering, selected, logits));
  GANNET_RETURN_IF_ERROR(RequireMatrixDType(table, "CentroidLogits table"));
  const DType table_type = table.dtype;
  GANNET_ASSIGN_OR_RETURN(kernels::Mat hm, MatOf(h, "CentroidLogits h"));
  const RowView v = Rows(logits), c = Rows(clusters);
  GANNET_RETURN_IF_ERROR(
      CheckInt32("CentroidLogits",
                 {{"rows x clusters", v.rows * c.n}, {"vocab", v.n}, {"width", h.row_elems()}}));
  if (selected.stride0() != selected.row_elems()) {
    return InvalidArgumentError("CentroidLogits: selected must be contiguous");
  }
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchCentroidLogits(
      hm, static_cast<int>(v.rows), table.data, table_type, static_cast<int>(h.row_elems()),
      clusters.as<float>(), c.ld, static_cast<int>(c.n), ordering.as<int32_t>(),
      static_cast<int>(ordering.dim(1)), static_cast<int>(selected.row_elems()),
      selected.as<int32_t>(), logits.as<float>(), v.ld, static_cast<int>(v.n), stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::Sample(Tensor logits, Tensor params, Tensor banned, Tensor out_ids) {
  GANNET_RETURN_IF_ERROR(RequireDType(logits, DType::kF32, "Sample logits"));
  const RowView v = Rows(logits);
  GANNET_RETURN_IF_ERROR(CheckSampleArgs(v.rows, params, banned, out_ids));
  GANNET_RETURN_IF_ERROR(CheckInt32("Sample", {{"rows", v.rows}, {"vocab", v.n}}));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchSample(
      logits.as<float>(), v.ld, static_cast<int>(v.rows), static_cast<int>(v.n),
      static_cast<const kernels::DrawParams*>(params.data),
      banned.valid() ? banned.as<int32_t>() : nullptr, kSampleBanSlots, out_ids.as<int32_t>(),
      stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::ShardArgmax(Tensor logits, Tensor banned, int64_t id_offset, Tensor out) {
  GANNET_RETURN_IF_ERROR(RequireDType(logits, DType::kF32, "ShardArgmax logits"));
  GANNET_RETURN_IF_ERROR(CheckShardArgmaxArgs(logits, banned, out));
  const RowView v = Rows(logits);
  GANNET_RETURN_IF_ERROR(CheckInt32(
      "ShardArgmax", {{"rows", v.rows}, {"columns", v.n}, {"last id", id_offset + v.n}}));
  GANNET_CUDA_RETURN_IF_ERROR(kernels::LaunchShardArgmax(
      logits.as<float>(), v.ld, static_cast<int>(v.rows), static_cast<int>(v.n), id_offset,
      banned.valid() ? banned.as<int32_t>() : nullptr, kSampleBanSlots, out.as<float>(),
      out.stride0(), stream_));
  return absl::OkStatus();
}

}  // namespace gannet::backend
