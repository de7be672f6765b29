// The extern "C" entries for status, versions, logging, engines, model info and statistics
// (requests and events: capi_request.cc; tokenizers: capi_tokenizer.cc). Argument checks,
// versioned-struct reading and the exception firewall live here; the work is in lib/engine.
#include <cstdio>
#include <cstring>
#include <string>

#include "lib/capi/capi_internal.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/common/utf8.h"
#include "lib/engine/model_info.h"
#include "lib/parallel/nccl_collectives.h"

namespace gannet::capi {
namespace {

thread_local std::string t_last_error;

}  // namespace

gannet_status_t ToStatus(const absl::Status& st) {
  if (IsDeviceLost(st)) return GANNET_ERR_DEVICE_LOST;
  switch (st.code()) {
    case absl::StatusCode::kOk:
      return GANNET_OK;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return GANNET_ERR_INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound:
      return GANNET_ERR_NOT_FOUND;
    case absl::StatusCode::kResourceExhausted:
      return GANNET_ERR_RESOURCE_EXHAUSTED;
    case absl::StatusCode::kUnimplemented:
      return GANNET_ERR_UNIMPLEMENTED;
    case absl::StatusCode::kDataLoss:
      return GANNET_ERR_DATA_LOSS;
    case absl::StatusCode::kCancelled:
      return GANNET_ERR_CANCELLED;
    case absl::StatusCode::kDeadlineExceeded:
      return GANNET_ERR_DEADLINE_EXCEEDED;
    case absl::StatusCode::kFailedPrecondition:
      return GANNET_ERR_FAILED_PRECONDITION;
    case absl::StatusCode::kUnavailable:
      return GANNET_ERR_NOT_FOUND;  // no usable device
    default:
      return GANNET_ERR_INTERNAL;
  }
}

gannet_status_t Fail(gannet_status_t code, std::string message) {
  // Messages quote file contents and caller strings: never hand raw bytes to a terminal or log.
  t_last_error = EscapeForMessage(message, kMaxMessageBytes);
  return code;
}

gannet_status_t Fail(const absl::Status& st) {
  return Fail(ToStatus(st), std::string(st.message()));
}

const char* LastError() { return t_last_error.c_str(); }

}  // namespace gannet::capi

using gannet::capi::Fail;
using gannet::capi::Guard;
using gannet::capi::Str;

