// The one element-type enum of gannet: checkpoint tensors, device buffers, kernel arguments and
// kernel problem keys all name their element type with DType, and a quantized weight's storage
// with a WeightFormat (an element type plus its scales). Plain C++ (no CUDA, no lib/), so
// kernels/, the lowest layer, and everything above it include this one header.
//
// A value here means gannet knows the format's traits (bits, packing, name), not that any path
// computes with it: each consumer states what it supports and refuses the rest with an error
// naming the type (the loader: WeightFormatIsLoadable, lib/common/dtype.h; kernels: the
// registry's predicates, kernels/registry/registry.h; the backends' argument checks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gannet {

enum class DType : uint8_t {
  kBool,
  kU8,
  kI8,
  kU16,
  kI16,
  kU32,
  kI32,
  kU64,
  kI64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kF8E4M3,  // OCP FP8 E4M3 (largest finite 448): FP8 KV rows, FP8 weights, NVFP4 group scales
  kF8E5M2,
  kF8E8M0,  // exponent-only scale (MX formats)
  kF6E2M3,
  kF6E3M2,
  kF4E2M1,  // FP4 E2M1, two per byte (low nibble first); NVFP4 weights (WeightFormat::Nvfp4)
  kI4,      // signed int4, two per byte (low nibble first); symmetric W4A16 weights
  kU4,      // unsigned int4 (zero-point formats: GPTQ, AWQ, asymmetric compressed-tensors)
  kCount,
};

namespace dtype_internal {
struct Traits {
  DType type;
  std::string_view name;        // the safetensors spelling, or gannet's for types it lacks
  std::string_view short_name;  // the spelling of logs and kernel-selection strings
  int bits;
  bool safetensors;  // a dtype a safetensors header may declare
};
inline constexpr Traits kTraits[] = {
    {DType::kBool, "BOOL", "bool", 8, true},
    {DType::kU8, "U8", "u8", 8, true},
    {DType::kI8, "I8", "i8", 8, true},
    {DType::kU16, "U16", "u16", 16, true},
    {DType::kI16, "I16", "i16", 16, true},
    {DType::kU32, "U32", "u32", 32, true},
    {DType::kI32, "I32", "i32", 32, true},
    {DType::kU64, "U64", "u64", 64, true},
    {DType::kI64, "I64", "i64", 64, true},
    {DType::kF16, "F16", "f16", 16, true},
    {DType::kBF16, "BF16", "bf16", 16, true},
    {DType::kF32, "F32", "f32", 32, true},
    {DType::kF64, "F64", "f64", 64, true},
    {DType::kF8E4M3, "F8_E4M3", "fp8e4m3", 8, true},
    {DType::kF8E5M2, "F8_E5M2", "fp8e5m2", 8, true},
    {DType::kF8E8M0, "F8_E8M0", "fp8e8m0", 8, true},
    {DType::kF6E2M3, "F6_E2M3", "fp6e2m3", 6, true},
    {DType::kF6E3M2, "F6_E3M2", "fp6e3m2", 6, true},
    {DType::kF4E2M1, "F4", "fp4e2m1", 4, true},
    // Packed int4 has no safetensors dtype: checkpoints store it in I32 or U8 words.
    {DType::kI4, "I4", "int4", 4, false},
    {DType::kU4, "U4", "uint4", 4, false},
};
static_assert(sizeof(kTraits) / sizeof(kTraits[0]) == static_cast<size_t>(DType::kCount),
              "one row per DType");

constexpr const Traits& Of(DType t) {
  // Rows are in enum order (checked below), so the value indexes its row.
  return kTraits[static_cast<size_t>(t) < static_cast<size_t>(DType::kCount)
                     ? static_cast<size_t>(t)
                     : 0];
}
constexpr bool RowsInEnumOrder() {
  for (size_t i = 0; i < sizeof(kTraits) / sizeof(kTraits[0]); ++i) {
    if (static_cast<size_t>(kTraits[i].type) != i) return false;
  }
  return true;
}
static_assert(RowsInEnumOrder());
}  // namespace dtype_internal

