/* gannet: an embeddable inference engine for Google's Gemma-4 models.
 *
 * This header is the whole public interface: plain C99, usable from C, C++, Rust, Go and any FFI.
 *
 * Lifecycle:
 *   gannet_engine_config_t cfg = GANNET_ENGINE_CONFIG_INIT;
 *   cfg.model_dir = "/models/gemma-4-e4b";
 *   gannet_engine_t* engine;
 *   if (gannet_engine_create(&cfg, &engine) != GANNET_OK) puts(gannet_last_error_message());
 *   gannet_request_t req = GANNET_REQUEST_INIT;  ... set a prompt ...
 *   uint64_t id; gannet_engine_submit(engine, &req, &id);
 *   loop: gannet_engine_poll(engine, 100, 64, &events, &n);  until a FINISH event for id
 *   gannet_engine_destroy(engine);
 *
 * Conventions:
 * - Every fallible call returns gannet_status_t (GANNET_OK == 0). Out-parameters come last and are
 *   written only on success. gannet_last_error_message() describes the last failure on the
 *   calling thread (valid until that thread's next gannet call; never freed by the caller).
 * - Input structs start with `uint32_t struct_size` (set by the *_INIT macros) and only grow at
 *   the end: a program built against an older header keeps working. Zero (or NULL) fields mean
 *   "library default" unless a field says otherwise. No bool or enum-typed fields: int32_t.
 * - Output structs (events, stats) are owned by the library: nothing the caller must free.
 * - A failure of one request is an event for that request (GANNET_EVENT_ERROR); it never fails
 *   gannet_engine_poll and never affects other requests.
 *
 * Threads: gannet_engine_submit and gannet_engine_cancel may be called from any thread at any
 * time. gannet_engine_poll may be called from one thread at a time. gannet_engine_destroy must not
 * race with any other call on the same engine. Internally the engine runs one engine thread.
 */
#ifndef GANNET_GANNET_H_
#define GANNET_GANNET_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define GANNET_API
#else
#define GANNET_API __attribute__((visibility("default")))
#endif

#define GANNET_VERSION_MAJOR 0
#define GANNET_VERSION_MINOR 1
#define GANNET_VERSION_PATCH 0

/* ---- status ---------------------------------------------------------------------------- */

typedef int32_t gannet_status_t;

#define GANNET_OK 0
#define GANNET_ERR_INVALID_ARGUMENT 1   /* a bad argument, file, field, token or limit */
#define GANNET_ERR_NOT_FOUND 2          /* a file or request that does not exist */
#define GANNET_ERR_OUT_OF_MEMORY 3      /* host or device memory exhausted */
#define GANNET_ERR_RESOURCE_EXHAUSTED 4 /* KV pages, queue slots or another limit */
#define GANNET_ERR_UNIMPLEMENTED 5      /* unsupported model, dtype, architecture or option */
#define GANNET_ERR_DATA_LOSS 6          /* a corrupt checkpoint */
#define GANNET_ERR_DEVICE_LOST 7        /* unrecoverable GPU/NCCL failure; the engine is dead */
#define GANNET_ERR_CANCELLED 8
#define GANNET_ERR_DEADLINE_EXCEEDED 9
#define GANNET_ERR_FAILED_PRECONDITION 10 /* a call out of order (e.g. on a destroyed engine) */
#define GANNET_ERR_INTERNAL 11

/* Static text naming the status ("GANNET_ERR_INVALID_ARGUMENT"); never NULL. */
GANNET_API const char* gannet_status_string(gannet_status_t status);
/* The last error on the calling thread ("" if none). */
GANNET_API const char* gannet_last_error_message(void);
/* "MAJOR.MINOR.PATCH" of the library actually linked. */
GANNET_API const char* gannet_version(void);

/* ---- logging --------------------------------------------------------------------------- */

#define GANNET_LOG_LEVEL_DEBUG 0
#define GANNET_LOG_LEVEL_INFO 1
#define GANNET_LOG_LEVEL_WARNING 2
#define GANNET_LOG_LEVEL_ERROR 3
#define GANNET_LOG_LEVEL_OFF 4