extern "C" {

const char* gannet_status_string(gannet_status_t status) {
  switch (status) {
    case GANNET_OK:
      return "GANNET_OK";
    case GANNET_ERR_INVALID_ARGUMENT:
      return "GANNET_ERR_INVALID_ARGUMENT";
    case GANNET_ERR_NOT_FOUND:
      return "GANNET_ERR_NOT_FOUND";
    case GANNET_ERR_OUT_OF_MEMORY:
      return "GANNET_ERR_OUT_OF_MEMORY";
    case GANNET_ERR_RESOURCE_EXHAUSTED:
      return "GANNET_ERR_RESOURCE_EXHAUSTED";
    case GANNET_ERR_UNIMPLEMENTED:
      return "GANNET_ERR_UNIMPLEMENTED";
    case GANNET_ERR_DATA_LOSS:
      return "GANNET_ERR_DATA_LOSS";
    case GANNET_ERR_DEVICE_LOST:
      return "GANNET_ERR_DEVICE_LOST";
    case GANNET_ERR_CANCELLED:
      return "GANNET_ERR_CANCELLED";
    case GANNET_ERR_DEADLINE_EXCEEDED:
      return "GANNET_ERR_DEADLINE_EXCEEDED";
    case GANNET_ERR_FAILED_PRECONDITION:
      return "GANNET_ERR_FAILED_PRECONDITION";
    case GANNET_ERR_INTERNAL:
      return "GANNET_ERR_INTERNAL";
    default:
      return "GANNET_ERR_UNKNOWN";
  }
}

const char* gannet_last_error_message(void) { return gannet::capi::LastError(); }

#define GANNET_STR2(x) #x
#define GANNET_STR(x) GANNET_STR2(x)
const char* gannet_version(void) {
  return GANNET_STR(GANNET_VERSION_MAJOR) "." GANNET_STR(GANNET_VERSION_MINOR) "." GANNET_STR(
      GANNET_VERSION_PATCH);
}
int32_t gannet_version_code(void) { return GANNET_VERSION_CODE; }
int32_t gannet_abi_version(void) { return GANNET_ABI_VERSION; }

void gannet_set_log_callback(gannet_log_fn fn, void* user_data, int32_t min_level) {
  gannet::SetLogSink(fn, user_data);
  if (min_level >= GANNET_LOG_LEVEL_DEBUG && min_level <= GANNET_LOG_LEVEL_OFF) {
    gannet::SetLogLevel(static_cast<gannet::LogLevel>(min_level));
  }
}

gannet_status_t gannet_engine_create(const gannet_engine_config_t* config,
                                     gannet_engine_t** engine_out) {
  return Guard("gannet_engine_create", [&]() -> gannet_status_t {
    if (config == nullptr || engine_out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_engine_create: config and engine_out are required");
    }
    gannet_engine_config_t c;
    if (!gannet::capi::ReadVersioned(config, gannet_engine_config_t GANNET_ENGINE_CONFIG_INIT, &c,
                                     "gannet_engine_config_t")) {
      return GANNET_ERR_INVALID_ARGUMENT;
    }
    if (c.model_dir == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_create: model_dir is NULL");
    }
    const struct {
      const char* name;
      int32_t value;
    } fields[] = {{"device_id", c.device_id},
                  {"max_running_seqs", c.max_running_seqs},
                  {"max_step_tokens", c.max_step_tokens},
                  {"max_model_len", c.max_model_len},
                  {"page_size", c.page_size},
                  {"kv_sliding_pages", c.kv_sliding_pages},
                  {"kv_full_pages", c.kv_full_pages},
                  {"num_threads", c.num_threads},
                  {"max_queued_requests", c.max_queued_requests},
                  {"num_speculative_tokens", c.num_speculative_tokens},
                  {"tensor_parallel_size", c.tensor_parallel_size},
                  {"num_device_ids", c.num_device_ids}};
    for (const auto& f : fields) {
      if (f.value < 0) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT,
                    fmt::format("gannet_engine_create: {} is {}; it must be >= 0 (0 = default)",
                                f.name, f.value));
      }
    }
    if (c.max_undelivered_tokens < 0 || c.max_undelivered_tokens_per_request < 0) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("gannet_engine_create: max_undelivered_tokens is {} and "
                              "max_undelivered_tokens_per_request {}; they must be >= 0 "
                              "(0 = default)",
                              c.max_undelivered_tokens, c.max_undelivered_tokens_per_request));
    }
    if (c.kv_memory_bytes < 0) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_create: kv_memory_bytes < 0");
    }
    if (c.max_prefill_tokens_while_decoding < 0 ||
        c.max_prefill_tokens_while_decoding > INT32_MAX) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("gannet_engine_create: max_prefill_tokens_while_decoding is {}; it "
                              "must be 0 (default) to max_step_tokens",
                              c.max_prefill_tokens_while_decoding));
    }
    if (c.num_threads > 1024) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("gannet_engine_create: num_threads {} is above 1024", c.num_threads));
    }
    if (c.num_device_ids > 8 || (c.num_device_ids > 0 && c.device_ids == nullptr)) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("gannet_engine_create: num_device_ids is {} with device_ids {}; at "
                              "most 8, and the array is required when it is > 0",
                              c.num_device_ids, c.device_ids == nullptr ? "NULL" : "set"));
    }
    if (c.tp_id != nullptr &&
        (c.tp_rank < 0 || c.tensor_parallel_size < 1 || c.tp_rank >= c.tensor_parallel_size)) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("gannet_engine_create: tp_rank {} of tensor_parallel_size {}: a "
                              "multi-process group needs 0 <= tp_rank < tensor_parallel_size",
                              c.tp_rank, c.tensor_parallel_size));
    }
    if (c.kv_separate_k_eq_v != 0 && c.kv_separate_k_eq_v != 1) {
      return Fail(
          GANNET_ERR_INVALID_ARGUMENT,
          fmt::format("gannet_engine_create: kv_separate_k_eq_v is {}; 0 (one K=V array, the "
                      "default) or 1 (K and V apart)",
                      c.kv_separate_k_eq_v));
    }
    if (c.startup_warmup < -1 || c.startup_warmup > 1) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("gannet_engine_create: startup_warmup is {}; 1 (warm up), 0 (the "
                              "default: off) or -1 (off)",
                              c.startup_warmup));
    }
    gannet::engine::EngineConfig ec;
    ec.model_dir = c.model_dir;
    ec.tensor_parallel_size = c.tensor_parallel_size;
    if (c.tp_id != nullptr) {
      ec.tp_rank = c.tp_rank;
      ec.tp_group_id.assign(reinterpret_cast<const char*>(c.tp_id->bytes), sizeof c.tp_id->bytes);
    }
    for (int32_t i = 0; i < c.num_device_ids; ++i) {
      if (c.device_ids[i] < 0) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT,
                    fmt::format("gannet_engine_create: device_ids[{}] is {}", i, c.device_ids[i]));
      }
      ec.device_ids.push_back(c.device_ids[i]);
    }
    ec.backend = Str(c.backend);
    ec.device_id = c.device_id;
    ec.max_running_seqs = c.max_running_seqs;
    ec.max_step_tokens = c.max_step_tokens;
    ec.max_model_len = c.max_model_len;
    ec.page_size = c.page_size;
    ec.kv_memory_bytes = c.kv_memory_bytes;
    ec.kv_sliding_pages = c.kv_sliding_pages;
    ec.kv_full_pages = c.kv_full_pages;
    ec.enable_prefix_cache = c.disable_prefix_cache == 0;
    ec.num_threads = c.num_threads;
    ec.max_queued_requests = c.max_queued_requests;
    ec.max_undelivered_tokens = c.max_undelivered_tokens;
    ec.max_undelivered_tokens_per_request = c.max_undelivered_tokens_per_request;
    ec.enable_cuda_graphs = c.disable_cuda_graphs == 0;
    ec.load_format = Str(c.load_format);
    ec.kv_cache_dtype = Str(c.kv_cache_dtype);
    ec.compute_dtype = Str(c.compute_dtype);
    ec.weight_dtype = Str(c.weight_dtype);
    ec.kv_separate_k_eq_v = c.kv_separate_k_eq_v != 0;
    ec.startup_warmup = c.startup_warmup == 1;
    ec.draft_model_dir = Str(c.draft_model_dir);
    ec.num_speculative_tokens = c.num_speculative_tokens;
    ec.max_prefill_tokens_while_decoding = static_cast<int>(c.max_prefill_tokens_while_decoding);
    if (c.progress_callback != nullptr) {
      gannet_progress_fn fn = c.progress_callback;
      void* user = c.progress_user_data;
      ec.progress = [fn, user](const gannet::engine::LoadProgress& p) {
        gannet_progress_t v{};
        v.struct_size = sizeof(v);
        v.stage = p.stage;
        v.bytes_done = p.bytes_done;
        v.bytes_total = p.bytes_total;
        v.fraction = p.bytes_total > 0 ? static_cast<double>(p.bytes_done) / p.bytes_total : 1.0;
        v.elapsed_s = p.elapsed_s;
        v.bytes_per_s = p.elapsed_s > 0 ? p.bytes_done / p.elapsed_s : 0.0;
        v.eta_s = v.bytes_per_s > 0 ? (p.bytes_total - p.bytes_done) / v.bytes_per_s : -1.0;
        return fn(user, &v) == 0;
      };
    }
    auto engine = gannet::engine::Engine::Create(ec);
    if (!engine.ok()) return Fail(engine.status());
    auto* handle = new gannet_engine();
    handle->engine = std::move(*engine);
    handle->tokenizer.tokenizer = handle->engine->tokenizer();
    handle->tokenizer.variant = handle->engine->variant();
    handle->tokenizer.chat = handle->engine->chat_format();
    *engine_out = handle;
    return GANNET_OK;
  });
}

