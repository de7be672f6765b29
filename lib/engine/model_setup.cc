#include "lib/engine/model_setup.h"

#include <chrono>

#include "lib/backend/backend_factory.h"
#include "lib/common/file_util.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/common/units.h"
#include "lib/model/variants.h"

namespace gannet::engine {
namespace {

using Clock = std::chrono::steady_clock;

// Config, checkpoint headers and tokenizer: everything about the files, before any weight moves.
absl::Status LoadModelFiles(const EngineConfig& cfg, LoadedEngineParts* p) {
  const std::string& dir = cfg.model_dir;
  if (dir.empty()) return InvalidArgumentError("engine: model_dir is not set");
  const bool dummy_variant = model::IsDummyModel(dir);
  const bool dummy = dummy_variant || cfg.load_format == "dummy";
  if (!cfg.load_format.empty() && cfg.load_format != "auto" && cfg.load_format != "dummy" &&
      cfg.load_format != "safetensors") {
    return InvalidArgumentError("engine: load_format '{}' is not one of auto, safetensors, dummy",
                                cfg.load_format);
  }
  if (dummy_variant) {
    GANNET_ASSIGN_OR_RETURN(p->config, model::DummyModelConfig(dir));
  } else {
    GANNET_ASSIGN_OR_RETURN(p->config, model::LoadModelConfig(dir));
  }
  if (p->config.kind != model::ModelKind::kTarget) {
    return InvalidArgumentError(
        "engine: {} is an MTP assistant (drafter) checkpoint; serve its target model instead", dir);
  }
  if (dummy) {
    p->weights = model::SyntheticWeights(p->config, model::kDummyWeightSeed);
  } else {
    GANNET_ASSIGN_OR_RETURN(p->checkpoint, model::Checkpoint::Open(dir));
    GANNET_ASSIGN_OR_RETURN(p->weights, model::BindWeights(p->config, *p->checkpoint));
  }
  if (!dummy_variant && FileExists(dir + "/tokenizer.json")) {
    GANNET_ASSIGN_OR_RETURN(p->tokenizer, tokenizer::Tokenizer::FromFile(dir + "/tokenizer.json"));
    if (p->tokenizer->vocab_size() > p->config.text.vocab_size) {
      return InvalidArgumentError("{}/tokenizer.json has {} tokens but the model's vocab_size is {}",
                                  dir, p->tokenizer->vocab_size(), p->config.text.vocab_size);
    }
  }
  return absl::OkStatus();
}

// The MTP assistant of draft_model_dir: config checked against the target before any weight
// loads, then its checkpoint (or synthetic weights for "dummy:<variant>-assistant").
absl::Status LoadDraftFiles(const EngineConfig& cfg, LoadedEngineParts* p) {
  const std::string& dir = cfg.draft_model_dir;
  if (dir.empty()) {
    if (cfg.num_speculative_tokens != 0) {
      return InvalidArgumentError(
          "engine: num_speculative_tokens is {} but no draft model is set (draft_model_dir)",
          cfg.num_speculative_tokens);
    }
    return absl::OkStatus();
  }
  if (cfg.num_speculative_tokens < 0 || cfg.num_speculative_tokens > spec::kMaxSpeculativeTokens) {
    return InvalidArgumentError("engine: num_speculative_tokens must be 1 to {} (0 = {}), got {}",
                                spec::kMaxSpeculativeTokens, kDefaultSpeculativeTokens,
                                cfg.num_speculative_tokens);
  }
  const bool dummy_variant = model::IsDummyModel(dir);
  if (dummy_variant) {
    GANNET_ASSIGN_OR_RETURN(p->draft_config, model::DummyModelConfig(dir));
  } else {
    GANNET_ASSIGN_OR_RETURN(p->draft_config, model::LoadModelConfig(dir));
  }
  if (p->draft_config.kind != model::ModelKind::kAssistant) {
    return InvalidArgumentError(
        "engine: the draft model {} is not a Gemma-4 MTP assistant (model_type '{}')", dir,
        p->draft_config.model_type);
  }
  absl::Status fit = spec::CheckDrafterPair(p->draft_config, p->config);
  if (!fit.ok()) {
    return InvalidArgumentError("engine: the draft model {} cannot draft for {} ({}): {}", dir,
                                cfg.model_dir, model::VariantName(p->config.variant),
                                fit.message());
  }
  if (dummy_variant || cfg.load_format == "dummy") {
    p->draft_weights = model::SyntheticWeights(p->draft_config, model::kDummyWeightSeed);
  } else {
    GANNET_ASSIGN_OR_RETURN(p->draft_checkpoint, model::Checkpoint::Open(dir));
    GANNET_ASSIGN_OR_RETURN(p->draft_weights,
                            model::BindWeights(p->draft_config, *p->draft_checkpoint));
  }
  return absl::OkStatus();
}

absl::Status CreateBackend(const EngineConfig& cfg, LoadedEngineParts* p) {
  backend::BackendOptions bo;
  bo.kind = cfg.backend;
  bo.device_id = cfg.device_id;
  bo.num_threads = cfg.num_threads;
  GANNET_ASSIGN_OR_RETURN(backend::BackendChoice choice, backend::CreateBackend(bo));
  p->backend = std::move(choice.backend);
  if (cfg.wrap_backend) p->backend = cfg.wrap_backend(std::move(p->backend));
  p->backend_fallback = std::move(choice.fallback_reason);
  if (!p->backend_fallback.empty()) {
    GANNET_LOG_WARNING("engine: running on the CPU backend (much slower) because {}",
                       p->backend_fallback);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedEngineParts>> LoadEngineParts(const EngineConfig& cfg) {
  const auto start = Clock::now();
  auto p = std::make_unique<LoadedEngineParts>();
  GANNET_RETURN_IF_ERROR(LoadModelFiles(cfg, p.get()));
  GANNET_RETURN_IF_ERROR(LoadDraftFiles(cfg, p.get()));
  const bool speculate = !cfg.draft_model_dir.empty();
  const int num_spec = cfg.num_speculative_tokens > 0 ? cfg.num_speculative_tokens
                                                      : kDefaultSpeculativeTokens;
  GANNET_RETURN_IF_ERROR(CreateBackend(cfg, p.get()));
  backend::Backend& be = *p->backend;
  const bool cpu = be.name() == "cpu";
  GANNET_ASSIGN_OR_RETURN(EngineLimits limits, ResolveLimits(cfg, p->config.text, cpu));

  // The weights go to the device in bf16 (matrices) whatever the checkpoint stores.
  runner::RunnerOptions ro = RunnerOptionsFor(limits);
  ro.enable_graphs = cfg.enable_cuda_graphs;
  if (speculate) {
    // Verify chunks want a logits row per token: K + 1 per sequence.
    ro.max_logit_rows = std::min<int>(limits.max_step_tokens,
                                      limits.max_running_seqs * (num_spec + 1));
  }
  // The CPU reads bf16 checkpoints in place (mmap): only synthetic weights take memory there.
  int64_t weight_bytes = cpu && p->checkpoint != nullptr ? 0 : 2 * model::CountParameters(p->config);
  if (speculate && !(cpu && p->draft_checkpoint != nullptr)) {
    weight_bytes += 2 * model::CountParameters(p->draft_config);
  }
  const int64_t activation_bytes = runner::ActivationBytes(p->config, ro, be.activation_dtype(),
                                                           be.residual_dtype());
  const std::string device =
      cpu ? fmt::format("the CPU ({})", be.DeviceName())
          : fmt::format("{} device {} ({})", be.name(), be.device_id(), be.DeviceName());
  GANNET_RETURN_IF_ERROR(CheckWeightsFit(weight_bytes, activation_bytes, be.FreeMemoryBytes(),
                                         be.TotalMemoryBytes(), device));

  if (cfg.progress) {
    ro.on_weight_progress = [&cfg, start](int64_t done, int64_t total) {
      LoadProgress lp;
      lp.stage = "weights";
      lp.bytes_done = done;
      lp.bytes_total = total;
      lp.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
      return cfg.progress(lp);
    };
  }
  GANNET_ASSIGN_OR_RETURN(p->runner, runner::ModelRunner::Create(p->config, p->weights, &be, ro));
  if (speculate) {
    // Before the KV cache is sized: the drafter's weights and scratch come out of the same memory.
    spec::DrafterOptions dopt;
    dopt.max_seqs = limits.max_running_seqs;
    dopt.max_steps = num_spec;
    dopt.enable_graphs = cfg.enable_cuda_graphs;
    GANNET_ASSIGN_OR_RETURN(auto drafter,
                            spec::Drafter::Create(p->draft_config, p->draft_weights, p->config,
                                                  p->runner.get(), &be, dopt));
    spec::SpecOptions sopt;
    sopt.num_speculative_tokens = num_spec;
    sopt.max_seqs = limits.max_running_seqs;
    sopt.override_drafts = cfg.override_drafts;
    GANNET_ASSIGN_OR_RETURN(p->spec, spec::SpecDecoder::Create(std::move(drafter), sopt));
    GANNET_LOG_INFO("engine: speculative decoding with {} ({}), {} drafts per round",
                    cfg.draft_model_dir, FormatBytes(p->spec->drafter().weight_bytes()), num_spec);
  }

  // The KV cache gets what the weights and activations left (measured, not estimated).
  KvMemory memory;
  memory.host = cpu;
  memory.free_after_runner = be.FreeMemoryBytes();
  memory.host_total = cpu ? be.TotalMemoryBytes() : 0;
  GANNET_ASSIGN_OR_RETURN(p->kv_sizing, SizeKvCache(p->config.text, limits, memory,
                                                    DTypeBits(be.kv_dtype()) / 8));
  const KvSizing& kv = p->kv_sizing;
  if (!kv.warning.empty()) GANNET_LOG_WARNING("engine: {}", kv.warning);
  for (kv::KvGroup g : kv::kAllKvGroups) {
    if (!kv.plan.group(g).report.empty()) GANNET_LOG_INFO("{}", kv.plan.group(g).report);
  }
  GANNET_RETURN_IF_ERROR(p->runner->AttachKv(kv.layout));
  kv::KvManagerOptions ko;
  ko.enable_prefix_cache = cfg.enable_prefix_cache;
  GANNET_ASSIGN_OR_RETURN(p->kv, kv::KvManager::Create(kv.layout, ko));

  p->max_running_seqs = kv.max_running_seqs;
  p->max_step_tokens = limits.max_step_tokens;
  p->max_prefill_tokens_while_decoding = limits.max_prefill_tokens_while_decoding;
  p->max_model_len = kv.max_model_len;
  p->page_size = limits.page_size;
  p->load_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  GANNET_LOG_INFO("engine: {} on {}: up to {} running sequences of {} tokens, KV {}, loaded in "
                  "{:.1f} s",
                  model::VariantName(p->config.variant), device, p->max_running_seqs,
                  p->max_model_len, FormatBytes(kv.layout.TotalBytes()), p->load_seconds);
  return p;
}

}  // namespace gannet::engine