// The safetensors spelling ("BF16", "F8_E4M3"; "I4"/"U4" for the packed ints, which it lacks).
constexpr std::string_view DTypeName(DType t) {
  return t < DType::kCount ? dtype_internal::Of(t).name : "?";
}
// The short spelling of logs and kernel selection ("bf16", "fp8e4m3", "int4").
constexpr std::string_view DTypeShortName(DType t) {
  return t < DType::kCount ? dtype_internal::Of(t).short_name : "?";
}
// Size in bits of one element (4 and 6 for the packed sub-byte formats).
constexpr int DTypeBits(DType t) { return t < DType::kCount ? dtype_internal::Of(t).bits : 0; }
// Elements sharing a byte: 2 for the 4-bit types, 1 for byte-sized and wider ones (the 6-bit
// types pack 4 into 3 bytes and report 0: no per-byte packing).
constexpr int DTypeElemsPerByte(DType t) {
  const int bits = DTypeBits(t);
  return bits == 4 ? 2 : bits % 8 == 0 && bits > 0 ? 1 : 0;
}
// Bytes of `n` elements; n must fill whole bytes (an even count of 4-bit elements).
constexpr int64_t DTypeBytes(DType t, int64_t n) { return n * DTypeBits(t) / 8; }

// The type a safetensors header names ("BF16", "F8_E4M3", ...); nullopt for unknown names (and
// for I4/U4, which safetensors does not declare).
constexpr std::optional<DType> DTypeFromSafetensorsName(std::string_view name) {
  for (const auto& row : dtype_internal::kTraits) {
    if (row.safetensors && row.name == name) return row.type;
  }
  return std::nullopt;
}

// How a weight's elements map to values: the storage element type and, for quantized formats,
// the scales. value = element * scale (minus the zero point, when there is one), with one scale
// per `group_size` consecutive input elements of an output row (kGroup), per block of
// `block_rows` x `group_size` (kBlock), per output row (kChannel) or per tensor (kTensor).
// Issue 53's formats are values of this struct, not new types:
//   int4 W4A16 g32/64/128   {kI4, kGroup, 32|64|128, kBF16}   (AWQ/GPTQ: kU4 + zero_point)
//   FP8 channel / tensor    {kF8E4M3, kChannel|kTensor, 0, kF32}
//   FP8 128x128 blocks      {kF8E4M3, kBlock, 128, kF32, block_rows 128}
//   NVFP4                   {kF4E2M1, kGroup, 16, kF8E4M3, global_scale}
// A block of `block_rows` 1 is one scale per row per `group_size` inputs where the last group of a
// row may be shorter (the CPU backend's in-memory form of 128x128 FP8 blocks).
enum class ScaleGranularity : uint8_t { kNone, kTensor, kChannel, kGroup, kBlock };

// What the checkpoint's scheme does to a quantized linear layer's input (W8A8 schemes): nothing
// (weight-only), or quantize it to FP8 E4M3 before the product, with scales computed per token
// (or per `act_group` inputs of a token) from the row's amax (kDynamicFp8), or one f32 scale
// stored with the weight (kStaticFp8: compressed-tensors' input_scale), or quantize it to FP4
// E2M1 per `act_group` (16) inputs with FP8 scales computed from the group's amax under a static
// f32 global scale stored with the weight (kDynamicNvfp4: NVFP4 W4A4's input_global_scale).
enum class ActivationQuant : uint8_t { kNone, kDynamicFp8, kStaticFp8, kDynamicNvfp4 };

