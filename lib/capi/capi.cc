// Every extern "C" entry of include/gannet/gannet.h: argument checks, versioned-struct reading,
// the exception firewall (no C++ exception crosses the ABI) and status mapping. The real work is
// in lib/engine.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "gannet/gannet.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/engine/engine.h"
#include "lib/engine/model_info.h"

struct gannet_engine {
  std::unique_ptr<gannet::engine::Engine> engine;
  // Events handed out by the last poll, and the C views of them.
  std::vector<gannet::engine::Event> polled;
  std::vector<gannet_event_t> views;
};

namespace {

thread_local std::string t_last_error;

gannet_status_t ToStatus(const absl::Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kOk: return GANNET_OK;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return GANNET_ERR_INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound: return GANNET_ERR_NOT_FOUND;
    case absl::StatusCode::kResourceExhausted: return GANNET_ERR_RESOURCE_EXHAUSTED;
    case absl::StatusCode::kUnimplemented: return GANNET_ERR_UNIMPLEMENTED;
    case absl::StatusCode::kDataLoss: return GANNET_ERR_DATA_LOSS;
    case absl::StatusCode::kCancelled: return GANNET_ERR_CANCELLED;
    case absl::StatusCode::kDeadlineExceeded: return GANNET_ERR_DEADLINE_EXCEEDED;
    case absl::StatusCode::kFailedPrecondition: return GANNET_ERR_FAILED_PRECONDITION;
    case absl::StatusCode::kInternal:
      return gannet::IsDeviceLost(st) ? GANNET_ERR_DEVICE_LOST : GANNET_ERR_INTERNAL;
    default: return GANNET_ERR_INTERNAL;
  }
}

gannet_status_t Fail(gannet_status_t code, std::string message) {
  t_last_error = std::move(message);
  return code;
}

gannet_status_t Fail(const absl::Status& st) { return Fail(ToStatus(st), std::string(st.message())); }

// Runs fn with the exception firewall: bad_alloc -> OUT_OF_MEMORY, anything else -> INTERNAL.
template <typename Fn>
gannet_status_t Guard(const char* where, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Fail(GANNET_ERR_OUT_OF_MEMORY, std::string(where) + ": out of memory");
  } catch (const std::exception& e) {
    return Fail(GANNET_ERR_INTERNAL, std::string(where) + ": " + e.what());
  } catch (...) {
    return Fail(GANNET_ERR_INTERNAL, std::string(where) + ": unknown exception");
  }
}

// Reads a versioned input struct: copies what the caller's struct_size covers into a
// default-initialised current struct. Rejects sizes that cannot be ours.
template <typename T>
bool ReadVersioned(const T* in, const T& defaults, T* out, const char* what) {
  *out = defaults;
  const uint32_t size = in->struct_size;
  if (size < sizeof(uint32_t) + 4 || size > (1u << 16)) {
    Fail(GANNET_ERR_INVALID_ARGUMENT,
         std::string(what) + ".struct_size is " + std::to_string(size) +
             ": initialise the struct with its _INIT macro");
    return false;
  }
  std::memcpy(out, in, std::min<size_t>(size, sizeof(T)));
  out->struct_size = sizeof(T);
  return true;
}

std::string Str(const char* s) { return s ? std::string(s) : std::string(); }

}  // namespace

extern "C" {

const char* gannet_status_string(gannet_status_t status) {
  switch (status) {
    case GANNET_OK: return "GANNET_OK";
    case GANNET_ERR_INVALID_ARGUMENT: return "GANNET_ERR_INVALID_ARGUMENT";
    case GANNET_ERR_NOT_FOUND: return "GANNET_ERR_NOT_FOUND";
    case GANNET_ERR_OUT_OF_MEMORY: return "GANNET_ERR_OUT_OF_MEMORY";
    case GANNET_ERR_RESOURCE_EXHAUSTED: return "GANNET_ERR_RESOURCE_EXHAUSTED";
    case GANNET_ERR_UNIMPLEMENTED: return "GANNET_ERR_UNIMPLEMENTED";
    case GANNET_ERR_DATA_LOSS: return "GANNET_ERR_DATA_LOSS";
    case GANNET_ERR_DEVICE_LOST: return "GANNET_ERR_DEVICE_LOST";
    case GANNET_ERR_CANCELLED: return "GANNET_ERR_CANCELLED";
    case GANNET_ERR_DEADLINE_EXCEEDED: return "GANNET_ERR_DEADLINE_EXCEEDED";
    case GANNET_ERR_FAILED_PRECONDITION: return "GANNET_ERR_FAILED_PRECONDITION";
    case GANNET_ERR_INTERNAL: return "GANNET_ERR_INTERNAL";
    default: return "GANNET_ERR_UNKNOWN";
  }
}

const char* gannet_last_error_message(void) { return t_last_error.c_str(); }

const char* gannet_version(void) { return "0.1.0"; }

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
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_create: config and engine_out are required");
    }
    gannet_engine_config_t c;
    if (!ReadVersioned(config, gannet_engine_config_t GANNET_ENGINE_CONFIG_INIT, &c,
                       "gannet_engine_config_t")) {
      return GANNET_ERR_INVALID_ARGUMENT;
    }
    if (c.model_dir == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_create: model_dir is NULL");
    }
    for (int32_t v : {c.device_id, c.max_running_seqs, c.max_step_tokens, c.max_model_len,
                      c.page_size, c.kv_sliding_pages, c.kv_full_pages, c.num_threads,
                      c.max_queued_requests}) {
      if (v < 0) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT,
                    "gannet_engine_create: size and count fields must be >= 0");
      }
    }
    if (c.kv_memory_bytes < 0) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_create: kv_memory_bytes < 0");
    }
    gannet::engine::EngineConfig ec;
    ec.model_dir = c.model_dir;
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
    ec.enable_cuda_graphs = c.disable_cuda_graphs == 0;
    ec.load_format = Str(c.load_format);
    if (c.progress_callback != nullptr) {
      gannet_progress_fn fn = c.progress_callback;
      void* user = c.progress_user_data;
      ec.progress = [fn, user](const gannet::engine::LoadProgress& p) {
        fn(user, p.stage, p.bytes_total > 0 ? static_cast<double>(p.bytes_done) / p.bytes_total : 1.0);
        return true;
      };
    }
    auto engine = gannet::engine::Engine::Create(ec);
    if (!engine.ok()) return Fail(engine.status());
    auto* handle = new gannet_engine();
    handle->engine = std::move(*engine);
    *engine_out = handle;
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

