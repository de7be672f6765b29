#include "lib/engine/model_setup.h"

#include "lib/engine/chat_prompt.h"

#include <chrono>

#include "lib/backend/backend_factory.h"
#include "lib/backend/fault_injection_backend.h"
#include "lib/common/file_util.h"
#include "lib/common/host_memory.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/common/units.h"
#include "lib/model/quantize_checkpoint.h"
#include "lib/model/tp_shard.h"
#include "lib/model/variants.h"
#include "lib/parallel/group_tp_hooks.h"
#include "lib/parallel/nccl_collectives.h"
#include "lib/parallel/tp_runner.h"
#include "lib/parallel/tp_setup.h"
#include "lib/runner/warmup.h"

namespace gannet::engine {
namespace {

using Clock = std::chrono::steady_clock;

// Config, checkpoint headers and tokenizer: everything about the files, before any weight moves.
// A device backend reads the checkpoint into host memory before uploading it (safetensors.h):
// the host must hold it, or the load would end in the OOM killer instead of an error.
absl::Status CheckHostHoldsCheckpoint(int64_t bytes) {
  const int64_t available = HostAvailableMemoryBytes();
  if (bytes <= 0 || available <= 0 || bytes <= available) return absl::OkStatus();
  return ResourceExhaustedError(
      "engine: the checkpoint's {} are read into host memory before they go to the device, but "
      "the host has {} available (of {})",
      FormatBytes(bytes), FormatBytes(available), FormatBytes(HostTotalMemoryBytes()));
}

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
    // Headers only: the weights are read after the memory check (LoadEngineParts).
    GANNET_ASSIGN_OR_RETURN(p->checkpoint, model::Checkpoint::Open(dir, {.read_data = false}));
    GANNET_ASSIGN_OR_RETURN(p->weights, model::BindWeights(p->config, *p->checkpoint));
  }
  if (!cfg.weight_dtype.empty()) {
    absl::StatusOr<model::QuantizeOptions> q = model::ParseWeightDtype(cfg.weight_dtype);
    if (!q.ok()) {
      return InvalidArgumentError("engine: weight_dtype: {}", q.status().message());
    }
    if (q->float_format.has_value()) {
      return UnimplementedError(
          "engine: weight_dtype '{}': quantizing at load makes int4 only (FP8 and NVFP4 "
          "checkpoints: write them with `gannet quantize`, then load them)",
          cfg.weight_dtype);
    }
    GANNET_RETURN_IF_ERROR(
        model::QuantizeAtLoad(&p->weights, model::Int4FormatOf(*q, DType::kBF16)));
  }
  if (!dummy_variant && FileExists(dir + "/tokenizer.json")) {
    GANNET_ASSIGN_OR_RETURN(p->tokenizer, tokenizer::Tokenizer::FromFile(dir + "/tokenizer.json"));
    if (p->tokenizer->vocab_size() > p->config.text.vocab_size) {
      return InvalidArgumentError(
          "{}/tokenizer.json has {} tokens but the model's vocab_size is {}", dir,
          p->tokenizer->vocab_size(), p->config.text.vocab_size);
    }
    GANNET_ASSIGN_OR_RETURN(p->chat_format,
                            tokenizer::ChatFormat::Load(dir, ChatVariant(p->config.variant)));
  }
  return absl::OkStatus();
}

// The tensor-parallel group size the config asks for (1 = no tensor parallelism).
absl::StatusOr<int> TensorParallelSize(const EngineConfig& cfg) {
  const int listed = static_cast<int>(cfg.device_ids.size());
  if (cfg.tensor_parallel_size < 0) {
    return InvalidArgumentError("engine: tensor_parallel_size must be >= 0, got {}",
                                cfg.tensor_parallel_size);
  }
  if (listed > 0 && cfg.tensor_parallel_size > 0 && cfg.tensor_parallel_size != listed) {
    return InvalidArgumentError("engine: tensor_parallel_size {} but {} device ids",
                                cfg.tensor_parallel_size, listed);
  }
  return std::max({1, cfg.tensor_parallel_size, listed});
}

