#include "lib/backend/tensor.h"

#include "lib/common/check.h"

namespace gannet::backend {

Tensor Tensor::Make(void* data, DType dtype, std::initializer_list<int64_t> dims) {
  GANNET_CHECK(dims.size() <= static_cast<size_t>(kMaxRank));
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int>(dims.size());
  int i = 0;
  for (int64_t d : dims) t.shape[i++] = d;
  return t;
}

int64_t Tensor::row_elems() const {
  int64_t n = 1;
  for (int i = 1; i < rank; ++i) n *= shape[i];
  return n;
}

Tensor Tensor::Rows(int64_t begin, int64_t count) const {
  GANNET_CHECK(rank >= 1 && begin >= 0 && begin + count <= shape[0]);
  Tensor t = *this;
  // Bits, not bytes: packed int4 rows are half a byte per element (and even in length).
  t.data = static_cast<char*>(data) + begin * stride0() * DTypeBits(dtype) / 8;
  if (quantized()) {
    const int64_t groups = scales_per_row();
    t.scales = static_cast<const char*>(scales) + begin * groups * DTypeBits(format.scale) / 8;
    if (zero_points != nullptr) t.zero_points = zero_points + begin * groups;
    if (perm_index != nullptr) t.perm_index = perm_index + begin;
    // Per-matrix-row arrays: a 3-D [E, R, k] weight's dim-0 row is R of them.
    const int64_t k = rank >= 2 ? shape[rank - 1] : row_elems();
    const int64_t matrix_rows = begin * (k > 0 ? row_elems() / k : 0);
    if (input_scales != nullptr) t.input_scales = input_scales + matrix_rows;
    if (global_scales != nullptr) t.global_scales = global_scales + matrix_rows;
  }
  t.shape[0] = count;
  return t;
}

int64_t Tensor::scales_per_row() const {
  // In memory every quantized format has its scales per matrix row (lib/quant/int4.h,
  // lib/quant/fp8.h): kChannel one, kGroup / single-row kBlock one per group_size inputs (the last
  // may be shorter).
  GANNET_CHECK(format.granularity == ScaleGranularity::kChannel ||
               format.granularity == ScaleGranularity::kGroup ||
               (format.granularity == ScaleGranularity::kBlock && format.block_rows == 1));
  // A 3-D [E, R, k] weight's dim-0 row is R matrix rows of k.
  const int64_t k = rank >= 2 ? shape[rank - 1] : row_elems();
  const int64_t matrix_rows = k > 0 ? row_elems() / k : 0;
  if (format.granularity == ScaleGranularity::kChannel) return matrix_rows;
  return matrix_rows * ((k + format.group_size - 1) / format.group_size);
}

Tensor Tensor::Cols(int64_t begin, int64_t count) const {
  GANNET_CHECK(rank == 2 && begin >= 0 && begin + count <= shape[1] && !quantized());
  Tensor t = *this;
  t.row_stride = stride0();
  t.data = static_cast<char*>(data) + begin * static_cast<int64_t>(elem_bytes());
  t.shape[1] = count;
  return t;
}

Tensor Tensor::Reshape(std::initializer_list<int64_t> dims) const {
  GANNET_CHECK(contiguous() && !quantized());
  Tensor t = Make(data, dtype, dims);
  GANNET_CHECK(t.numel() == numel());
  return t;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = o.data_;
    bytes_ = o.bytes_;
    deleter_ = std::move(o.deleter_);
    o.data_ = nullptr;
    o.bytes_ = 0;
    o.deleter_ = nullptr;
  }
  return *this;
}

void Buffer::Reset() {
  if (data_ != nullptr && deleter_) deleter_(data_);
  data_ = nullptr;
  bytes_ = 0;
  deleter_ = nullptr;
}

}  // namespace gannet::backend
