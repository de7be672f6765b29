// out = x @ w^T on the CPU: each task converts a block of weight rows to f32 once and reuses it
// for every input row, so bf16 weights are decoded (int4 and FP8 weights dequantized) once per
// call. FP8 schemes with activation quantization (W8A8) see x quantized to FP8 and back first, as
// compressed-tensors' forward does (docs/quantized-formats.md).
#include <algorithm>
#include <vector>

#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cpu/cpu_math.h"
#include "lib/quant/fp8.h"
#include "lib/quant/nvfp4.h"
#include "lib/quant/int4.h"

namespace gannet::backend {
namespace cpu {

void WeightRowToF32(const Tensor& w, int64_t row, int64_t k, float* out) {
  if (!w.quantized()) {
    ElementsToF32(static_cast<const char*>(w.data) + row * k * static_cast<int64_t>(w.elem_bytes()),
                  w.dtype, k, out);
    return;
  }
  if (w.format.elem == DType::kF4E2M1) {
    quant::DequantizeNvfp4Row(static_cast<const uint8_t*>(w.data) + row * (k / 2),
                              static_cast<const uint8_t*>(w.scales) + row * (k / 16),
                              w.global_scales[row], k, out);
    return;
  }
  if (w.format.elem == DType::kF8E4M3) {
    const int64_t per_row = quant::Fp8ScalesPerRow(w.format, k);
    quant::DequantizeFp8Row(w.format, static_cast<const uint8_t*>(w.data) + row * k,
                            static_cast<const float*>(w.scales) + row * per_row, k, out);
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

float InputScaleOf(const Tensor& w, int64_t row) {
  return w.format.act == ActivationQuant::kStaticFp8 ||
                 w.format.act == ActivationQuant::kDynamicNvfp4
             ? w.input_scales[row]
             : 0.f;
}

void QuantizeInput(const WeightFormat& f, float scale, const float* x, int64_t k, float* out) {
  if (f.act == ActivationQuant::kDynamicNvfp4) {
    quant::FakeQuantizeNvfp4Activations(scale, x, k, out);
  } else {
    quant::FakeQuantizeFp8Activations(f.act, f.act_group, scale, x, k, out);
  }
}

const float* ActivationRow::Get(const Tensor& w, int64_t row, const float* x, int64_t k) {
  const WeightFormat& f = w.format;
  if (f.act == ActivationQuant::kNone) return x;
  const float scale = InputScaleOf(w, row);
  if (!valid_ || x != x_ || scale != scale_) {
    buf_.resize(static_cast<size_t>(k));
    QuantizeInput(f, scale, x, k, buf_.data());
    valid_ = true;
    x_ = x;
    scale_ = scale;
  }
  return buf_.data();
}

absl::Status RequireReadableWeight(const Tensor& w, const char* what) {
  if (!w.quantized()) return absl::OkStatus();
  const WeightFormat& f = w.format;
  if (f.elem == DType::kF4E2M1) {
    // The in-memory NVFP4 form of lib/quant/nvfp4.h.
    const bool ok = f.granularity == ScaleGranularity::kGroup && f.group_size == 16 &&
                    f.scale == DType::kF8E4M3 && f.global_scale && !f.zero_point &&
                    w.row_elems() % 16 == 0 && w.scales != nullptr && w.global_scales != nullptr &&
                    (f.act == ActivationQuant::kNone ||
                     (f.act == ActivationQuant::kDynamicNvfp4 && w.input_scales != nullptr)) &&
                    w.contiguous();
    if (!ok) {
      return InvalidArgumentError(
          "cpu backend: {} has quantized format {}, which the CPU backend does not read", what,
          WeightFormatName(f));
    }
    return absl::OkStatus();
  }
  if (f.elem == DType::kF8E4M3) {
    // The in-memory FP8 forms of lib/quant/fp8.h.
    const bool ok =
        f.scale == DType::kF32 && !f.zero_point && !f.global_scale &&
        (f.granularity == ScaleGranularity::kChannel ||
         (f.granularity == ScaleGranularity::kBlock && f.block_rows == 1 && f.group_size > 0)) &&
        (f.act != ActivationQuant::kStaticFp8 || w.input_scales != nullptr) &&
        w.scales != nullptr && w.contiguous();
    if (!ok) {
      return InvalidArgumentError(
          "cpu backend: {} has quantized format {}, which the CPU backend "
          "does not read",
          what, WeightFormatName(f));
    }
    return absl::OkStatus();
  }
  const bool int4 =
      (f.elem == DType::kI4 && !f.zero_point) || (f.elem == DType::kU4 && f.zero_point);
  if (!int4 || f.granularity != ScaleGranularity::kGroup || f.group_size <= 0 ||
      w.row_elems() % f.group_size != 0 || w.scales == nullptr ||
      (f.zero_point && w.zero_points == nullptr) || !w.contiguous() ||
      (f.input_perm && (w.input_perm == nullptr || w.perm_index == nullptr))) {
    return InvalidArgumentError(
        "cpu backend: {} has quantized format {}, which the CPU backend does not read", what,
        WeightFormatName(f));
  }
  return absl::OkStatus();
}

absl::Status RequireDenseWeight(const Tensor& w, const char* what) {
  if (!w.quantized()) return absl::OkStatus();
  return InvalidArgumentError(
      "cpu backend: {} is quantized ({}); this op reads plain bf16, f16 or f32 tables only", what,
      WeightFormatName(w.format));
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
  // A W8A8 scheme's inputs, FP8-quantized as its forward does (lib/quant/fp8.h) once per distinct
  // scale: dynamic scales are the rows' own, static ones per module (a fused weight may hold
  // several). `xq[s]` is x quantized with scale `act_scales[s]`.
  std::vector<float> act_scales;
  std::vector<std::vector<float>> xq;
  if (w.format.act != ActivationQuant::kNone) {
    for (int64_t j = 0; j < n; ++j) {
      const float s = cpu::InputScaleOf(w, j);
      if (std::find(act_scales.begin(), act_scales.end(), s) != act_scales.end()) continue;
      act_scales.push_back(s);
      std::vector<float>& q = xq.emplace_back(static_cast<size_t>(m * k));
      for (int64_t i = 0; i < m; ++i) {
        cpu::QuantizeInput(w.format, s, x.as<float>() + i * x.stride0(), k, q.data() + i * k);
      }
    }
  }
  auto input_row = [&](int64_t i, int64_t j) -> const float* {
    if (act_scales.empty()) return x.as<float>() + i * x.stride0();
    const float s = cpu::InputScaleOf(w, j);
    const size_t at = static_cast<size_t>(std::find(act_scales.begin(), act_scales.end(), s) -
                                          act_scales.begin());
    return xq[at].data() + i * k;
  };
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
        float* oi = out.as<float>() + i * out.stride0();
        for (int64_t j = n0; j < n1; ++j) {
          oi[j] = cpu::Dot(input_row(i, j), wrows.data() + (j - n0) * k, k);
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace gannet::backend