/* Called from any gannet thread; messages never arrive concurrently. */
typedef void (*gannet_log_fn)(void* user_data, int32_t level, const char* message);

/* Process-wide: replaces the log sink (NULL restores stderr) and sets the minimum level. */
GANNET_API void gannet_set_log_callback(gannet_log_fn fn, void* user_data, int32_t min_level);

/* ---- engine ---------------------------------------------------------------------------- */

typedef struct gannet_engine gannet_engine_t;

/* Loading progress, from the thread calling gannet_engine_create: `stage` is a static label
 * ("weights"), `fraction` grows from 0 to 1. */
typedef void (*gannet_progress_fn)(void* user_data, const char* stage, double fraction);

typedef struct gannet_engine_config {
  uint32_t struct_size;
  const char* model_dir;     /* HF checkpoint folder: config.json, safetensors, tokenizer.json */
  const char* backend;       /* "cpu" or "cuda"; NULL = cuda if a GPU is usable, else cpu */
  int32_t device_id;         /* CUDA device ordinal */
  int32_t max_running_seqs;  /* concurrent sequences; 0 = 64 (cpu: 16) */
  int32_t max_step_tokens;   /* per-step token budget (chunked prefill); 0 = 2048 (cpu: 256) */
  int32_t max_model_len;     /* longest sequence; 0 = min(max_position_embeddings, 32768) */
  int32_t page_size;         /* KV page size in tokens; 0 = 16 */
  int64_t kv_memory_bytes;   /* KV budget; 0 = 90% of free device memory after weights (cpu: 1 GiB) */
  int32_t kv_sliding_pages;  /* override the sliding-window pool; 0 = from the budget */
  int32_t kv_full_pages;     /* override the full-attention pool; 0 = from the budget */
  int32_t disable_prefix_cache; /* 1 = off */
  int32_t num_threads;       /* CPU backend threads; 0 = hardware concurrency */
  int32_t max_queued_requests; /* submit fails with RESOURCE_EXHAUSTED beyond it; 0 = 4096 */
  int32_t disable_cuda_graphs; /* 1 = run decode steps without CUDA graphs */
  const char* load_format;   /* NULL/"auto" = safetensors; "dummy" = random weights (benchmarks);
                                a model_dir of "dummy:31b" (26b-a4b, e4b, e2b) needs no files */
  gannet_progress_fn progress_callback; /* optional */
  void* progress_user_data;
} gannet_engine_config_t;

#define GANNET_ENGINE_CONFIG_INIT                                                             \
  { (uint32_t)sizeof(gannet_engine_config_t), NULL, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
    NULL, NULL, NULL }

/* Loads the model and starts the engine thread. */
GANNET_API gannet_status_t gannet_engine_create(const gannet_engine_config_t* config,
                                                gannet_engine_t** engine_out);
/* Stops the engine; requests in flight are dropped without events. NULL is a no-op. */
GANNET_API void gannet_engine_destroy(gannet_engine_t* engine);

/* ---- model information (no engine needed) ---------------------------------------------- */

typedef struct gannet_model_info {
  uint32_t struct_size;          /* set by the caller; the library fills what fits */
  char model_type[32];           /* "gemma4", "gemma4_text", "gemma4_assistant" */
  char variant[64];              /* e.g. "gemma4-e4b (ple, kv-sharing)" */
  char dtypes[32];               /* weight dtypes found, e.g. "BF16" */
  int64_t num_parameters;        /* text decoder, tied head counted once */
  int64_t weight_bytes;          /* of the tensors gannet loads */
  int64_t skipped_tower_bytes;   /* vision/audio tower tensors a text-only load skips */
  int32_t num_shards;
  int32_t has_tokenizer;
  int32_t num_layers;
  int32_t num_sliding_layers;
  int32_t num_full_layers;
  int32_t num_kv_shared_layers;
  int64_t hidden_size;
  int64_t vocab_size;
  int64_t max_position_embeddings;
  int32_t sliding_window;
  int32_t num_attention_heads;
  int32_t num_kv_heads;          /* sliding layers */
  int32_t num_full_kv_heads;     /* full-attention layers */
  int32_t head_dim;              /* sliding layers */
  int32_t full_head_dim;         /* full-attention layers */
  int32_t num_experts;           /* 0 unless MoE */
  int32_t top_k_experts;
  int64_t kv_bytes_per_token_sliding; /* bf16 K and V over the layers that own KV */
  int64_t kv_bytes_per_token_full;
} gannet_model_info_t;

