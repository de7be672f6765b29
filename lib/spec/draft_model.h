// Speculative decoding's setup, as the engine asks for it: the MTP assistant (drafter) checked
// against its target and loaded, then the drafter and its SpecDecoder built over the target's
// runner. The engine only maps its config onto these calls (lib/engine/model_setup.cc).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"
#include "lib/runner/model_runner.h"
#include "lib/spec/spec_decoder.h"

namespace gannet::spec {

// Drafts per round when none is asked for (EngineConfig::num_speculative_tokens 0).
inline constexpr int kDefaultSpeculativeTokens = 3;

// The drafts per round of a requested count (0 = kDefaultSpeculativeTokens); InvalidArgument
// when a count is asked for without a draft model, or is outside 1..kMaxSpeculativeTokens.
absl::StatusOr<int> ResolveSpeculativeTokens(int requested, bool has_draft_model);

// A loaded assistant. Its files (checkpoint) outlive its weights, which may point into them.
struct DraftModel {
  model::ModelConfig config;
  std::unique_ptr<model::Checkpoint> checkpoint;  // null for synthetic weights
  model::ModelWeights weights;
};

// The MTP assistant in `dir` (or "dummy:<variant>-assistant"; `dummy_weights`: synthetic weights
// for a real config), its config checked against `target` (read from `target_dir`) before any
// weight loads. InvalidArgument naming both when it is not an assistant or cannot draft for it.
absl::StatusOr<DraftModel> LoadDraftModel(const std::string& dir, bool dummy_weights,
                                          const model::ModelConfig& target,
                                          const std::string& target_dir);

struct SpecSetup {
  int num_speculative_tokens = kDefaultSpeculativeTokens;  // resolved: 1..kMaxSpeculativeTokens
  int max_seqs = 16;                                       // requests per round
  bool enable_graphs = false;                              // the drafter's CUDA graphs
  DraftOverride override_drafts;                           // tests and benchmarks only
};

// The drafter's limits for `setup`.
DrafterOptions DrafterOptionsFor(const SpecSetup& setup);

// The drafter of `draft` over `target_runner` (one device: its KV and hidden states) and the
// SpecDecoder that runs it. Its weights and scratch come out of the device's memory: build it
// before the KV cache is sized.
absl::StatusOr<std::unique_ptr<SpecDecoder>> CreateSpecDecoder(const DraftModel& draft,
                                                               const model::ModelConfig& target,
                                                               runner::ModelRunner* target_runner,
                                                               backend::Backend* backend,
                                                               const SpecSetup& setup);
// The SpecDecoder over a drafter made elsewhere (a tensor-parallel group's, made with
// DrafterOptionsFor(setup)).
absl::StatusOr<std::unique_ptr<SpecDecoder>> CreateSpecDecoder(std::unique_ptr<DraftRunner> drafter,
                                                               const SpecSetup& setup);

}  // namespace gannet::spec
