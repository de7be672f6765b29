// config.json documents for the Gemma-4 family, at real size (for the synthetic "dummy" loader and
// benchmarks) and at tiny size (for the committed test checkpoints).
//
// Real sizes follow docs/gemma4-model.md §1.3/§1.4. Tiny sizes keep everything that changes the
// computation — real head dims (256 sliding / 512 full), GQA, K=V full layers, a 16-token sliding
// window, PLE, KV sharing, the double-wide MLP, MoE (8 experts, top-2), non-square hidden sizes
// (so the bf16-rounded embedding scale matters) — and shrink widths, depth and vocabulary so each
// checkpoint is a few MB.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/json.h"
#include "lib/model/config.h"

namespace gannet::model {

enum class VariantSize { kReal, kTiny };

// Names: "31b", "26b-a4b", "e4b", "e2b", and the drafters "31b-assistant", "26b-a4b-assistant",
// "e4b-assistant", "e2b-assistant".
std::vector<std::string> KnownVariantNames();
absl::StatusOr<Json> VariantConfig(std::string_view name, VariantSize size);

// What to call a checkpoint in messages and `gannet info`: the family member's name
// (VariantName) when its geometry is a released one (hidden size, layers, MLP width and
// vocabulary of the real sizes above), else "gemma4 custom (4 layers, hidden 192, 3.6M
// parameters; dense)". The Variant itself (chat template, drafter pairing) stays what the
// config's features say.
std::string ModelLabel(const ModelConfig& config);

// "dummy:<variant>" (e.g. "dummy:31b") names a known variant at real size with synthetic weights
// and no files: the engine's benchmark models.
inline constexpr std::string_view kDummyModelPrefix = "dummy:";
inline bool IsDummyModel(std::string_view model_dir) {
  return model_dir.substr(0, kDummyModelPrefix.size()) == kDummyModelPrefix;
}
// The config of a "dummy:<variant>" model; an unknown variant is an error naming it.
absl::StatusOr<ModelConfig> DummyModelConfig(std::string_view model_dir);
// The seed the engine generates dummy weights from (the same model in every process).
inline constexpr uint64_t kDummyWeightSeed = 0x9a77e7;

// Vocabulary size of the tiny checkpoints (the real one is 262144). Large enough for every
// Gemma-4 special token with an id below it, the 256 byte-fallback tokens and some merges.
inline constexpr int kTinyVocabSize = 512;

}  // namespace gannet::model