struct WeightFormat {
  DType elem = DType::kBF16;
  ScaleGranularity granularity = ScaleGranularity::kNone;
  int group_size = 0;         // kGroup / kBlock: input elements per scale
  DType scale = DType::kF32;  // the scales' element type (unused with kNone)
  int block_rows = 0;         // kBlock: output rows per scale
  bool zero_point = false;    // asymmetric: a zero point per scale (unsigned elements)
  bool global_scale = false;  // an f32 per-tensor scale on top of the others (NVFP4)
  // GPTQ act-order (desc_act): a row's stored columns are a permutation of the inputs, so that
  // each group is contiguous; stored column j holds input perm[j], and the weight carries an
  // int32 permutation of k per source module (backend::Tensor::input_perm):
  // y = sum_j w[j] * x[perm[j]].
  bool input_perm = false;
  ActivationQuant act = ActivationQuant::kNone;  // what happens to the input (above)
  int act_group = 0;  // inputs per activation scale; 0 = the whole row (per token)

  static constexpr WeightFormat Dense(DType t) { return WeightFormat{t}; }
  static constexpr WeightFormat Int4(int group, DType scale_type = DType::kBF16) {
    return WeightFormat{DType::kI4, ScaleGranularity::kGroup, group, scale_type};
  }
  static constexpr WeightFormat Fp8Channel() {
    return WeightFormat{DType::kF8E4M3, ScaleGranularity::kChannel, 0, DType::kF32};
  }
  static constexpr WeightFormat Fp8Tensor() {
    return WeightFormat{DType::kF8E4M3, ScaleGranularity::kTensor, 0, DType::kF32};
  }
  static constexpr WeightFormat Fp8Block(int rows = 128, int cols = 128) {
    return WeightFormat{DType::kF8E4M3, ScaleGranularity::kBlock, cols, DType::kF32, rows};
  }
  static constexpr WeightFormat Nvfp4() {
    return WeightFormat{
        DType::kF4E2M1, ScaleGranularity::kGroup, 16, DType::kF8E4M3, 0, false, true};
  }
  constexpr bool quantized() const { return granularity != ScaleGranularity::kNone; }
  constexpr bool operator==(const WeightFormat&) const = default;
};

// nullptr when `f` is self-consistent, else what is wrong (for the caller's error): a scaled
// format needs a scale type of at least 8 bits, kGroup/kBlock a positive group size (an even one
// for 4-bit elements), kBlock positive block rows, a zero point unsigned elements, and unscaled
// formats none of these.
constexpr const char* WeightFormatError(const WeightFormat& f) {
  if (f.elem >= DType::kCount) return "unknown element type";
  const bool grouped =
      f.granularity == ScaleGranularity::kGroup || f.granularity == ScaleGranularity::kBlock;
  if (f.act_group < 0 || (f.act_group != 0 && f.act != ActivationQuant::kDynamicFp8 &&
                          f.act != ActivationQuant::kDynamicNvfp4)) {
    return "an activation group size goes with (and only with) dynamic activation scales";
  }
  if (!f.quantized()) {
    if (f.group_size != 0 || f.block_rows != 0 || f.zero_point || f.global_scale || f.input_perm ||
        f.act != ActivationQuant::kNone) {
      return "an unscaled format has no group size, block, zero point, global scale, input "
             "permutation or activation quantization";
    }
    return nullptr;
  }
  if (f.scale >= DType::kCount || DTypeBits(f.scale) < 8) return "scales must be 8 bits or wider";
  if (grouped && f.group_size <= 0) return "a grouped format needs a positive group size";
  if (grouped && DTypeElemsPerByte(f.elem) == 2 && f.group_size % 2 != 0) {
    return "a group of 4-bit elements must fill whole bytes (even group size)";
  }
  if (!grouped && f.group_size != 0) return "only grouped formats have a group size";
  if ((f.granularity == ScaleGranularity::kBlock) != (f.block_rows > 0)) {
    return "block rows go with (and only with) block scales";
  }
  if (f.zero_point && f.elem != DType::kU4 && f.elem != DType::kU8) {
    return "a zero point needs unsigned elements";
  }
  if (f.input_perm && f.granularity != ScaleGranularity::kGroup) {
    return "an input permutation goes with (act-ordered) group scales";
  }
  return nullptr;
}

}  // namespace gannet