gannet_status_t gannet_engine_submit(gannet_engine_t* engine, const gannet_request_t* request,
                                     uint64_t* request_id_out) {
  return Guard("gannet_engine_submit", [&]() -> gannet_status_t {
    if (engine == nullptr || request == nullptr || request_id_out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_engine_submit: engine, request and request_id_out are required");
    }
    gannet_request_t r;
    if (!ReadVersioned(request, gannet_request_t GANNET_REQUEST_INIT, &r, "gannet_request_t")) {
      return GANNET_ERR_INVALID_ARGUMENT;
    }
    gannet_sampling_params_t sp;
    if (!ReadVersioned(&r.sampling, gannet_sampling_params_t GANNET_SAMPLING_PARAMS_INIT, &sp,
                       "gannet_request_t.sampling")) {
      return GANNET_ERR_INVALID_ARGUMENT;
    }
    gannet::engine::RequestInput in;
    if (r.num_prompt_tokens > 0) {
      if (r.prompt_tokens == nullptr) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_submit: prompt_tokens is NULL");
      }
      in.prompt_tokens.assign(r.prompt_tokens, r.prompt_tokens + r.num_prompt_tokens);
    }
    if (r.prompt_text != nullptr) in.prompt_text = std::string(r.prompt_text);
    if (r.num_messages > 0) {
      if (r.messages == nullptr) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_submit: messages is NULL");
      }
      for (size_t i = 0; i < r.num_messages; ++i) {
        if (r.messages[i].role == nullptr || r.messages[i].content == nullptr) {
          return Fail(GANNET_ERR_INVALID_ARGUMENT,
                      "gannet_engine_submit: messages[" + std::to_string(i) +
                          "] has a NULL role or content");
        }
        in.messages.push_back({r.messages[i].role, r.messages[i].content, ""});
      }
    }
    in.add_generation_prompt = r.add_generation_prompt != 2;  // 0 (default) and 1: yes
    in.enable_thinking = r.enable_thinking == 1;
    in.sampling.temperature = sp.temperature;
    in.sampling.top_k = sp.top_k;
    in.sampling.top_p = sp.top_p == 0.0f ? 1.0f : sp.top_p;
    in.sampling.min_p = sp.min_p;
    in.sampling.repetition_penalty = sp.repetition_penalty == 0.0f ? 1.0f : sp.repetition_penalty;
    in.sampling.presence_penalty = sp.presence_penalty;
    in.sampling.frequency_penalty = sp.frequency_penalty;
    if (sp.has_seed) in.seed = sp.seed;
    in.max_tokens = r.max_tokens;
    in.min_tokens = r.min_tokens;
    if (r.stop_token_ids != nullptr) {
      in.stop_token_ids = std::vector<int32_t>(r.stop_token_ids, r.stop_token_ids + r.num_stop_token_ids);
    } else if (r.num_stop_token_ids > 0) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_submit: stop_token_ids is NULL");
    }
    in.ignore_default_stop_tokens = r.ignore_default_stop_tokens == 1;
    if (r.num_stop_strings > 0) {
      if (r.stop_strings == nullptr) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_submit: stop_strings is NULL");
      }
      for (size_t i = 0; i < r.num_stop_strings; ++i) {
        if (r.stop_strings[i] == nullptr) {
          return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_submit: a stop string is NULL");
        }
        in.stop_strings.emplace_back(r.stop_strings[i]);
      }
    }
    in.logprobs = r.logprobs;
    in.priority = r.priority;
    in.deadline_ms = r.deadline_ms;
    auto id = engine->engine->Submit(std::move(in));
    if (!id.ok()) return Fail(id.status());
    *request_id_out = *id;
    return GANNET_OK;
  });
}

