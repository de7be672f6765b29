// The vision tower's ops (backend.h): the base class's answer for a backend that has not
// implemented them, and the argument checks every backend applies before touching memory.
#include "lib/backend/backend.h"
#include "lib/common/status.h"

namespace gannet::backend {
namespace {

absl::Status NotImplemented(std::string_view backend, std::string_view op) {
  return UnimplementedError("the {} backend has no {} (a vision tower op)", backend, op);
}

absl::Status RequireF32Contiguous(const Tensor& t, std::string_view op, std::string_view what) {
  if (!t.valid() || t.dtype != DType::kF32 || !t.contiguous()) {
    return InvalidArgumentError("{}: {} must be a contiguous f32 tensor", op, what);
  }
  return absl::OkStatus();
}

absl::Status RequireI32(const Tensor& t, int64_t numel, std::string_view op,
                        std::string_view what) {
  if (!t.valid() || t.dtype != DType::kI32 || !t.contiguous() || t.numel() != numel) {
    return InvalidArgumentError("{}: {} must be {} contiguous int32 values", op, what, numel);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Backend::Clamp(Tensor, float, float, Tensor) {
  return NotImplemented(name(), "Clamp");
}
absl::Status Backend::VisionRope(Tensor, Tensor, float) {
  return NotImplemented(name(), "VisionRope");
}
absl::Status Backend::SegmentAttention(const SegmentAttentionArgs&) {
  return NotImplemented(name(), "SegmentAttention");
}
absl::Status Backend::ScatterSumRows(Tensor, Tensor, float, Tensor) {
  return NotImplemented(name(), "ScatterSumRows");
}
absl::Status Backend::Standardize(Tensor, Tensor, Tensor) {
  return NotImplemented(name(), "Standardize");
}

absl::Status CheckClampArgs(const Tensor& x, float lo, float hi, const Tensor& out) {
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(x, "Clamp", "x"));
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(out, "Clamp", "out"));
  if (out.numel() != x.numel()) return InvalidArgumentError("Clamp: x and out differ in size");
  if (!(lo <= hi)) return InvalidArgumentError("Clamp: lower bound {} above upper {}", lo, hi);
  return absl::OkStatus();
}

absl::Status CheckVisionRopeArgs(const Tensor& x, const Tensor& positions) {
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(x, "VisionRope", "x"));
  if (x.rank != 3 || x.dim(2) % 4 != 0) {
    return InvalidArgumentError("VisionRope: x must be [T, heads, d] with d a multiple of 4");
  }
  return RequireI32(positions, x.dim(0) * 2, "VisionRope", "positions ([T, 2])");
}

absl::Status CheckSegmentAttentionArgs(const SegmentAttentionArgs& a) {
  constexpr std::string_view kOp = "SegmentAttention";
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(a.q, kOp, "q"));
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(a.k, kOp, "k"));
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(a.v, kOp, "v"));
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(a.out, kOp, "out"));
  if (a.num_q_heads <= 0 || a.num_kv_heads <= 0 || a.head_dim <= 0 ||
      a.num_q_heads % a.num_kv_heads != 0) {
    return InvalidArgumentError("{}: head counts {} / {} and head_dim {} are not valid", kOp,
                                a.num_q_heads, a.num_kv_heads, a.head_dim);
  }
  const int64_t t = a.q.rows();
  const int64_t dq = int64_t{a.num_q_heads} * a.head_dim;
  const int64_t dkv = int64_t{a.num_kv_heads} * a.head_dim;
  if (a.q.row_elems() != dq || a.out.rows() != t || a.out.row_elems() != dq || a.k.rows() != t ||
      a.k.row_elems() != dkv || a.v.rows() != t || a.v.row_elems() != dkv) {
    return InvalidArgumentError("{}: q, k, v and out disagree with [T={}, heads, d={}]", kOp, t,
                                a.head_dim);
  }
  if (a.num_segments <= 0 || a.host_seg_start == nullptr) {
    return InvalidArgumentError("{}: no segments", kOp);
  }
  GANNET_RETURN_IF_ERROR(RequireI32(a.seg_start, a.num_segments + 1, kOp, "seg_start"));
  if (a.host_seg_start[0] != 0 || a.host_seg_start[a.num_segments] != t) {
    return InvalidArgumentError("{}: segments must cover rows [0, {})", kOp, t);
  }
  for (int s = 0; s < a.num_segments; ++s) {
    if (a.host_seg_start[s + 1] <= a.host_seg_start[s]) {
      return InvalidArgumentError("{}: segment {} is empty or reversed", kOp, s);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckScatterSumRowsArgs(const Tensor& x, const Tensor& dest, const Tensor& out) {
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(x, "ScatterSumRows", "x"));
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(out, "ScatterSumRows", "out"));
  if (out.row_elems() != x.row_elems()) {
    return InvalidArgumentError("ScatterSumRows: x and out rows differ in width");
  }
  return RequireI32(dest, x.rows(), "ScatterSumRows", "dest");
}

absl::Status CheckStandardizeArgs(const Tensor& x, const Tensor& bias, const Tensor& scale) {
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(x, "Standardize", "x"));
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(bias, "Standardize", "bias"));
  GANNET_RETURN_IF_ERROR(RequireF32Contiguous(scale, "Standardize", "scale"));
  if (bias.numel() != x.row_elems() || scale.numel() != x.row_elems()) {
    return InvalidArgumentError("Standardize: bias and scale must have {} elements", x.row_elems());
  }
  return absl::OkStatus();
}

}  // namespace gannet::backend
