// Binding the weights of a compressed-tensors checkpoint (pack-quantized int4, float-quantized
// FP8), and assembling them in their in-memory form (lib/quant/int4.h, lib/quant/fp8.h) once the
// checkpoint's bytes are read.
//
// A module (`<name>` of a `<name>.weight` in ExpectedWeights) that quantization_config quantizes
// (a config group targets it by class or name and `ignore` does not name it) must hold exactly
// weight_packed (I32 [n, ceil(k/8)]), weight_shape (I64/I32 [2] = [n, k]), weight_scale
// (BF16/F16/F32 [n, k/group] or [n, 1] per channel) and, asymmetric only, weight_zero_point (I32
// [ceil(n/8), k/group]); an FP8 one `.weight` (F8_E4M3 [n, k]), `.weight_scale` ([n, 1] channel,
// [1] tensor, [ceil(n/128), ceil(k/128)] blocks) and, with static activations, `.input_scale`;
// one it does not quantize holds the plain `.weight`. Anything else is an
// error naming the module, the tensor and what was expected. Classes as compressed-tensors sees
// Gemma-4's modules: the token embeddings are `Embedding`, every other matrix `Linear`, the fused
// 3-D expert parameters belong to `Gemma4TextExperts` (compressed-tensors quantizes only Linear
// and Embedding modules, so it never quantizes them: quantized MoE checkpoints hold per-expert
// `experts.{i}.{gate,up,down}_proj` Linear modules, which are gathered into the fused
// [E, 2I, H] / [E, H, I] weights, plain or quantized).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"

namespace gannet::model {

// The tensors a compressed-tensors module may hold beside (instead of) `.weight`.
inline constexpr std::string_view kCtModuleTensorSuffixes[] = {
    ".weight_packed", ".weight_scale",        ".weight_shape",       ".weight_zero_point",
    ".input_scale",   ".weight_global_scale", ".input_global_scale", ".weight_scale_2"};

// For a checkpoint with config.compressed_tensors: the view of spec `s` when it is quantized or
// gathered from per-expert modules (the names of every tensor it uses are added to `bound`);
// nullopt when `s` is one plain tensor, bound as in an unquantized checkpoint.
absl::StatusOr<std::optional<WeightView>> BindCompressedTensors(
    const ModelConfig& config, const Checkpoint& checkpoint, const WeightSpec& s,
    std::set<std::string, std::less<>>* bound);

// Shared by the quantized formats' binders (this file's and gptq_weights.h): a fused expert spec
// (26B-A4B's experts_gate_up / experts_down) comes from the fused 3-D tensor itself (bound plain:
// quantizers pack Linear modules, never that parameter) or from per-expert modules
// `{i}.gate_proj` and `{i}.up_proj` ([I, k] each) or `{i}.down_proj`. ExpertModules lists those
// modules in the fused row order with their rows, or none for the fused tensor; a module counts as
// present by its `.weight` or its format's `packed_suffix` tensor; neither or both is an error.
bool IsFusedExperts(const WeightSpec& s);
absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ExpertModules(
    const Checkpoint& ckpt, const WeightSpec& s, std::string_view packed_suffix);
// The view of spec `s` gathered from `pieces` (each [rows_i, k], in row order), all of one format
// (`formats`, one per piece): UNIMPLEMENTED naming two modules whose formats differ.
absl::StatusOr<WeightView> GatherModules(const Checkpoint& ckpt, const WeightSpec& s,
                                         std::vector<WeightPiece> pieces,
                                         const std::vector<WeightFormat>& formats);

// A quantized view's canonical bytes: packed [rows, k/2], scales [rows, k/group] of
// v.format.scale, zeros [rows, k/group] (kU4 only; else unused), rows = numel / k. DataLoss when
// a scale is not finite (names the module). The checkpoint's data must have been read.
// GPTQ / AWQ views (gptq_weights.h) are converted there; an act-ordered one (format.input_perm)
// also writes its permutations and row indices (WriteCanonicalZpInt4's perms, perm_index,
// first_perm), which other views leave alone.
absl::Status WriteCanonicalInt4(const WeightView& v, uint8_t* packed, void* scales, uint8_t* zeros,
                                int32_t* perms = nullptr, int32_t* perm_index = nullptr,
                                int32_t first_perm = 0);
// An FP8 view's in-memory bytes (lib/quant/fp8.h): elements [rows, k], f32 scales
// [rows, Fp8ScalesPerRow], input_scales [rows] (static activations only; else unused). DataLoss
// when an element is NaN or a scale is not finite (an input scale also not positive).
absl::Status WriteCanonicalFp8(const WeightView& v, uint8_t* elems, float* scales,
                               float* input_scales);
// An NVFP4 view's in-memory bytes (lib/quant/nvfp4.h): packed [rows, k/2], FP8 scales
// [rows, k/16], f32 globals [rows] and, with FP4 activations, input_globals [rows]. DataLoss for
// a NaN group scale or a global scale that is not finite and positive.
absl::Status WriteCanonicalNvfp4(const WeightView& v, uint8_t* packed, uint8_t* scales,
                                 float* globals, float* input_globals);
// A plain view gathered from pieces (per-expert matrices), converted to f32 or copied as bf16
// (`out_type`, kF32 or the pieces' own kBF16).
absl::Status WriteGatheredDense(const WeightView& v, DType out_type, void* out);

}  // namespace gannet::model
