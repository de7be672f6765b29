// Tensor views over backend memory.
//
// A Tensor is a non-owning view: a pointer, an element type, a shape and a row stride. Memory is
// owned by Buffer objects that a Backend allocates (RAII); views must not outlive their buffer.
// Tensors are row-major; `row_stride` is the distance in elements between consecutive rows of the
// leading dimension (>= the product of the trailing dims), which lets a view select a column
// block of a wider matrix (the per-layer slice of the PLE inputs, the Q part of a fused QKV
// output).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>

#include "lib/common/dtype.h"

namespace gannet::backend {

inline constexpr int kMaxRank = 4;

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape = {0, 0, 0, 0};
  int64_t row_stride = 0;  // elements between rows of dim 0; 0 = contiguous
  // A quantized weight (format.quantized(); docs/quantized-formats.md): `data` holds the
  // elements of dtype == format.elem in the in-memory layout of lib/quant/int4.h (int4: `scales`
  // one per format.group_size elements of a row, `zero_points` (kU4) one byte per scale) or
  // lib/quant/fp8.h (FP8: f32 `scales` per row or per row and 128 inputs, `input_scales` one f32
  // per row with static activation scales); shape is the logical [rows, k] (or [E, rows, k]).
  // Contiguous only. Ops that do not handle the format refuse it (cpu::RequireDenseWeight, the
  // CUDA backend's LoadWeight).
  WeightFormat format = {};
  const void* scales = nullptr;
  const uint8_t* zero_points = nullptr;
  // format.input_perm (GPTQ act-order): row r's stored column j holds input
  // input_perm[perm_index[r] * k + j]; a table of int32 permutations of k, one per source module.
  const int32_t* input_perm = nullptr;
  const int32_t* perm_index = nullptr;   // [rows]
  const float* input_scales = nullptr;   // per matrix row (FP8 static, NVFP4 input global)
  const float* global_scales = nullptr;  // NVFP4: per matrix row, its module's global scale
  // Scales of one row of dim 0 (int4 groups, FP8 per-row or per-128 scales of its matrix rows:
  // a 3-D [E, R, k] weight's row is an expert's R rows).
  int64_t scales_per_row() const;

  static Tensor Make(void* data, DType dtype, std::initializer_list<int64_t> dims);

  bool valid() const { return data != nullptr; }
  int64_t dim(int i) const { return shape[i]; }
  int64_t rows() const { return rank == 0 ? 1 : shape[0]; }
  // Elements in one row of dim 0 (the product of the trailing dims).
  int64_t row_elems() const;
  int64_t numel() const { return rows() * row_elems(); }
  int64_t stride0() const { return row_stride ? row_stride : row_elems(); }
  size_t elem_bytes() const { return static_cast<size_t>(DTypeBits(dtype) / 8); }
  bool quantized() const { return format.quantized(); }
  bool contiguous() const { return row_stride == 0 || row_stride == row_elems(); }

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // Rows [begin, begin + count) of dim 0.
  Tensor Rows(int64_t begin, int64_t count) const;
  // Columns [begin, begin + count) of a rank-2 view (keeps the row stride).
  Tensor Cols(int64_t begin, int64_t count) const;
  // Same memory seen with another shape (contiguous tensors only).
  Tensor Reshape(std::initializer_list<int64_t> dims) const;
};

// An owning allocation in a backend's memory. Move-only; frees itself.
class Buffer {
 public:
  Buffer() = default;
  Buffer(void* data, size_t bytes, std::function<void(void*)> deleter)
      : data_(data), bytes_(bytes), deleter_(std::move(deleter)) {}
  ~Buffer() { Reset(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  void Reset();
  Tensor View(DType dtype, std::initializer_list<int64_t> dims) const {
    return Tensor::Make(data_, dtype, dims);
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::function<void(void*)> deleter_;
};

}  // namespace gannet::backend