gannet_status_t gannet_engine_cancel(gannet_engine_t* engine, uint64_t request_id) {
  return Guard("gannet_engine_cancel", [&]() -> gannet_status_t {
    if (engine == nullptr) return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_cancel: engine is NULL");
    absl::Status st = engine->engine->Cancel(request_id);
    return st.ok() ? GANNET_OK : Fail(st);
  });
}

gannet_status_t gannet_engine_poll(gannet_engine_t* engine, int32_t timeout_ms, size_t max_events,
                                   const gannet_event_t** events_out, size_t* num_events_out) {
  return Guard("gannet_engine_poll", [&]() -> gannet_status_t {
    if (engine == nullptr || events_out == nullptr || num_events_out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_engine_poll: engine, events_out and num_events_out are required");
    }
    engine->polled.clear();
    engine->views.clear();
    if (max_events == 0) {
      *events_out = nullptr;
      *num_events_out = 0;
      return GANNET_OK;
    }
    absl::Status st = engine->engine->Poll(timeout_ms, max_events, &engine->polled);
    if (!st.ok()) return Fail(st);
    engine->views.resize(engine->polled.size());
    for (size_t i = 0; i < engine->polled.size(); ++i) {
      const gannet::engine::Event& e = engine->polled[i];
      gannet_event_t& v = engine->views[i];
      v = gannet_event_t{};
      v.request_id = e.request_id;
      v.type = static_cast<int32_t>(e.type);
      v.token_id = e.token_id;
      v.text = e.text.c_str();
      v.text_len = e.text.size();
      v.logprob = e.logprob;
      v.num_top_logprobs = static_cast<int32_t>(e.top_ids.size());
      v.top_token_ids = e.top_ids.empty() ? nullptr : e.top_ids.data();
      v.top_logprobs = e.top_logprobs.empty() ? nullptr : e.top_logprobs.data();
      v.finish_reason = static_cast<int32_t>(e.finish);
      v.status = ToStatus(e.status);
      v.message = e.status.ok() ? "" : e.status.message().data();
      v.num_prompt_tokens = e.num_prompt_tokens;
      v.num_generated_tokens = e.num_generated_tokens;
      v.num_cached_prompt_tokens = e.num_cached_prompt_tokens;
    }
    *events_out = engine->views.empty() ? nullptr : engine->views.data();
    *num_events_out = engine->views.size();
    return GANNET_OK;
  });
}

gannet_status_t gannet_model_info(const char* model_dir, gannet_model_info_t* out) {
  return Guard("gannet_model_info", [&]() -> gannet_status_t {
    if (model_dir == nullptr || out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_model_info: model_dir and info_out are required");
    }
    if (out->struct_size < sizeof(uint32_t) + 4) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_model_info: set info_out->struct_size");
    }
    auto info = gannet::engine::ReadModelInfo(model_dir);
    if (!info.ok()) return Fail(info.status());
    gannet_model_info_t full{};
    full.struct_size = out->struct_size;
    auto copy = [](const std::string& from, char* to, size_t cap) {
      std::snprintf(to, cap, "%s", from.c_str());
    };
    copy(info->model_type, full.model_type, sizeof(full.model_type));
    copy(info->variant, full.variant, sizeof(full.variant));
    copy(info->dtypes, full.dtypes, sizeof(full.dtypes));
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
    std::memcpy(out, &full, std::min<size_t>(out->struct_size, sizeof(full)));
    return GANNET_OK;
  });
}

gannet_status_t gannet_engine_get_stats(gannet_engine_t* engine, gannet_engine_stats_t* out) {
  return Guard("gannet_engine_get_stats", [&]() -> gannet_status_t {
    if (engine == nullptr || out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_get_stats: engine and stats_out are required");
    }
    if (out->struct_size < sizeof(uint32_t) + 4) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_engine_get_stats: set stats_out->struct_size (GANNET_ENGINE_STATS_INIT)");
    }
    gannet::engine::EngineStats s = engine->engine->GetStats();
    gannet_engine_stats_t full{};
    full.struct_size = out->struct_size;
    full.num_running = s.num_running;
    full.num_waiting = s.num_waiting;
    for (int g = 0; g < 2; ++g) {
      full.kv_pages_total[g] = s.kv_pages_total[g];
      full.kv_pages_used[g] = s.kv_pages_used[g];
      full.kv_pages_cached[g] = s.kv_pages_cached[g];
      full.kv_pages_free[g] = s.kv_pages_free[g];
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
    full.kv_bytes_per_token[0] = s.kv_bytes_per_token[0];
    full.kv_bytes_per_token[1] = s.kv_bytes_per_token[1];
    full.sliding_window = s.sliding_window;
    full.max_model_len = s.max_model_len;
    // Write only what the caller's (possibly older, smaller) struct has room for.
    std::memcpy(out, &full, std::min<size_t>(out->struct_size, sizeof(full)));
    return GANNET_OK;
  });
}

}  // extern "C"
