// GPTQ and AWQ int4 checkpoints (config.json `quantization_config` with quant_method "gptq" or
// "awq"): the strict config reader, which modules each quantizes, and the conversion of one
// module's packed tensors into gannet's canonical int4 form (lib/quant/int4.h). AWQ's own config
// reader and its nibble order are in awq.h; both families share the config struct here (they
// differ only in packing). docs/quantized-formats.md describes both formats as the code reads them.
//
// GPTQ (AutoGPTQ, GPTQModel, HF transformers/optimum), module weight [n, k]:
//   qweight int32 [k/8, n]   8 inputs per word, along the input dim: input k of output n is at
//                            bits 4*(k%8) of word (k/8, n)
//   qzeros  int32 [G, n/8]   8 outputs per word: group g of output n at bits 4*(n%8) of (g, n/8);
//                            checkpoint_format "gptq" (v1) stores zero - 1, "gptq_v2" the zero
//   scales  f16 [G, n]       G = k / group_size (1 for group_size -1)
//   g_idx   int32 [k]        the group of input k (desc_act: an act-order grouping)
//   value   (q - zero) * scale[g_idx[k], n]
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/dtype.h"
#include "lib/common/json.h"

namespace gannet::quant {

enum class ZpInt4Method : uint8_t { kGptq, kAwq };

// How one module is quantized (the config's values after `dynamic` overrides).
struct GptqModuleScheme {
  int group_size = 128;  // -1: one group per row (per channel)
  bool desc_act = false;
  bool sym = true;

  // The canonical format of a module of input width k whose scales are `scale_type`: kI4 when
  // symmetric (every zero point must then be 8), kU4 + zero points otherwise; act-ordered
  // (input_perm) with desc_act.
  WeightFormat Format(int64_t k, DType scale_type) const;
};

// GPTQModel's `dynamic`: a "-:" pattern excludes the modules it matches; any other pattern
// ("+:" or bare) overrides the listed fields for them. Patterns are Python re.match regexes
// of the full module name; the first matching rule wins.
struct GptqDynamicRule {
  bool exclude = false;
  std::string pattern;  // without the "-:" / "+:" prefix
  std::optional<int> group_size;
  std::optional<bool> desc_act, sym;
};

struct GptqConfig {
  ZpInt4Method method = ZpInt4Method::kGptq;
  GptqModuleScheme base;
  bool v1_zeros = true;  // GPTQ checkpoint_format "gptq": stored zero points are zero - 1
  bool lm_head = false;  // GPTQModel's lm_head: the LM head may be quantized too
  // transformers' modules_to_not_convert: a module whose full name contains one of these stays
  // plain.
  std::vector<std::string> modules_to_not_convert;
  std::vector<GptqDynamicRule> dynamic;

  std::string_view MethodName() const { return method == ZpInt4Method::kGptq ? "gptq" : "awq"; }
};

// Parses a quant_method "gptq" quantization_config; `source` prefixes errors. InvalidArgument for
// malformed values, Unimplemented for well-formed schemes gannet does not load (bits other than
// 4, another checkpoint_format, an unknown field).
absl::StatusOr<GptqConfig> ParseGptqConfig(const Json& q, std::string_view source);

// The fields GPTQ's and AWQ's configs share (both read into GptqConfig; `expected` ends their
// Unimplemented messages): `pack_dtype` must name int32 words; `modules_to_not_convert` is a list
// of non-empty names, appended to out->modules_to_not_convert. Absent or null: nothing to check.
absl::Status CheckPackDtype(const Json& q, std::string_view source, std::string_view expected);
absl::Status ParseModulesToNotConvert(const Json& q, std::string_view source, GptqConfig* out);

// The scheme of module `module_name`, or nullopt when modules_to_not_convert or a `dynamic`
// exclusion keeps it plain.
std::optional<GptqModuleScheme> GptqSchemeFor(const GptqConfig& config,
                                              std::string_view module_name);

// One module's tensors as the checkpoint holds them (little-endian words; pointers may be
// unaligned).
struct ZpInt4Module {
  std::string_view name;  // for errors
  int64_t n = 0, k = 0;   // the weight's [n, k]
  const void* qweight = nullptr;
  const void* qzeros = nullptr;
  const void* scales = nullptr;  // [G, n] of format.scale
  const void* g_idx = nullptr;   // GPTQ: int32 [k], or null (then the trivial k / group_size)
};

// GPTQ module -> canonical: packed [n, k/2], scales [n, G], zeros [n, G] (kU4 only), and, with
// f.input_perm, perm [k] (stored column j holds input perm[j]; the groups made contiguous by a
// stable sort of the inputs by g_idx). Errors name the module and tensor: a g_idx that is not the
// trivial k / group_size without desc_act, a g_idx group that is out of range or does not hold
// exactly group_size inputs, a v1 zero point of 16 (stored 15: unrepresentable), a zero point
// other than 8 in a symmetric (kI4) module, a non-finite scale.
absl::Status GptqToCanonical(const ZpInt4Module& m, const WeightFormat& f, bool v1_zeros,
                             uint8_t* packed, void* scales, uint8_t* zeros, int32_t* perm);

// Checks a module's bias (gannet's Gemma-4 has none, but GPTQ/AWQ writers may store zeros):
// `bias` [n] of `dtype` must be all zero.
absl::Status CheckZeroBias(std::string_view module, const void* bias, DType dtype, int64_t n);

// Transposes one [G, n] scale tensor to the canonical [n, G] (element size from `t`) and checks
// every scale is finite (DataLoss naming `module`).
absl::Status ScalesToCanonical(std::string_view module, const void* scales, DType t, int64_t groups,
                               int64_t n, void* out);

// Python re.match of `pattern` against `name` (bounded like compressed-tensors' regexes;
// ValidateModuleRegex has checked it).
bool ModuleRegexMatches(std::string_view name, const std::string& pattern);
// InvalidArgument (naming `where`) for a pattern too long, too deeply nested or not compilable.
absl::Status ValidateModuleRegex(const std::string& pattern, std::string_view where);

}  // namespace gannet::quant