// What a tensor-parallel group of `world` ranks cannot serve, before any device is touched: the
// model, and the draft model, which every rank holds a shard of (lib/model/tp_shard.h).
absl::Status CheckTensorParallel(const EngineConfig& cfg, const LoadedEngineParts& p, int world) {
  GANNET_RETURN_IF_ERROR(model::CheckTpShardable(p.config, world));
  if (cfg.draft_model_dir.empty()) return absl::OkStatus();
  absl::Status draft =
      model::CheckTpShardable(p.draft.config, world, model::MoeSplit::kIntermediate);
  if (!draft.ok()) {
    return InvalidArgumentError("engine: the draft model {} does not split over {} ranks: {}",
                                cfg.draft_model_dir, world, draft.message());
  }
  return absl::OkStatus();
}

// A tensor-parallel group: rank 0's backend becomes the engine's, the others the group's.
absl::Status CreateTpBackends(const EngineConfig& cfg, int world, LoadedEngineParts* p) {
  GANNET_RETURN_IF_ERROR(CheckTensorParallel(cfg, *p, world));
  backend::BackendOptions bo;
  bo.kind = cfg.backend;
  bo.num_threads = cfg.num_threads;
  bo.compute_dtype = cfg.compute_dtype;
  GANNET_ASSIGN_OR_RETURN(parallel::TpGroup g, parallel::CreateTpGroup(bo, world, cfg.device_ids));
  p->backend = std::move(g.backends[0]);
  for (int r = 1; r < world; ++r) p->rank_backends.push_back(std::move(g.backends[r]));
  p->tp_collectives = std::move(g.collectives);
  p->tp_shared = std::move(g.shared);
  p->backend_fallback = std::move(g.fallback_reason);
  p->tensor_parallel_size = world;
  return absl::OkStatus();
}

// One rank of a multi-process group: this process's device joins the others over NCCL.
absl::Status JoinTpGroup(const EngineConfig& cfg, LoadedEngineParts* p) {
  const int world = cfg.tensor_parallel_size;
  if (world < 1 || cfg.tp_rank < 0 || cfg.tp_rank >= world) {
    return InvalidArgumentError(
        "engine: tp_rank {} of tensor_parallel_size {} (a multi-process "
        "group needs 0 <= rank < size)",
        cfg.tp_rank, world);
  }
  if (cfg.device_ids.size() > 1) {
    return InvalidArgumentError(
        "engine: a rank of a multi-process group runs on one device; {} "
        "device ids given",
        cfg.device_ids.size());
  }
  GANNET_RETURN_IF_ERROR(CheckTensorParallel(cfg, *p, world));
  backend::BackendOptions bo;
  bo.kind = cfg.backend.empty() ? "cuda" : cfg.backend;
  bo.device_id = cfg.device_ids.empty() ? cfg.device_id : cfg.device_ids[0];
  bo.compute_dtype = cfg.compute_dtype;
  GANNET_ASSIGN_OR_RETURN(backend::BackendChoice choice, backend::CreateBackend(bo));
  p->backend = std::move(choice.backend);
  GANNET_ASSIGN_OR_RETURN(
      parallel::NcclRank joined,
      parallel::JoinNcclGroup(p->backend.get(), cfg.tp_rank, world, cfg.tp_group_id));
  p->tp_collectives.push_back(std::move(joined.collectives));
  p->tp_channel = std::move(joined.channel);
  p->tensor_parallel_size = world;
  p->tp_rank = cfg.tp_rank;
  return absl::OkStatus();
}

