#include "lib/engine/kv_sizing.h"

#include <algorithm>

#include "lib/common/status.h"
#include "lib/common/units.h"
#include "lib/runner/kv_storage.h"

namespace gannet::engine {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

}  // namespace

absl::StatusOr<EngineLimits> ResolveLimits(const EngineConfig& cfg, const model::TextConfig& c,
                                           bool cpu, int world) {
  EngineLimits l;
  l.user_running_seqs = cfg.max_running_seqs > 0;
  l.user_max_model_len = cfg.max_model_len > 0;
  l.max_running_seqs =
      cfg.max_running_seqs > 0 ? cfg.max_running_seqs : (cpu ? 16 : 64 * std::max(1, world));
  l.max_step_tokens = cfg.max_step_tokens > 0 ? cfg.max_step_tokens : (cpu ? 256 : 2048);
  l.max_model_len = cfg.max_model_len > 0 ? cfg.max_model_len
                                          : std::min<int64_t>(c.max_position_embeddings, 32768);
  l.page_size = cfg.page_size > 0 ? cfg.page_size : 16;
  l.kv_memory_bytes = cfg.kv_memory_bytes;
  l.kv_pages_override = {cfg.kv_sliding_pages, cfg.kv_full_pages};
  l.k_eq_v_single_store = !cfg.kv_separate_k_eq_v;
  if (cfg.kv_cache_dtype == "fp8" || cfg.kv_cache_dtype == "fp8_e4m3") {
    l.kv_quant = kv::KvQuant::kFp8E4M3;
  } else if (!cfg.kv_cache_dtype.empty() && cfg.kv_cache_dtype != "bf16" &&
             cfg.kv_cache_dtype != "auto") {
    return InvalidArgumentError(
        "engine: kv_cache_dtype '{}' is not one of bf16 (the default), fp8, fp8_e4m3",
        cfg.kv_cache_dtype);
  }
  if (l.max_model_len > c.max_position_embeddings) {
    return InvalidArgumentError(
        "engine: max_model_len {} exceeds the model's max_position_embeddings {}", l.max_model_len,
        c.max_position_embeddings);
  }
  if (l.max_model_len < 2) {
    return InvalidArgumentError(
        "engine: max_model_len {} is too small: a sequence needs at least one prompt token and "
        "one generated token",
        l.max_model_len);
  }
  if (l.page_size > kv::kMaxPageSize) {
    return InvalidArgumentError("engine: page_size {} is above the maximum {}", l.page_size,
                                kv::kMaxPageSize);
  }
  if (!l.user_running_seqs && l.max_step_tokens < l.max_running_seqs) {
    l.max_running_seqs = l.max_step_tokens;  // a small explicit step budget bounds the default
  }
  if (l.max_step_tokens < l.max_running_seqs) {
    return InvalidArgumentError(
        "engine: max_step_tokens ({}) must be at least max_running_seqs ({}) so every running "
        "sequence can decode each step",
        l.max_step_tokens, l.max_running_seqs);
  }
  if (cfg.max_prefill_tokens_while_decoding > l.max_step_tokens) {
    return InvalidArgumentError(
        "engine: max_prefill_tokens_while_decoding ({}) exceeds max_step_tokens ({}), which "
        "bounds every step; lower it or raise max_step_tokens",
        cfg.max_prefill_tokens_while_decoding, l.max_step_tokens);
  }
  // No separate limit by default: in a saturated closed loop the prompt work has to be done
  // anyway, and smaller chunks only run it less efficiently (31B on an H200, 64 x 1000/200: a
  // 512-token cap made TPOT 9% worse and throughput 10% lower than none;
  // docs/results-log/general.md). A small cap trades throughput and time to first token for time
  // per output token.
  l.max_prefill_tokens_while_decoding = cfg.max_prefill_tokens_while_decoding;
  return l;
}

runner::RunnerOptions RunnerOptionsFor(const EngineLimits& l) {
  runner::RunnerOptions ro;
  ro.max_tokens = l.max_step_tokens;
  ro.max_seqs = l.max_running_seqs;
  ro.max_logit_rows = l.max_running_seqs;
  ro.page_size = l.page_size;
  ro.max_pages_per_seq = static_cast<int>((l.max_model_len + l.page_size - 1) / l.page_size);
  return ro;
}

int64_t KvBudgetFromFreeMemory(int64_t free_bytes) {
  return free_bytes - std::max(free_bytes / 10, kGiB);
}

