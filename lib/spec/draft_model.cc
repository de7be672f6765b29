#include "lib/spec/draft_model.h"

#include "lib/common/status.h"
#include "lib/model/variants.h"
#include "lib/spec/drafter.h"

namespace gannet::spec {

absl::StatusOr<int> ResolveSpeculativeTokens(int requested, bool has_draft_model) {
  if (!has_draft_model) {
    if (requested != 0) {
      return InvalidArgumentError(
          "engine: num_speculative_tokens is {} but no draft model is set (draft_model_dir)",
          requested);
    }
    return 0;
  }
  if (requested < 0 || requested > kMaxSpeculativeTokens) {
    return InvalidArgumentError("engine: num_speculative_tokens must be 1 to {} (0 = {}), got {}",
                                kMaxSpeculativeTokens, kDefaultSpeculativeTokens, requested);
  }
  return requested > 0 ? requested : kDefaultSpeculativeTokens;
}

absl::StatusOr<DraftModel> LoadDraftModel(const std::string& dir, bool dummy_weights,
                                          const model::ModelConfig& target,
                                          const std::string& target_dir) {
  DraftModel d;
  const bool dummy_variant = model::IsDummyModel(dir);
  if (dummy_variant) {
    GANNET_ASSIGN_OR_RETURN(d.config, model::DummyModelConfig(dir));
  } else {
    GANNET_ASSIGN_OR_RETURN(d.config, model::LoadModelConfig(dir));
  }
  if (d.config.kind != model::ModelKind::kAssistant) {
    return InvalidArgumentError(
        "engine: the draft model {} is not a Gemma-4 MTP assistant (model_type '{}')", dir,
        d.config.model_type);
  }
  absl::Status fit = CheckDrafterPair(d.config, target);
  if (!fit.ok()) {
    return InvalidArgumentError("engine: the draft model {} cannot draft for {} ({}): {}", dir,
                                target_dir, model::ModelLabel(target), fit.message());
  }
  if (dummy_variant || dummy_weights) {
    d.weights = model::SyntheticWeights(d.config, model::kDummyWeightSeed);
  } else {
    // Headers only: the engine reads the bytes after its memory check (Checkpoint::ReadData).
    GANNET_ASSIGN_OR_RETURN(d.checkpoint, model::Checkpoint::Open(dir, {.read_data = false}));
    GANNET_ASSIGN_OR_RETURN(d.weights, model::BindWeights(d.config, *d.checkpoint));
  }
  return d;
}

DrafterOptions DrafterOptionsFor(const SpecSetup& setup) {
  DrafterOptions dopt;
  dopt.max_seqs = setup.max_seqs;
  dopt.max_steps = setup.num_speculative_tokens;
  dopt.enable_graphs = setup.enable_graphs;
  return dopt;
}

absl::StatusOr<std::unique_ptr<SpecDecoder>> CreateSpecDecoder(const DraftModel& draft,
                                                               const model::ModelConfig& target,
                                                               runner::ModelRunner* target_runner,
                                                               backend::Backend* backend,
                                                               const SpecSetup& setup) {
  GANNET_ASSIGN_OR_RETURN(
      auto drafter, Drafter::Create(draft.config, draft.weights, target, target_runner, backend,
                                    DrafterOptionsFor(setup)));
  return CreateSpecDecoder(std::move(drafter), setup);
}

absl::StatusOr<std::unique_ptr<SpecDecoder>> CreateSpecDecoder(std::unique_ptr<DraftRunner> drafter,
                                                               const SpecSetup& setup) {
  SpecOptions sopt;
  sopt.num_speculative_tokens = setup.num_speculative_tokens;
  sopt.max_seqs = setup.max_seqs;
  sopt.override_drafts = setup.override_drafts;
  return SpecDecoder::Create(std::move(drafter), sopt);
}

}  // namespace gannet::spec
