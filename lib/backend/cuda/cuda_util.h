// Tensor -> kernel-view helpers shared by the CUDA backend's op files (internal to backend/cuda).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>

#include "absl/status/statusor.h"
#include "kernels/norm/norm.h"
#include "lib/backend/tensor.h"
#include "lib/common/status.h"

namespace gannet::backend {

// A tensor as rows x n with a row stride: dim 0 is the row, the trailing dims are one row.
struct RowView {
  int64_t rows = 0;
  int64_t n = 0;
  int64_t ld = 0;
};
inline RowView Rows(const Tensor& t) {
  if (t.rank <= 1) return {1, t.numel(), t.numel()};
  return {t.rows(), t.row_elems(), t.stride0()};
}

// One size a kernel takes as int, named for the error message.
struct NamedSize {
  const char* name;
  int64_t value;
};

// InvalidArgument naming the op, the size and the limit when a size a kernel takes as int
// (rows, widths, counts) does not fit; offsets inside kernels are 64-bit and need no check.
inline absl::Status CheckInt32(const char* op, std::initializer_list<NamedSize> sizes) {
  for (const NamedSize& s : sizes) {
    if (s.value > std::numeric_limits<int32_t>::max()) {
      return InvalidArgumentError("cuda backend: {}: {} = {} exceeds the kernel limit {} (int32)",
                                  op, s.name, s.value, std::numeric_limits<int32_t>::max());
    }
  }
  return absl::OkStatus();
}

// InvalidArgument naming `what` unless `t` is a type the Mat kernels take (bf16, f16 or f32).
inline absl::Status RequireMatType(DType t, const char* what) {
  if (!kernels::IsMatType(t)) {
    return InvalidArgumentError("cuda backend: {} must be bf16, f16 or f32, got {}", what,
                                DTypeName(t));
  }
  return absl::OkStatus();
}

// bf16, f16 or f32 tensors as a kernel Mat; anything else is an InvalidArgument naming `what`.
inline absl::StatusOr<kernels::Mat> MatOf(const Tensor& t, const char* what) {
  kernels::Mat m;
  m.data = t.data;
  m.ld = Rows(t).ld;
  GANNET_RETURN_IF_ERROR(RequireMatType(t.dtype, what));
  m.type = t.dtype;
  return m;
}

// A weight matrix or embedding table: bf16, or f16 on the fp16 compute path.
inline absl::Status RequireMatrixDType(const Tensor& t, const char* what) {
  if (t.dtype != DType::kBF16 && t.dtype != DType::kF16) {
    return InvalidArgumentError("cuda backend: {} must be bf16 or f16, got {}", what,
                                DTypeName(t.dtype));
  }
  return absl::OkStatus();
}

inline absl::Status RequireDType(const Tensor& t, DType dt, const char* what) {
  if (t.dtype != dt) {
    return InvalidArgumentError("cuda backend: {} must be {}, got {}", what, DTypeName(dt),
                                DTypeName(t.dtype));
  }
  return absl::OkStatus();
}

inline const float* F32OrNull(const Tensor& t) { return t.valid() ? t.as<float>() : nullptr; }

}  // namespace gannet::backend