absl::Status CheckWeightsFit(int64_t weight_bytes, int64_t activation_bytes, int64_t free_bytes,
                             int64_t total_bytes, const std::string& device, bool host) {
  const int64_t need = weight_bytes + activation_bytes + kGiB;  // + the smallest KV budget
  if (free_bytes <= 0 || need <= free_bytes) return absl::OkStatus();
  // What helps depends on where it runs: the CPU backend is no way out of the CPU's own memory.
  const std::string_view what_to_do =
      host ? "Use a machine with more memory, a smaller model, or fewer running sequences and "
             "a smaller step (max_running_seqs, max_step_tokens: the activations)"
           : "Use a device with more memory, split the model over several GPUs "
             "(tensor_parallel_size), or the cpu backend";
  return ResourceExhaustedError(
      "engine: the model needs {} of {} memory before any KV cache (weights {}, activations "
      "{}, 1 GiB reserve) but {} has {} free of {}. {}",
      FormatBytes(need), host ? "host" : "device", FormatBytes(weight_bytes),
      FormatBytes(activation_bytes), device, FormatBytes(free_bytes), FormatBytes(total_bytes),
      what_to_do);
}

absl::StatusOr<KvSizing> SizeKvCache(const model::TextConfig& c, const EngineLimits& l,
                                     const KvMemory& memory, int32_t native_dtype_bytes) {
  std::vector<kv::KvLayerGeometry> layers = runner::KvLayersOf(c, l.k_eq_v_single_store);
  const int32_t dtype_bytes = kv::KvElementBytes(l.kv_quant, native_dtype_bytes);
  kv::KvPlanRequest req;
  kv::KvPoolPlanOptions& po = req.options;
  po.bytes_per_token = kv::KvBytesPerToken(layers, dtype_bytes, l.kv_quant);
  po.sliding_window = c.sliding_window;
  po.page_size = l.page_size;
  po.max_running_seqs = l.max_running_seqs;
  po.max_step_tokens = l.max_step_tokens;
  po.max_seq_len = l.max_model_len;
  po.num_pages_override = l.kv_pages_override;
  po.budget_bytes = l.kv_memory_bytes;
  req.user_running_seqs = l.user_running_seqs;
  req.user_max_seq_len = l.user_max_model_len;
  req.user_budget = l.kv_memory_bytes > 0;
  if (po.budget_bytes <= 0) {
    if (memory.host) {
      // What the limits can use at once: the sliding pool's worst case (every running
      // sequence's window) and every running sequence at full length in the full pool. Pages
      // are zeroed lazily, but a budget far past that only misleads: counting the sliding
      // layers at full length, twice over, reserved 2 GiB for the 7 MB tiny model.
      const int64_t cap = std::max(kGiB, memory.host_total / 4);
      const int64_t full_seq_bytes =
          (l.max_model_len + l.page_size - 1) / l.page_size * l.page_size * po.bytes_per_token[1];
      po.budget_bytes = std::min<int64_t>(
          cap, kv::KvMinimumBytes(po) + (l.max_running_seqs - 1) * full_seq_bytes);
      req.budget_origin = fmt::format(
          "the CPU budget: every running sequence at full length (sliding layers: their "
          "window), at most {}",
          FormatBytes(cap));
    } else {
      po.budget_bytes = KvBudgetFromFreeMemory(memory.free_after_runner);
      req.budget_origin =
          fmt::format("what {} of free device memory leaves after a workspace reserve",
                      FormatBytes(memory.free_after_runner));
      if (po.budget_bytes <= 0) {
        return ResourceExhaustedError(
            "engine: after the weights and activations only {} of device memory is free; the KV "
            "cache needs more than the {} kept for workspaces",
            FormatBytes(memory.free_after_runner), FormatBytes(kGiB));
      }
    }
  }
  GANNET_ASSIGN_OR_RETURN(kv::KvPlanResult planned, kv::PlanKvPoolsWithDefaults(req));
  KvSizing s;
  s.plan = std::move(planned.plan);
  s.max_running_seqs = planned.max_running_seqs;
  s.max_model_len = planned.max_seq_len;
  s.budget_bytes = po.budget_bytes;
  s.warning = std::move(planned.warning);
  GANNET_ASSIGN_OR_RETURN(
      s.layout, kv::MakeKvLayout(std::move(layers), l.page_size, c.sliding_window, dtype_bytes,
                                 s.plan.num_pages(), l.kv_quant));
  return s;
}

}  // namespace gannet::engine