/* Reads config.json and the safetensors headers of a checkpoint folder (no weights are read), or
 * describes "dummy:<variant>" (the real geometry, bf16 weights the engine would generate). */
GANNET_API gannet_status_t gannet_model_info(const char* model_dir, gannet_model_info_t* info_out);

/* ---- requests -------------------------------------------------------------------------- */

typedef struct gannet_sampling_params {
  uint32_t struct_size;
  float temperature;        /* 0 = greedy (argmax, lowest id on ties) */
  int32_t top_k;            /* 0 = off */
  float top_p;              /* 0 or 1 = off */
  float min_p;              /* 0 = off */
  float repetition_penalty; /* 0 or 1 = off; applies to prompt and output tokens (HF rule) */
  float presence_penalty;   /* 0 = off; output tokens */
  float frequency_penalty;  /* 0 = off; output tokens */
  int32_t has_seed;         /* 1: `seed` is used; 0: a seed derived from the request id */
  uint64_t seed;            /* same seed + same request => same output, whatever else is running */
} gannet_sampling_params_t;

#define GANNET_SAMPLING_PARAMS_INIT \
  { (uint32_t)sizeof(gannet_sampling_params_t), 0.0f, 0, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0, 0 }

typedef struct gannet_chat_message {
  const char* role;    /* "system", "user", "assistant"/"model" */
  const char* content; /* UTF-8 */
} gannet_chat_message_t;

typedef struct gannet_request {
  uint32_t struct_size;
  /* The prompt: exactly one of token ids, UTF-8 text, or chat messages. */
  const int32_t* prompt_tokens;
  size_t num_prompt_tokens;
  const char* prompt_text;
  const gannet_chat_message_t* messages;
  size_t num_messages;
  gannet_sampling_params_t sampling;
  int32_t max_tokens;           /* 0 = until the context is full */
  int32_t min_tokens;           /* stop tokens/strings are ignored before this many tokens */
  const int32_t* stop_token_ids; /* NULL: the defaults (<eos> 1, <turn|> 106, <|tool_response> 50) */
  size_t num_stop_token_ids;
  int32_t ignore_default_stop_tokens; /* 1: only stop_token_ids stop */
  const char* const* stop_strings;    /* UTF-8; may span tokens; not included in the output */
  size_t num_stop_strings;
  int32_t logprobs;             /* > 0: the chosen token's logprob and this many top logprobs */
  int32_t priority;             /* higher is scheduled first; ties in arrival order */
  int64_t deadline_ms;          /* > 0: fail with DEADLINE_EXCEEDED this long after submit */
  int32_t add_generation_prompt; /* chat: 0 or 1 = end with the model turn opener; 2 = don't */
  int32_t enable_thinking;      /* chat: 1 = thinking mode */
} gannet_request_t;

#define GANNET_REQUEST_INIT                                                               \
  { (uint32_t)sizeof(gannet_request_t), NULL, 0, NULL, NULL, 0, GANNET_SAMPLING_PARAMS_INIT, \
    0, 0, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0 }

/* Queues a request and returns its id at once. INVALID_ARGUMENT for a malformed request (no or
 * several prompts, bad sampling values); RESOURCE_EXHAUSTED when the queue is full; problems found
 * later (a token id outside the vocabulary, a prompt longer than the context) arrive as an ERROR
 * event for this id. */
GANNET_API gannet_status_t gannet_engine_submit(gannet_engine_t* engine,
                                                const gannet_request_t* request,
                                                uint64_t* request_id_out);

/* Cancels a request at any moment: its KV pages are freed and a FINISH event with reason
 * CANCELLED follows (unless it already finished). NOT_FOUND for an unknown or finished id. */
