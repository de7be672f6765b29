// The engine's limits and KV cache size, decided from the user's settings, the model and the
// memory the device has left (docs/kv-memory.md; docs/loading-and-limits.md).
//
// ResolveLimits fills in the defaults a user did not set and remembers which were set.
// SizeKvCache turns the memory left after the weights and activations into a KV budget, plans
// the pools (kv::PlanKvPoolsWithDefaults: defaults that cannot fit are lowered, with a warning;
// user settings that cannot fit are errors naming the setting) and builds the one KV layout the
// KV manager and the runner's storage share. Pure functions: the unit tests replay them for every
// variant on devices from 16 to 288 GB without a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "lib/engine/engine.h"
#include "lib/kv/kv_layout.h"
#include "lib/kv/kv_pool_plan.h"
#include "lib/model/config.h"
#include "lib/runner/model_runner.h"

namespace gannet::engine {

struct EngineLimits {
  int32_t max_running_seqs = 0;
  int32_t max_step_tokens = 0;
  int32_t max_prefill_tokens_while_decoding = 0;  // 0: no limit beyond max_step_tokens
  int64_t max_model_len = 0;
  int32_t page_size = 0;
  int64_t kv_memory_bytes = 0;  // 0 = from the free device memory
  kv::PerGroup<int32_t> kv_pages_override = {0, 0};
  kv::KvQuant kv_quant = kv::KvQuant::kNone;  // EngineConfig::kv_cache_dtype
  bool k_eq_v_single_store = true;            // !EngineConfig::kv_separate_k_eq_v
  bool user_running_seqs = false;
  bool user_max_model_len = false;
};

// Defaults: CPU 16 running sequences and 256 tokens per step, CUDA 64 per device of the
// tensor-parallel group (`world` devices) and 2048; max_model_len = min(model, 32768); page size
// 16. A device of a group holds 1/world of every sequence's KV (its share of the heads) and of
// its logits, so the per-device reservation that sizes the default (every running sequence's
// sliding window) covers world times the sequences; on the CPU the ranks share one memory.
// InvalidArgument for settings that contradict each other or the model (max_model_len past
// max_position_embeddings, a step budget below the running limit, a page size outside
// [1, kv::kMaxPageSize], a kv_cache_dtype other than bf16 / fp8 / fp8_e4m3).
absl::StatusOr<EngineLimits> ResolveLimits(const EngineConfig& config,
                                           const model::TextConfig& model, bool cpu, int world);

// Runner options for these limits (the runner is created before the KV cache is sized).
runner::RunnerOptions RunnerOptionsFor(const EngineLimits& limits);

// Device memory kept out of the KV budget for what grows after start-up: kernel workspaces
// (split-KV partials, MoE scratch, cuBLASLt), CUDA graphs and the runtime: 10% of the free
// memory, at least 1 GiB.
int64_t KvBudgetFromFreeMemory(int64_t free_bytes);

// ResourceExhausted, before anything is loaded, when the weights and activations cannot fit in
// the device's free memory (with the numbers and what to do, which differs for the host memory
// of the CPU backend: `host`).
absl::Status CheckWeightsFit(int64_t weight_bytes, int64_t activation_bytes, int64_t free_bytes,
                             int64_t total_bytes, const std::string& device, bool host);

struct KvSizing {
  kv::KvLayout layout;
  kv::KvPoolPlan plan;
  int32_t max_running_seqs = 0;  // possibly lowered
  int64_t max_model_len = 0;     // possibly lowered
  int64_t budget_bytes = 0;
  std::string warning;  // what was lowered, with the numbers; empty if nothing
};

// Where the KV cache will live. Device: the budget is what the weights and activations left,
// less the workspace reserve. Host (the CPU backend, lazily zeroed pages): what the limits use at
// once, every running sequence at full length (the sliding layers only their window; what
// finished sequences leave is prefix cache), at most max(1 GiB, a quarter of RAM).
struct KvMemory {
  bool host = false;
  int64_t free_after_runner = 0;  // device memory free once weights and activations are allocated
  int64_t host_total = 0;         // physical RAM (0 = unknown: 1 GiB)
};

// `native_dtype_bytes`: the backend's KV element size, used unless limits.kv_quant says FP8.
absl::StatusOr<KvSizing> SizeKvCache(const model::TextConfig& model, const EngineLimits& limits,
                                     const KvMemory& memory, int32_t native_dtype_bytes);

}  // namespace gannet::engine
