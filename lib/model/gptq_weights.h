// Binding the weights of a GPTQ or AWQ checkpoint (config.gptq: lib/quant/gptq.h, awq.h), and
// assembling them in gannet's canonical int4 form once the checkpoint's bytes are read.
//
// A module `M` (of a `M.weight` in ExpectedWeights) is quantized when it holds `M.qweight`; it
// then holds exactly qweight, qzeros, scales (F16, BF16 or F32), g_idx (GPTQ only; optional
// without desc_act) and optionally an all-zero `bias`, each checked for dtype and shape, and no
// `M.weight`. Which modules a GPTQ/AWQ writer quantizes depends on its per-model module list, so
// the tensors say which modules are quantized, within what the config allows: a module that
// modules_to_not_convert or a `dynamic` "-:" pattern excludes, an embedding table, and the LM head
// (unless GPTQ's lm_head is true) must be plain. Per-expert MoE modules
// (`experts.{i}.{gate,up,down}_proj`, as GPTQModel writes Gemma-4's experts) are gathered into
// the fused [E, 2I, H] / [E, H, I] weights like compressed-tensors' (quantized_weights.h).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"

namespace gannet::model {

// The tensors a GPTQ/AWQ module holds beside (instead of) `.weight`.
inline constexpr std::string_view kZpInt4ModuleTensorSuffixes[] = {".qweight", ".qzeros", ".scales",
                                                                   ".g_idx", ".bias"};

// For a checkpoint with config.gptq: the view of spec `s` when it is quantized or gathered from
// per-expert modules (the names of every tensor it uses are added to `bound`); nullopt when `s`
// is one plain tensor, bound as in an unquantized checkpoint.
absl::StatusOr<std::optional<WeightView>> BindGptq(const ModelConfig& config,
                                                   const Checkpoint& checkpoint,
                                                   const WeightSpec& s,
                                                   std::set<std::string, std::less<>>* bound);

// The canonical bytes of a view bound by BindGptq (WriteCanonicalInt4 forwards here): packed,
// scales and zeros as WriteCanonicalInt4. With v.format.input_perm, the permutation of each of
// its pieces goes to perms[i * k ...] (i-th piece) and every row's table index, first_perm + i,
// to perm_index[row]. Errors name the module and tensor (lib/quant/gptq.h GptqToCanonical).
absl::Status WriteCanonicalZpInt4(const WeightView& v, uint8_t* packed, void* scales,
                                  uint8_t* zeros, int32_t* perms, int32_t* perm_index,
                                  int32_t first_perm);

}  // namespace gannet::model
