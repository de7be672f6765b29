#include "lib/engine/model_setup.h"

#include <algorithm>
#include <vector>

#include "lib/backend/backend_factory.h"
#include "lib/common/file_util.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/engine/model_info.h"
#include "lib/model/variants.h"

namespace gannet::engine {
namespace {

absl::Status LoadModel(const EngineConfig& cfg, LoadedEngineParts* p) {
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

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedEngineParts>> LoadEngineParts(const EngineConfig& cfg) {
  auto p = std::make_unique<LoadedEngineParts>();
  GANNET_RETURN_IF_ERROR(LoadModel(cfg, p.get()));
  const model::TextConfig& c = p->config.text;

  backend::BackendOptions bo;
  bo.kind = cfg.backend;
  bo.device_id = cfg.device_id;
  bo.num_threads = cfg.num_threads;
  GANNET_ASSIGN_OR_RETURN(p->backend, backend::CreateBackend(bo));
  const bool cpu = p->backend->name() == "cpu";

  p->max_running_seqs = cfg.max_running_seqs > 0 ? cfg.max_running_seqs : (cpu ? 16 : 64);
  p->max_step_tokens = cfg.max_step_tokens > 0 ? cfg.max_step_tokens : (cpu ? 256 : 2048);
  p->max_model_len = cfg.max_model_len > 0 ? cfg.max_model_len
                                           : std::min<int64_t>(c.max_position_embeddings, 32768);
  if (p->max_model_len > c.max_position_embeddings) {
    return InvalidArgumentError("engine: max_model_len {} exceeds the model's "
                                "max_position_embeddings {}",
                                p->max_model_len, c.max_position_embeddings);
  }
  p->page_size = cfg.page_size > 0 ? cfg.page_size : 16;
  if (p->max_step_tokens < p->max_running_seqs) {
    return InvalidArgumentError(
        "engine: max_step_tokens ({}) must be at least max_running_seqs ({}) so every running "
        "sequence can decode each step",
        p->max_step_tokens, p->max_running_seqs);
  }

  // KV pools: sliding sized for the concurrency, full gets the rest of the budget.
  kv::KvPoolPlanOptions po;
  po.bytes_per_token = kv::KvBytesPerToken(KvLayers(c), DTypeBits(p->backend->kv_dtype()) / 8);
  po.sliding_window = c.sliding_window;
  po.page_size = p->page_size;
  po.max_running_seqs = p->max_running_seqs;
  po.max_step_tokens = p->max_step_tokens;
  po.max_seq_len = p->max_model_len;
  po.num_pages_override = {cfg.kv_sliding_pages, cfg.kv_full_pages};
  po.budget_bytes = cfg.kv_memory_bytes;
  if (po.budget_bytes <= 0) {
    const int64_t free_bytes = p->backend->FreeMemoryBytes();
    if (cpu || free_bytes <= 0) {
      // Host memory: enough for every running sequence at full length twice over (the rest is
      // prefix cache), at most 1 GiB.
      const int64_t per_token = po.bytes_per_token[0] + po.bytes_per_token[1];
      po.budget_bytes = std::min<int64_t>(
          int64_t{1} << 30, 2 * static_cast<int64_t>(p->max_running_seqs) * p->max_model_len *
                                    per_token);
    } else {
      // Leave room for weights (not loaded yet; bf16), activations and the CUDA context's needs.
      const int64_t weight_bytes = 2 * model::CountParameters(p->config);
      const int64_t activations = static_cast<int64_t>(p->max_step_tokens) * 256 * 1024 +
                                  static_cast<int64_t>(p->max_running_seqs) * c.vocab_size * 4;
      po.budget_bytes = static_cast<int64_t>(
          (free_bytes - weight_bytes - activations) * 0.90);
      if (po.budget_bytes <= 0) {
        return ResourceExhaustedError(
            "engine: the model's weights ({:.1f} GiB) leave no device memory for the KV cache "
            "({:.1f} GiB free)",
            weight_bytes / 1073741824.0, free_bytes / 1073741824.0);
      }
    }
  }
  GANNET_ASSIGN_OR_RETURN(p->kv_plan, kv::PlanKvPools(po));
  if (cfg.max_running_seqs <= 0) {
    // No explicit limit: run no more sequences than the pools can hold at full length, or the
    // sliding pool (sized for the limit) would starve the full pool and every step would preempt.
    const int64_t pages_per_seq = (p->max_model_len + p->page_size - 1) / p->page_size;
    auto fits = [&](const kv::KvPoolPlan& plan, int seqs) {
      return plan.groups[1].pages == 0 || plan.groups[1].pages >= seqs * pages_per_seq;
    };
    while (p->max_running_seqs > 1 && !fits(p->kv_plan, p->max_running_seqs)) {
      const int smaller = std::max(1, p->max_running_seqs * 7 / 8);
      po.max_running_seqs = smaller;
      auto plan = kv::PlanKvPools(po);
      if (!plan.ok()) break;
      p->kv_plan = *plan;
      p->max_running_seqs = smaller;
    }
    GANNET_LOG_INFO("engine: up to {} running sequences of {} tokens", p->max_running_seqs,
                    p->max_model_len);
  }
  for (kv::KvGroup g : kv::kAllKvGroups) {
    if (!p->kv_plan.group(g).report.empty()) GANNET_LOG_INFO("kv: {}", p->kv_plan.group(g).report);
  }

  runner::RunnerOptions ro;
  ro.max_tokens = p->max_step_tokens;
  ro.max_seqs = p->max_running_seqs;
  ro.max_logit_rows = p->max_running_seqs;
  ro.kv.page_size = p->page_size;
  ro.max_pages_per_seq = static_cast<int>((p->max_model_len + p->page_size - 1) / p->page_size);
  for (int g = 0; g < 2; ++g) ro.kv.num_pages[g] = p->kv_plan.groups[g].pages;
  if (cfg.progress) ro.on_weight_progress = [&cfg](double f) { cfg.progress("weights", f); };
  ro.enable_graphs = cfg.enable_cuda_graphs;
  GANNET_ASSIGN_OR_RETURN(p->runner,
                          runner::ModelRunner::Create(p->config, p->weights, p->backend.get(), ro));

  kv::KvManagerOptions ko;
  ko.page_size = p->page_size;
  ko.sliding_window = c.sliding_window;
  ko.num_pages = p->kv_plan.num_pages();
  ko.enable_prefix_cache = cfg.enable_prefix_cache;
  GANNET_ASSIGN_OR_RETURN(p->kv, kv::KvManager::Create(ko));
  return p;
}

}  // namespace gannet::engine