GANNET_API gannet_status_t gannet_engine_cancel(gannet_engine_t* engine, uint64_t request_id);

/* ---- events ---------------------------------------------------------------------------- */

#define GANNET_EVENT_TOKEN 1  /* one generated token (token_id, text delta, logprobs) */
#define GANNET_EVENT_FINISH 2 /* the request is done: finish_reason; no more events follow */
#define GANNET_EVENT_ERROR 3  /* the request failed: status, message; no more events follow */

#define GANNET_FINISH_STOP 1      /* a stop token or stop string */
#define GANNET_FINISH_LENGTH 2    /* max_tokens or the context length */
#define GANNET_FINISH_CANCELLED 3
#define GANNET_FINISH_ERROR 4     /* only on ERROR events */

typedef struct gannet_event {
  uint64_t request_id;
  int32_t type;           /* GANNET_EVENT_* */
  int32_t token_id;       /* TOKEN: the generated id */
  const char* text;       /* TOKEN/FINISH: UTF-8 text completed by this event (may be ""),
                             NUL-terminated; held back while it could start a stop string */
  size_t text_len;
  float logprob;          /* TOKEN with logprobs: log-probability of token_id */
  int32_t num_top_logprobs;
  const int32_t* top_token_ids;  /* [num_top_logprobs], most likely first */
  const float* top_logprobs;
  int32_t finish_reason;  /* FINISH/ERROR: GANNET_FINISH_* */
  gannet_status_t status; /* ERROR: why */
  const char* message;    /* ERROR: what was wrong (never NULL; "" otherwise) */
  int32_t num_prompt_tokens;     /* FINISH/ERROR */
  int32_t num_generated_tokens;  /* FINISH/ERROR */
  int32_t num_cached_prompt_tokens; /* FINISH: prompt tokens served from the prefix cache */
} gannet_event_t;

/* Waits up to timeout_ms (0 = don't wait, < 0 = forever) for events and returns at most
 * max_events of them in *events_out. They stay valid until the next poll on this engine (or
 * destroy). Returns GANNET_OK with *num_events_out == 0 on timeout. */
GANNET_API gannet_status_t gannet_engine_poll(gannet_engine_t* engine, int32_t timeout_ms,
                                              size_t max_events,
                                              const gannet_event_t** events_out,
                                              size_t* num_events_out);

/* ---- statistics ------------------------------------------------------------------------ */

typedef struct gannet_engine_stats {
  uint32_t struct_size;          /* set by the caller; the library fills what fits */
  int32_t num_running;
  int32_t num_waiting;
  int32_t kv_pages_total[2];     /* [0] sliding-window pool, [1] full-attention pool */
  int32_t kv_pages_used[2];      /* held by running sequences */
  int32_t kv_pages_cached[2];    /* free but holding reusable prefix-cache blocks */
  int32_t kv_pages_free[2];
  int32_t page_size;
  int64_t prefix_cache_hit_tokens;
  int64_t prefix_cache_query_tokens;
  double prefix_cache_hit_rate;  /* hit tokens / query tokens */
  int64_t total_prompt_tokens;   /* computed (not served from the cache) */
  int64_t total_generated_tokens;
  int64_t num_preemptions;
  int64_t num_steps;
  double prompt_tokens_per_s;    /* over the last few seconds */
  double generated_tokens_per_s;
  int64_t weight_bytes;          /* model weights in backend memory */
  int64_t kv_bytes_per_token[2]; /* [0] sliding-window layers, [1] full-attention layers */
  int32_t sliding_window;
  int32_t max_model_len;
} gannet_engine_stats_t;

#define GANNET_ENGINE_STATS_INIT                                                     \
  { (uint32_t)sizeof(gannet_engine_stats_t), 0, 0, {0, 0}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0, \
    0.0, 0, 0, 0, 0, 0.0, 0.0, 0, {0, 0}, 0, 0 }

GANNET_API gannet_status_t gannet_engine_get_stats(gannet_engine_t* engine,
                                                   gannet_engine_stats_t* stats_out);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* GANNET_GANNET_H_ */