absl::Status CreateBackend(const EngineConfig& cfg, LoadedEngineParts* p) {
  if (!cfg.tp_group_id.empty()) return JoinTpGroup(cfg, p);
  GANNET_ASSIGN_OR_RETURN(const int world, TensorParallelSize(cfg));
  if (world > 1) return CreateTpBackends(cfg, world, p);
  backend::BackendOptions bo;
  bo.kind = cfg.backend;
  bo.device_id = cfg.device_ids.empty() ? cfg.device_id : cfg.device_ids[0];
  bo.num_threads = cfg.num_threads;
  bo.compute_dtype = cfg.compute_dtype;
  GANNET_ASSIGN_OR_RETURN(backend::BackendChoice choice, backend::CreateBackend(bo));
  p->backend = std::move(choice.backend);
  if (cfg.wrap_backend) p->backend = cfg.wrap_backend(std::move(p->backend));
  GANNET_ASSIGN_OR_RETURN(const int64_t fault_step, backend::FaultInjectionStepFromEnv());
  if (fault_step > 0) {
    GANNET_LOG_WARNING(
        "engine: GANNET_FAULT_INJECT_STEP={}: device span {} will fail as a lost "
        "device (a test-only fault hook)",
        fault_step, fault_step);
    p->backend =
        std::make_unique<backend::FaultInjectionBackend>(std::move(p->backend), fault_step);
  }
  p->backend_fallback = std::move(choice.fallback_reason);
  if (choice.no_gpu) {
    GANNET_LOG_INFO("engine: running on the CPU backend: {}", p->backend_fallback);
  } else if (!p->backend_fallback.empty()) {
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
  const bool speculate = !cfg.draft_model_dir.empty();
  GANNET_ASSIGN_OR_RETURN(const int num_spec,
                          spec::ResolveSpeculativeTokens(cfg.num_speculative_tokens, speculate));
  if (speculate) {
    GANNET_ASSIGN_OR_RETURN(
        p->draft, spec::LoadDraftModel(cfg.draft_model_dir, cfg.load_format == "dummy", p->config,
                                       cfg.model_dir));
  }
  GANNET_RETURN_IF_ERROR(CreateBackend(cfg, p.get()));
  if (p->tp_rank != 0) {
    if (p->checkpoint != nullptr) {
      GANNET_RETURN_IF_ERROR(CheckHostHoldsCheckpoint(p->checkpoint->total_bytes()));
      GANNET_RETURN_IF_ERROR(p->checkpoint->ReadData());
    }
    // A rank other than 0 serves rank 0's steps; rank 0 decides every limit and sends them.
    if (p->draft.checkpoint != nullptr) {
      GANNET_RETURN_IF_ERROR(CheckHostHoldsCheckpoint(p->draft.checkpoint->total_bytes()));
      GANNET_RETURN_IF_ERROR(p->draft.checkpoint->ReadData());
    }
    parallel::DraftModelRef draft;
    if (speculate) draft = {&p->draft.config, &p->draft.weights};
    p->tp_worker =
        parallel::TpWorker::Start(p->config, p->weights, p->backend.get(),
                                  std::move(p->tp_collectives[0]), std::move(p->tp_channel), draft);
    GANNET_LOG_INFO("engine: rank {} of a tensor-parallel group of {} on {}, serving rank 0",
                    p->tp_rank, p->tensor_parallel_size, p->backend->DeviceName());
    return p;
  }
  backend::Backend& be = *p->backend;
  const bool cpu = be.name() == "cpu";
  const int world = p->tensor_parallel_size;
  GANNET_ASSIGN_OR_RETURN(EngineLimits limits, ResolveLimits(cfg, p->config.text, cpu, world));

  // The weights go to the device in bf16 (matrices) whatever the checkpoint stores.
  runner::RunnerOptions ro = RunnerOptionsFor(limits);
  // What each device holds: the whole model, or a rank's shard (every rank's is the same size).
  const model::ModelConfig rank_config =
      world > 1 ? model::ShardConfig(p->config, world) : p->config;
  ro.enable_graphs = cfg.enable_cuda_graphs;
  if (speculate) {
    // Verify chunks want a logits row per token: K + 1 per sequence.
    ro.max_logit_rows =
        std::min<int>(limits.max_step_tokens, limits.max_running_seqs * (num_spec + 1));
  }
  // The CPU computes from the checkpoint's bytes, read into its memory (bf16 matrices in place,
  // other types converted): the checkpoint's size, the issue-56 check that a 32.5 GiB checkpoint
  // does not start on a 23.5 GiB machine. Devices get bf16 (or f16) copies.
  const auto checkpoint_bytes = [](const model::Checkpoint* c) {
    return c != nullptr ? static_cast<int64_t>(c->total_bytes()) : 0;
  };
  int64_t weight_bytes = cpu && p->checkpoint != nullptr ? checkpoint_bytes(p->checkpoint.get())
                                                         : 2 * model::CountParameters(p->config);
  if (world > 1 && !cpu) weight_bytes = 2 * model::ShardParameterCount(p->config, world);
  if (!cpu && !cfg.weight_dtype.empty() && world == 1) {
    // Quantized at load: those matrices take their int4 bytes and scales, the rest bf16 (a
    // tensor-parallel rank's count stays the bf16 shard's: an upper bound).
    weight_bytes = 0;
    for (const model::WeightView* v : model::AllViews(p->weights)) {
      if (!v->present()) continue;
      weight_bytes += v->quantized() ? static_cast<int64_t>(v->stored_bytes()) : 2 * v->numel();
    }
  }
  if (speculate) {
    weight_bytes += cpu && p->draft.checkpoint != nullptr
                        ? checkpoint_bytes(p->draft.checkpoint.get())
                        : 2 * model::CountParameters(p->draft.config);
  }
  if (!cpu) {
    // A device backend reads the checkpoint into host memory, then uploads it.
    const int64_t host_bytes =
        checkpoint_bytes(p->checkpoint.get()) + checkpoint_bytes(p->draft.checkpoint.get());
    GANNET_RETURN_IF_ERROR(CheckHostHoldsCheckpoint(host_bytes));
  }
  // A rank's activations include its logits shards: sized with the group's hooks (each rank's
  // own hooks are made with its runner, parallel::CreateRankRunner).
  std::unique_ptr<parallel::GroupTpHooks> sizing_tp;
  runner::RunnerOptions sizing = ro;
  if (world > 1) {
    sizing_tp = std::make_unique<parallel::GroupTpHooks>(p->tp_collectives[0].get());
    sizing.tp = sizing_tp.get();
  }
  const int64_t activation_bytes =
      runner::ActivationBytes(rank_config, sizing, runner::ActivationTypes::Of(be));
  std::string device =
      cpu ? fmt::format("the CPU ({})", be.DeviceName())
          : fmt::format("{} device {} ({})", be.name(), be.device_id(), be.DeviceName());
  GANNET_RETURN_IF_ERROR(CheckWeightsFit(weight_bytes, activation_bytes, be.FreeMemoryBytes(),
                                         be.TotalMemoryBytes(), device, cpu));
  for (const auto& other : p->rank_backends) {
    GANNET_RETURN_IF_ERROR(CheckWeightsFit(
        weight_bytes, activation_bytes, other->FreeMemoryBytes(), other->TotalMemoryBytes(),
        fmt::format("{} device {} ({})", other->name(), other->device_id(), other->DeviceName()),
        cpu));
  }
  if (world > 1) {
    device = fmt::format("{} ranks of tensor parallelism from {}", world, device);
  }
  // Checked: now the weights are read (safetensors.h: into this process's memory, so a file
  // changed later cannot fault the process).
  if (p->checkpoint != nullptr) GANNET_RETURN_IF_ERROR(p->checkpoint->ReadData());
  if (p->draft.checkpoint != nullptr) GANNET_RETURN_IF_ERROR(p->draft.checkpoint->ReadData());

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
  if (cpu && world == 1 && p->checkpoint != nullptr) {
    // The CPU reads most matrices in place; the ones it copies (fused QKV and gate/up, converted
    // types) give their checkpoint bytes back as soon as the copy exists, so the weights are
    // held once, and the peak is the weights plus one fused matrix (safetensors.h ReleaseRange).
    model::Checkpoint* checkpoint = p->checkpoint.get();
    ro.on_weight_copied = [checkpoint](const model::WeightView& v) {
      checkpoint->ReleaseRange(v.data, v.nbytes());
    };
  }
  runner::ModelRunner* single = nullptr;  // the runner of a single device (the drafter's target)
  parallel::TpRunner* tp_runner = nullptr;
  if (world > 1) {
    // Every rank here, or rank 0 alone with the others in their processes (tp_channel).
    const int local = static_cast<int>(p->tp_collectives.size());
    std::vector<parallel::TpRankParts> ranks(local);
    for (int r = 0; r < local; ++r) {
      ranks[r].backend = r == 0 ? &be : p->rank_backends[r - 1].get();
      ranks[r].collectives = std::move(p->tp_collectives[r]);
    }
    GANNET_ASSIGN_OR_RETURN(
        auto tp, parallel::TpRunner::Create(p->config, p->weights, std::move(ranks), p->tp_shared,
                                            ro, std::move(p->tp_channel)));
    tp_runner = tp.get();
    p->runner = std::move(tp);
  } else {
    GANNET_ASSIGN_OR_RETURN(auto r, runner::ModelRunner::Create(p->config, p->weights, &be, ro));
    single = r.get();
    p->runner = std::move(r);
  }
  if (speculate) {
    // Before the KV cache is sized: the drafter's weights and scratch come out of the same memory.
    spec::SpecSetup setup;
    setup.num_speculative_tokens = num_spec;
    setup.max_seqs = limits.max_running_seqs;
    setup.enable_graphs = cfg.enable_cuda_graphs;
    setup.override_drafts = cfg.override_drafts;
    if (tp_runner != nullptr) {
      // Every rank drafts with its shard of the assistant (lib/parallel/tp_runner.h).
      GANNET_ASSIGN_OR_RETURN(auto drafter,
                              tp_runner->AttachDrafter(p->draft.config, p->draft.weights,
                                                       spec::DrafterOptionsFor(setup)));
      GANNET_ASSIGN_OR_RETURN(p->spec, spec::CreateSpecDecoder(std::move(drafter), setup));
    } else {
      GANNET_ASSIGN_OR_RETURN(p->spec,
                              spec::CreateSpecDecoder(p->draft, p->config, single, &be, setup));
    }
    GANNET_LOG_INFO("engine: speculative decoding with {} ({}), {} drafts per round",
                    cfg.draft_model_dir, FormatBytes(p->spec->drafter().weight_bytes()), num_spec);
  }

  // The KV cache gets what the weights and activations left (measured, not estimated).
  KvMemory memory;
  memory.host = cpu;
  // With tensor parallelism every rank holds the same pools: the least free memory sizes them.
  memory.free_after_runner =
      tp_runner != nullptr ? tp_runner->MinFreeMemoryBytes() : be.FreeMemoryBytes();
  memory.host_total = cpu ? be.TotalMemoryBytes() : 0;
  GANNET_ASSIGN_OR_RETURN(
      p->kv_sizing, SizeKvCache(rank_config.text, limits, memory, DTypeBits(be.kv_dtype()) / 8));
  const KvSizing& kv = p->kv_sizing;
  if (!kv.warning.empty()) GANNET_LOG_WARNING("engine: {}", kv.warning);
  for (kv::KvGroup g : kv::kAllKvGroups) {
    if (!kv.plan.group(g).report.empty()) GANNET_LOG_INFO("{}", kv.plan.group(g).report);
  }
  GANNET_RETURN_IF_ERROR(p->runner->AttachKv(kv.layout));
  if (cfg.startup_warmup) {
    // Before any page is handed out: the warm-up's steps write the pools' first pages.
    runner::WarmupLimits wl;
    wl.max_seqs = kv.max_running_seqs;
    wl.max_tokens = ro.max_tokens;
    wl.max_logit_rows = ro.max_logit_rows > 0 ? ro.max_logit_rows : ro.max_seqs;
    wl.max_model_len = kv.max_model_len;
    wl.both_sample_modes = world > 1;  // a group's greedy steps exchange picks, not logits
    runner::SetPools(kv.layout, &wl);
    const std::vector<runner::WarmupStep> steps = runner::PlanWarmup(
        wl, be.LinearTuningRows(ro.max_tokens), ro.enable_graphs && be.SupportsGraphs());
    const auto warm_start = Clock::now();
    GANNET_RETURN_IF_ERROR(runner::WarmUp(p->runner.get(), kv.layout, steps,
                                          static_cast<int32_t>(p->config.text.vocab_size)));
    GANNET_LOG_INFO("engine: warmed up {} step shapes in {:.1f} s", steps.size(),
                    std::chrono::duration<double>(Clock::now() - warm_start).count());
  }
  kv::KvManagerOptions ko;
  ko.enable_prefix_cache = cfg.enable_prefix_cache;
  GANNET_ASSIGN_OR_RETURN(p->kv, kv::KvManager::Create(kv.layout, ko));

  p->max_running_seqs = kv.max_running_seqs;
  p->max_step_tokens = limits.max_step_tokens;
  p->max_prefill_tokens_while_decoding = limits.max_prefill_tokens_while_decoding;
  p->max_model_len = kv.max_model_len;
  p->page_size = limits.page_size;
  if (!cpu && world == 1) {
    // The device holds the weights: the host copy goes back (safetensors.h).
    if (p->checkpoint != nullptr) p->checkpoint->ReleaseData();
    if (p->draft.checkpoint != nullptr) p->draft.checkpoint->ReleaseData();
  }
  GANNET_ASSIGN_OR_RETURN(
      p->vision, LoadVisionPart(p->config, cfg.model_dir, p->checkpoint == nullptr, world, &be));
  p->load_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  GANNET_LOG_INFO(
      "engine: {} on {}: up to {} running sequences of {} tokens, KV {}, loaded in "
      "{:.1f} s",
      model::ModelLabel(p->config), device, p->max_running_seqs, p->max_model_len,
      FormatBytes(kv.layout.TotalBytes()), p->load_seconds);
  return p;
}

}  // namespace gannet::engine