gannet_status_t gannet_tp_create_id(gannet_tp_id_t* id_out) {
  return Guard("gannet_tp_create_id", [&]() -> gannet_status_t {
    if (id_out == nullptr)
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_tp_create_id: id_out is NULL");
    auto id = gannet::parallel::CreateNcclId();
    if (!id.ok()) return Fail(id.status());
    static_assert(sizeof(id_out->bytes) == gannet::parallel::kTpIdBytes);
    std::memcpy(id_out->bytes, id->data(), sizeof id_out->bytes);
    return GANNET_OK;
  });
}

gannet_status_t gannet_engine_serve(gannet_engine_t* engine, int32_t timeout_ms) {
  return Guard("gannet_engine_serve", [&]() -> gannet_status_t {
    if (engine == nullptr)
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_serve: engine is NULL");
    if (timeout_ms < -1) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("gannet_engine_serve: timeout_ms is {}; -1 or >= 0", timeout_ms));
    }
    absl::Status st = engine->engine->Serve(timeout_ms < 0 ? -1.0 : timeout_ms / 1000.0);
    if (!st.ok()) return Fail(st);
    return GANNET_OK;
  });
}

void gannet_engine_destroy(gannet_engine_t* engine) {
  if (engine == nullptr) return;
  try {
    delete engine;
  } catch (...) {
    // Destruction never throws across the ABI.
  }
}

