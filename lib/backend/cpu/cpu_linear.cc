// out = x @ w^T on the CPU: each task converts a block of weight rows to f32 once and reuses it
// for every input row, so bf16 weights are decoded (int4 weights dequantized) once per call.
#include <algorithm>
#include <vector>

#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/cpu_math.h"
#include "lib/quant/int4.h"

namespace gannet::backend {
namespace cpu {

void WeightRowToF32(const Tensor& w, int64_t row, int64_t k, float* out) {
  if (!w.quantized()) {
    RowToF32(static_cast<const char*>(w.data) + row * k * static_cast<int64_t>(w.elem_bytes()),
             w.dtype, k, out);
    return;
  }
  const int64_t groups = k / w.format.group_size;
  const uint8_t* packed = static_cast<const uint8_t*>(w.data) + row * (k / 2);
  const void* scales =
      static_cast<const char*>(w.scales) + row * groups * DTypeBits(w.format.scale) / 8;
  const uint8_t* zeros = w.zero_points != nullptr ? w.zero_points + row * groups : nullptr;
  if (!w.format.input_perm) {
    quant::DequantizeInt4Row(w.format, packed, scales, zeros, k, out);
    return;
  }
  // Act-ordered (GPTQ desc_act): the stored columns are a permutation of the inputs; scattering
  // them back gives the row in input order, so every op reading rows works unchanged.
  thread_local std::vector<float> stored;
  stored.resize(static_cast<size_t>(k));
  quant::DequantizeInt4Row(w.format, packed, scales, zeros, k, stored.data());
  const int32_t* perm = w.input_perm + static_cast<int64_t>(w.perm_index[row]) * k;
  for (int64_t j = 0; j < k; ++j) out[perm[j]] = stored[j];
}

absl::Status RequireReadableWeight(const Tensor& w, const char* what) {
  if (!w.quantized()) return absl::OkStatus();
  const WeightFormat& f = w.format;
  const bool int4 =
      (f.elem == DType::kI4 && !f.zero_point) || (f.elem == DType::kU4 && f.zero_point);
  if (!int4 || f.granularity != ScaleGranularity::kGroup || f.group_size <= 0 ||
      w.row_elems() % f.group_size != 0 || w.scales == nullptr ||
      (f.zero_point && w.zero_points == nullptr) || !w.contiguous() ||
      (f.input_perm && (w.input_perm == nullptr || w.perm_index == nullptr))) {
    return InvalidArgumentError(
        "cpu backend: {} has quantized format {} g{} (scales {}), which "
        "the CPU backend does not read",
        what, DTypeName(f.elem), f.group_size, DTypeName(f.scale));
  }
  return absl::OkStatus();
}

absl::Status RequireDenseWeight(const Tensor& w, const char* what) {
  if (!w.quantized()) return absl::OkStatus();
  return InvalidArgumentError(
      "cpu backend: {} is quantized ({} g{}); this op reads plain bf16, "
      "f16 or f32 tables only",
      what, DTypeShortName(w.format.elem), w.format.group_size);
}

}  // namespace cpu

absl::Status CpuBackend::Linear(Tensor x, Tensor w, Tensor out) {
  GANNET_RETURN_IF_ERROR(cpu::RequireF32(x, "Linear input"));
  GANNET_RETURN_IF_ERROR(cpu::RequireF32(out, "Linear output"));
  GANNET_RETURN_IF_ERROR(cpu::RequireReadableWeight(w, "Linear weight"));
  const int64_t m = x.rows();
  const int64_t k = x.row_elems();
  const int64_t n = w.dim(0);
  if (w.row_elems() != k || out.rows() != m || out.row_elems() != n) {
    return InvalidArgumentError("Linear: x [{}, {}] @ w^T [{}, {}] -> out [{}, {}] mismatch", m, k,
                                w.dim(0), w.row_elems(), out.rows(), out.row_elems());
  }
  if (m == 0) return absl::OkStatus();
  constexpr int64_t kRowsPerTask = 16;
  pool().ParallelFor((n + kRowsPerTask - 1) / kRowsPerTask, 1, [&](int64_t b, int64_t e) {
    std::vector<float> wrows(static_cast<size_t>(kRowsPerTask * k));
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t n0 = blk * kRowsPerTask;
      const int64_t n1 = std::min(n, n0 + kRowsPerTask);
      for (int64_t j = n0; j < n1; ++j) {
        cpu::WeightRowToF32(w, j, k, wrows.data() + (j - n0) * k);
      }
      for (int64_t i = 0; i < m; ++i) {
        const float* xi = x.as<float>() + i * x.stride0();
        float* oi = out.as<float>() + i * out.stride0();
        for (int64_t j = n0; j < n1; ++j) oi[j] = cpu::Dot(xi, wrows.data() + (j - n0) * k, k);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace gannet::backend
