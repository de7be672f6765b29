#include "lib/backend/cpu/cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "lib/backend/cpu/cpu_math.h"
#include "lib/common/host_memory.h"
#include "lib/common/status.h"
#include "lib/model/quantized_weights.h"
#include "lib/model/synthetic.h"
#include "lib/quant/fp8.h"

namespace gannet::backend {
namespace cpu {

float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace cpu

CpuBackend::CpuBackend(ThreadPool* pool) : pool_(pool ? pool : &DefaultThreadPool()) {}

std::string CpuBackend::DeviceName() const {
  return fmt::format("{} threads", pool_->num_threads());
}

int64_t CpuBackend::TotalMemoryBytes() const { return HostTotalMemoryBytes(); }

// MemAvailable counts reclaimable page cache as available, as it is.
int64_t CpuBackend::FreeMemoryBytes() const { return HostAvailableMemoryBytes(); }

absl::StatusOr<Buffer> CpuBackend::Allocate(size_t bytes) {
  // 64-byte alignment keeps rows vector-friendly; zero-byte requests still get a valid pointer.
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (p == nullptr) return ResourceExhaustedError("cpu backend: cannot allocate {} bytes", bytes);
  return Buffer(p, bytes, [](void* q) { std::free(q); });
}

absl::StatusOr<Buffer> CpuBackend::AllocateZeroed(size_t bytes) {
  // calloc hands out lazily zeroed pages for large blocks: a big KV pool costs nothing until used.
  void* p = std::calloc(bytes ? bytes : 1, 1);
  if (p == nullptr) return ResourceExhaustedError("cpu backend: cannot allocate {} bytes", bytes);
  return Buffer(p, bytes, [](void* q) { std::free(q); });
}

absl::Status CpuBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status CpuBackend::Fill(Tensor t, float value) {
  if (t.dtype == DType::kF32) {
    for (int64_t r = 0; r < t.rows(); ++r) {
      float* row = t.as<float>() + r * t.stride0();
      for (int64_t i = 0; i < t.row_elems(); ++i) row[i] = value;
    }
    return absl::OkStatus();
  }
  if (t.dtype == DType::kI32) {
    for (int64_t i = 0; i < t.numel(); ++i) t.as<int32_t>()[i] = static_cast<int32_t>(value);
    return absl::OkStatus();
  }
  return InvalidArgumentError("cpu backend: Fill supports f32 and i32, got {}", DTypeName(t.dtype));
}

absl::StatusOr<OwnedTensor> CpuBackend::LoadWeight(
    std::span<const model::WeightView* const> parts) {
  if (parts.empty()) return InvalidArgumentError("LoadWeight: no parts");
  const model::WeightView& first = *parts[0];
  int64_t rows = 0;
  for (const model::WeightView* p : parts) {
    if (!p->present()) return InvalidArgumentError("LoadWeight: tensor '{}' is absent", p->name);
    if (p->shape.size() != first.shape.size() ||
        !std::equal(p->shape.begin() + 1, p->shape.end(), first.shape.begin() + 1)) {
      return InvalidArgumentError("LoadWeight: '{}' and '{}' cannot be concatenated", first.name,
                                  p->name);
    }
    rows += p->shape[0];
  }
  auto make_tensor = [&](void* data, DType dt) {
    Tensor t;
    t.data = data;
    t.dtype = dt;
    t.rank = static_cast<int>(first.shape.size());
    for (int i = 0; i < t.rank; ++i) t.shape[i] = first.shape[i];
    t.shape[0] = rows;
    return t;
  };
  if (first.quantized() && first.format.elem == DType::kF4E2M1) {
    // NVFP4 in memory (lib/quant/nvfp4.h): packed bytes, FP8 scales, f32 global and input
    // global scales per row.
    for (const model::WeightView* p : parts) {
      if (!(p->format == first.format) || p->pieces.empty()) {
        return InvalidArgumentError(
            "LoadWeight: '{}' ({}) and '{}' ({}) cannot be concatenated: fused weights need one "
            "quantized format",
            first.name, WeightFormatName(first.format), p->name, WeightFormatName(p->format));
      }
    }
    const int64_t k = first.shape.back();
    int64_t numel = 0;
    for (const model::WeightView* p : parts) numel += p->numel();
    const int64_t total_rows = numel / k;
    const size_t packed_bytes = (static_cast<size_t>(numel / 2) + 15) / 16 * 16;
    const size_t scale_bytes = (static_cast<size_t>(numel / 16) + 15) / 16 * 16;
    const bool act = first.format.act == ActivationQuant::kDynamicNvfp4;
    GANNET_ASSIGN_OR_RETURN(
        Buffer buf,
        Allocate(packed_bytes + scale_bytes + static_cast<size_t>(total_rows) * 4 * (act ? 2 : 1)));
    uint8_t* packed = static_cast<uint8_t*>(buf.data());
    uint8_t* scales = packed + packed_bytes;
    float* globals = reinterpret_cast<float*>(scales + scale_bytes);
    float* inputs = act ? globals + total_rows : nullptr;
    int64_t row = 0;
    for (const model::WeightView* p : parts) {
      GANNET_RETURN_IF_ERROR(
          model::WriteCanonicalNvfp4(*p, packed + row * (k / 2), scales + row * (k / 16),
                                     globals + row, inputs != nullptr ? inputs + row : nullptr));
      row += p->numel() / k;
    }
    Tensor t = make_tensor(packed, DType::kF4E2M1);
    t.format = first.format;
    t.scales = scales;
    t.global_scales = globals;
    t.input_scales = inputs;
    return OwnedTensor{std::move(buf), t};
  }
  if (first.quantized() && first.format.elem == DType::kF8E4M3) {
    // FP8 in its in-memory form (lib/quant/fp8.h): elements, then f32 scales, then input scales.
    for (const model::WeightView* p : parts) {
      if (!(p->format == first.format) || p->pieces.empty()) {
        return InvalidArgumentError(
            "LoadWeight: '{}' ({}) and '{}' ({}) cannot be concatenated: fused weights need one "
            "quantized format",
            first.name, WeightFormatName(first.format), p->name, WeightFormatName(p->format));
      }
    }
    const WeightFormat mem = quant::Fp8InMemoryFormat(first.format);
    const int64_t k = first.shape.back();
    const int64_t per_row = quant::Fp8ScalesPerRow(mem, k);
    int64_t numel = 0;
    for (const model::WeightView* p : parts) numel += p->numel();
    const int64_t total_rows = numel / k;
    const size_t elem_bytes = (static_cast<size_t>(numel) + 15) / 16 * 16;
    const size_t scale_bytes = static_cast<size_t>(total_rows * per_row) * 4;
    const bool static_act = mem.act == ActivationQuant::kStaticFp8;
    GANNET_ASSIGN_OR_RETURN(Buffer buf,
                            Allocate(elem_bytes + scale_bytes +
                                     (static_act ? static_cast<size_t>(total_rows) * 4 : 0)));
    uint8_t* elems = static_cast<uint8_t*>(buf.data());
    float* scales = reinterpret_cast<float*>(elems + elem_bytes);
    float* inputs = static_act ? scales + total_rows * per_row : nullptr;
    int64_t row = 0;
    for (const model::WeightView* p : parts) {
      GANNET_RETURN_IF_ERROR(model::WriteCanonicalFp8(*p, elems + row * k, scales + row * per_row,
                                                      inputs != nullptr ? inputs + row : nullptr));
      row += p->numel() / k;
    }
    Tensor t = make_tensor(elems, DType::kF8E4M3);
    t.format = mem;
    t.scales = scales;
    t.input_scales = inputs;
    return OwnedTensor{std::move(buf), t};
  }
  if (first.quantized()) {
    // int4 in the canonical form (lib/quant/int4.h): one buffer of packed bytes, then scales,
    // then zero points; the parts' rows one after the other in each.
    for (const model::WeightView* p : parts) {
      if (!(p->format == first.format) || (p->pieces.empty() && !p->quantize_at_load())) {
        return InvalidArgumentError(
            "LoadWeight: '{}' ({} g{}) and '{}' ({} g{}) cannot be "
            "concatenated: fused weights need one quantized format",
            first.name, DTypeShortName(first.format.elem), first.format.group_size, p->name,
            DTypeShortName(p->format.elem), p->format.group_size);
      }
    }
    const int64_t k = first.shape.back();
    int64_t numel = 0;
    for (const model::WeightView* p : parts) numel += p->numel();
    const int64_t groups = numel / first.format.group_size;
    const size_t packed_bytes = (static_cast<size_t>(numel / 2) + 15) / 16 * 16;
    const size_t scale_bytes =
        (static_cast<size_t>(groups) * DTypeBits(first.format.scale) / 8 + 15) / 16 * 16;
    const size_t zero_bytes =
        first.format.zero_point ? (static_cast<size_t>(groups) + 15) / 16 * 16 : 0;
    // Act-ordered (GPTQ desc_act): a permutation of k per source module and a table index per
    // row (Tensor::input_perm).
    int64_t perm_count = 0;
    if (first.format.input_perm) {
      for (const model::WeightView* p : parts) perm_count += static_cast<int64_t>(p->pieces.size());
    }
    // numel / k: the matrix rows (a 3-D expert weight [E, R, k] has E * R of them).
    const size_t perm_bytes =
        first.format.input_perm ? static_cast<size_t>(perm_count * k + numel / k) * sizeof(int32_t)
                                : 0;
    GANNET_ASSIGN_OR_RETURN(Buffer buf,
                            Allocate(packed_bytes + scale_bytes + zero_bytes + perm_bytes));
    uint8_t* packed = static_cast<uint8_t*>(buf.data());
    uint8_t* scales = packed + packed_bytes;
    uint8_t* zeros = first.format.zero_point ? scales + scale_bytes : nullptr;
    int32_t* perms = first.format.input_perm
                         ? reinterpret_cast<int32_t*>(scales + scale_bytes + zero_bytes)
                         : nullptr;
    int32_t* perm_index = perms != nullptr ? perms + perm_count * k : nullptr;
    int64_t row = 0;
    int32_t first_perm = 0;
    for (const model::WeightView* p : parts) {
      const int64_t prow = p->numel() / k;
      GANNET_RETURN_IF_ERROR(model::WriteCanonicalInt4(
          *p, packed + row * (k / 2),
          scales + row * (k / first.format.group_size) * DTypeBits(first.format.scale) / 8,
          zeros != nullptr ? zeros + row * (k / first.format.group_size) : nullptr,
          perms != nullptr ? perms + static_cast<int64_t>(first_perm) * k : nullptr,
          perm_index != nullptr ? perm_index + row : nullptr, first_perm));
      row += prow;
      if (perms != nullptr) first_perm += static_cast<int32_t>(p->pieces.size());
    }
    Tensor t = make_tensor(packed, first.format.elem);
    t.format = first.format;
    t.scales = scales;
    t.zero_points = zeros;
    t.input_perm = perms;
    t.perm_index = perm_index;
    return OwnedTensor{std::move(buf), t};
  }
  for (const model::WeightView* p : parts) {
    if (p->quantized()) {
      return InvalidArgumentError(
          "LoadWeight: '{}' is plain but '{}' is quantized: fused weights "
          "need one format",
          first.name, p->name);
    }
  }
  // Vectors (norm weights, scales) become f32 copies so ops read them directly; matrices stay in
  // their checkpoint type and are read in place when no concatenation is needed and they start
  // at a multiple of their element size (the format does not promise it: else a copy).
  bool is_vector = first.shape.size() <= 1;
  bool same_type = true;
  for (const model::WeightView* p : parts) same_type &= p->dtype == first.dtype;
  const bool aligned =
      reinterpret_cast<uintptr_t>(first.data) % std::max(1, DTypeBits(first.dtype) / 8) == 0;
  if (!is_vector && parts.size() == 1 && !first.synthetic && first.pieces.empty() && aligned &&
      (first.dtype == DType::kBF16 || first.dtype == DType::kF32)) {
    return OwnedTensor{Buffer(), make_tensor(const_cast<void*>(first.data), first.dtype)};
  }
  DType out_type =
      (!is_vector && same_type && first.dtype == DType::kBF16) ? DType::kBF16 : DType::kF32;
  int64_t total = 0;
  for (const model::WeightView* p : parts) total += p->numel();
  GANNET_ASSIGN_OR_RETURN(Buffer buf,
                          Allocate(static_cast<size_t>(total) * DTypeBits(out_type) / 8));
  char* dst = static_cast<char*>(buf.data());
  std::vector<uint16_t> generated;
  for (const model::WeightView* p : parts) {
    const void* src = p->data;
    if (p->synthetic) {
      if (p->dtype != DType::kBF16) {
        return InvalidArgumentError("LoadWeight: synthetic '{}' must be bf16", p->name);
      }
      generated.resize(p->numel());
      model::FillSyntheticBf16(p->name, p->init, p->shape.back(), p->seed, 0, p->numel(),
                               generated.data());
      src = generated.data();
    }
    if (!p->pieces.empty()) {  // gathered from per-expert modules
      GANNET_RETURN_IF_ERROR(model::WriteGatheredDense(*p, out_type, dst));
      dst += p->numel() * DTypeBits(out_type) / 8;
    } else if (out_type == DType::kBF16) {
      std::memcpy(dst, src, p->nbytes());
      dst += p->nbytes();
    } else {
      ElementsToF32(src, p->dtype, p->numel(), reinterpret_cast<float*>(dst));
      dst += p->numel() * 4;
    }
  }
  Tensor t = make_tensor(buf.data(), out_type);
  return OwnedTensor{std::move(buf), t};
}

}  // namespace gannet::backend