gannet_status_t gannet_model_info(const char* model_dir, gannet_model_info_t* out) {
  return Guard("gannet_model_info", [&]() -> gannet_status_t {
    if (model_dir == nullptr || out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_model_info: model_dir and info_out are required");
    }
    auto info = gannet::engine::ReadModelInfo(model_dir);
    if (!info.ok()) return Fail(info.status());
    gannet_model_info_t full{};
    full.struct_size = sizeof(full);
    gannet::capi::CopyString(info->model_type, full.model_type);
    gannet::capi::CopyString(info->variant, full.variant);
    gannet::capi::CopyString(info->dtypes, full.dtypes);
    full.num_parameters = info->num_parameters;
    full.weight_bytes = info->weight_bytes;
    full.skipped_tower_bytes = info->skipped_tower_bytes;
    full.num_shards = info->num_shards;
    full.has_tokenizer = info->has_tokenizer ? 1 : 0;
    full.num_layers = info->num_layers;
    full.num_sliding_layers = info->num_sliding_layers;
    full.num_full_layers = info->num_full_layers;
    full.num_kv_shared_layers = info->num_kv_shared_layers;
    full.hidden_size = info->hidden_size;
    full.vocab_size = info->vocab_size;
    full.max_position_embeddings = info->max_position_embeddings;
    full.sliding_window = info->sliding_window;
    full.num_attention_heads = info->num_attention_heads;
    full.num_kv_heads = info->num_kv_heads;
    full.num_full_kv_heads = info->num_full_kv_heads;
    full.head_dim = info->head_dim;
    full.full_head_dim = info->full_head_dim;
    full.num_experts = info->num_experts;
    full.top_k_experts = info->top_k_experts;
    full.kv_bytes_per_token_sliding = info->kv_bytes_per_token[0];
    full.kv_bytes_per_token_full = info->kv_bytes_per_token[1];
    gannet::capi::CopyString(info->weight_format, full.weight_format);
    full.weight_bytes_attention = info->bytes_attention;
    full.weight_bytes_mlp = info->bytes_mlp;
    full.weight_bytes_experts = info->bytes_experts;
    full.weight_bytes_embeddings = info->bytes_embeddings;
    full.weight_bytes_other = info->bytes_other;
    gannet::capi::CopyString(info->kept_plain, full.kept_plain);
    full.has_vision = info->has_vision ? 1 : 0;
    full.image_token_id = info->image_token_id;
    return gannet::capi::WriteVersioned(full, out, "gannet_model_info_t");
  });
}

gannet_status_t gannet_engine_get_stats(gannet_engine_t* engine, gannet_engine_stats_t* out) {
  return Guard("gannet_engine_get_stats", [&]() -> gannet_status_t {
    if (engine == nullptr || out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_engine_get_stats: engine and stats_out are required");
    }
    const gannet::engine::EngineStats s = engine->engine->GetStats();
    gannet_engine_stats_t full{};
    full.struct_size = sizeof(full);
    full.num_running = s.num_running;
    full.num_waiting = s.num_waiting;
    for (int g = 0; g < 2; ++g) {
      full.kv_pages_total[g] = s.kv_pages_total[g];
      full.kv_pages_used[g] = s.kv_pages_used[g];
      full.kv_pages_cached[g] = s.kv_pages_cached[g];
      full.kv_pages_free[g] = s.kv_pages_free[g];
      full.kv_bytes_per_token[g] = s.kv_bytes_per_token[g];
    }
    full.page_size = s.page_size;
    full.prefix_cache_hit_tokens = s.prefix_cache_hit_tokens;
    full.prefix_cache_query_tokens = s.prefix_cache_query_tokens;
    full.prefix_cache_hit_rate = s.prefix_cache_hit_rate;
    full.total_prompt_tokens = s.total_prompt_tokens;
    full.total_generated_tokens = s.total_generated_tokens;
    full.num_preemptions = s.num_preemptions;
    full.num_steps = s.num_steps;
    full.prompt_tokens_per_s = s.prompt_tokens_per_s;
    full.generated_tokens_per_s = s.generated_tokens_per_s;
    full.weight_bytes = s.weight_bytes;
    full.sliding_window = s.sliding_window;
    full.max_model_len = s.max_model_len;
    full.max_running_seqs = s.max_running_seqs;
    full.device_id = s.device_id;
    full.kv_bytes = s.kv_bytes;
    full.device_memory_bytes = s.device_memory_bytes;
    full.load_seconds = s.load_seconds;
    gannet::capi::CopyString(s.backend, full.backend);
    gannet::capi::CopyString(s.device_name, full.device_name);
    gannet::capi::CopyString(s.backend_fallback, full.backend_fallback);
    gannet::capi::CopyString(s.kv_cache_dtype, full.kv_cache_dtype);
    gannet::capi::CopyString(s.compute_dtype, full.compute_dtype);
    full.num_speculative_tokens = s.num_speculative_tokens;
    full.spec_verify_chunks = s.spec_verify_chunks;
    full.spec_draft_tokens = s.spec_draft_tokens;
    full.spec_accepted_tokens = s.spec_accepted_tokens;
    full.spec_mean_accepted_length = s.spec_mean_accepted_length;
    full.spec_draft_rounds = s.spec_draft_rounds;
    full.timed_decode_steps = s.timed_decode_steps;
    full.timed_decode_seconds = s.timed_decode_seconds;
    full.timed_decode_device_seconds = s.timed_decode_device_seconds;
    return gannet::capi::WriteVersioned(full, out, "gannet_engine_stats_t");
  });
}

}  // extern "C"
