/* gannet: an embeddable inference engine for Google's Gemma-4 models.
 *
 * This header is the whole public interface: plain C99, usable from C, C++, Rust, Go and any FFI.
 *
 * ABI 0.2 (GANNET_ABI_VERSION 2) is a clean break from 0.1: events are handed out as an array of
 * pointers and carry struct_size; the sampling fields are flattened into gannet_request_t; chat
 * messages carry struct_size; the progress callback reports bytes and can abort a load; unseeded
 * sampling is random; version queries and tokenizer access were added. From 0.2 on, structs only
 * grow at the end (see "Growth rules").
 *
 * Lifecycle:
 *   gannet_engine_config_t cfg = GANNET_ENGINE_CONFIG_INIT;
 *   cfg.model_dir = "/models/gemma-4-e4b";
 *   gannet_engine_t* engine;
 *   if (gannet_engine_create(&cfg, &engine) != GANNET_OK) puts(gannet_last_error_message());
 *   gannet_request_t req = GANNET_REQUEST_INIT;  ... set a prompt ...
 *   uint64_t id; gannet_engine_submit(engine, &req, &id);
 *   loop: gannet_engine_poll(engine, 100, 64, &events, &n);  until a FINISH/ERROR event for id
 *   gannet_engine_destroy(engine);
 *
 * Conventions:
 * - Every fallible call returns gannet_status_t (GANNET_OK == 0). Out-parameters come last and are
 *   written only on success (the buffer-size answers of the tokenizer calls are the one
 *   documented exception). gannet_last_error_message() describes the last failure on the calling
 *   thread.
 * - Zero (or NULL) fields mean "library default" unless a field says otherwise. No bool or
 *   enum-typed fields: int32_t.
 * - Output structs (events, stats, info) are owned by the library or filled into the caller's
 *   struct: nothing the caller must free.
 * - A failure of one request is an event for that request (GANNET_EVENT_ERROR); it never fails
 *   gannet_engine_poll and never affects other requests.
 * - Text in and out is UTF-8. Invalid UTF-8 anywhere in a request (prompt text, chat content and
 *   roles, stop strings) is rejected with GANNET_ERR_INVALID_ARGUMENT, never repaired.
 * - Untrusted sizes are capped before they cost memory, and what is accepted costs a stated
 *   factor of its size at most (measured in issue 56): a prompt's text at most max_model_len x
 *   the tokenizer's longest token (see gannet_engine_submit), refused before tokenization, about
 *   2x its bytes at the peak (the caller's and submit's copy); a safetensors header at most
 *   16 MB, parsed into about 5x its bytes; tokenizer.json (at most 256 MB) read member by
 *   member into the tokenizer's tables: a Gemma-4-size file (33.5 MB) peaks at +85 MB beyond its
 *   text (a whole JSON tree: +322 MB), and the worst case, a vocabulary of the shortest entries,
 *   costs about 11x its bytes (64 MB: 760 MB peak), the tables' ~150 bytes per token. Still
 *   parsed as a whole JSON tree (about 20-30x its bytes while loading):
 *   model.safetensors.index.json (at most 16 MB).
 *
 * Growth rules (what keeps programs built against this header working with later libraries):
 * - Input structs start with `uint32_t struct_size` (set by the *_INIT macros) and gain fields only
 *   at the end; the library reads what the caller's struct_size covers and defaults the rest.
 *   A struct_size that is not a multiple of the struct's alignment (one that ends inside a field)
 *   is GANNET_ERR_INVALID_ARGUMENT; the sizeof of any version always is.
 * - Arrays of input structs (chat messages) are read with the stride of their first element's
 *   struct_size, so every element of one array must be initialised by the same header.
 * - Output structs start with `uint32_t struct_size`: for events, the library's size (fields
 *   beyond what your header knows exist when struct_size says so); for stats and info, the
 *   caller sets it and the library fills what fits. Events are handed out as pointers, so a
 *   larger event never shifts the next one.
 *
 * Threads and lifetimes:
 * - gannet_engine_submit, _cancel and _get_stats may be called from any thread at any time, also
 *   concurrently with each other and with one gannet_engine_poll. gannet_engine_poll may be called
 *   from one thread at a time (it hands out storage that the next poll reuses).
 * - gannet_engine_destroy must not race with any other call on that engine, and nothing may use
 *   the engine (or events, or its tokenizer) afterwards: the library cannot detect a destroyed
 *   handle, so such a call is undefined behaviour, exactly like use after free().
 * - Everything a request points to (prompt, messages, stop strings, ids) is copied by submit: the
 *   caller may free it as soon as gannet_engine_submit returns.
 * - Callbacks: the progress callback runs on the thread calling gannet_engine_create, only during
 *   that call; its user data must live until create returns. The log callback (process-wide) may
 *   run on any gannet thread until it is replaced; its user data must live until then.
 * - Internally the engine runs one engine thread (more with tensor parallelism).
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
#define GANNET_VERSION_MINOR 2
#define GANNET_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, the scheme of NCCL_VERSION_CODE: 200 for 0.2.0. */
#define GANNET_VERSION_CODE \
  (GANNET_VERSION_MAJOR * 10000 + GANNET_VERSION_MINOR * 100 + GANNET_VERSION_PATCH)
/* Raised whenever a struct layout or a signature changes incompatibly (0.1 was 1). */
#define GANNET_ABI_VERSION 2

/* ---- status ---------------------------------------------------------------------------- */

typedef int32_t gannet_status_t;

#define GANNET_OK 0
#define GANNET_ERR_INVALID_ARGUMENT 1   /* a bad argument, file, field, token or limit */
#define GANNET_ERR_NOT_FOUND 2          /* a file, device or request that does not exist */
#define GANNET_ERR_OUT_OF_MEMORY 3      /* host or device memory exhausted */
#define GANNET_ERR_RESOURCE_EXHAUSTED 4 /* KV pages, queue slots, a buffer or another limit */
#define GANNET_ERR_UNIMPLEMENTED 5      /* unsupported model, dtype, architecture or option */
#define GANNET_ERR_DATA_LOSS 6          /* a corrupt checkpoint */
#define GANNET_ERR_DEVICE_LOST                                                        \
  7                            /* unrecoverable GPU/NCCL failure; the engine is dead: \
                                  every request in flight ends with an ERROR event of \
                                  this status, later submits return it, poll and      \
                                  destroy still work */
#define GANNET_ERR_CANCELLED 8 /* cancelled by the caller (or its progress callback) */
#define GANNET_ERR_DEADLINE_EXCEEDED 9
#define GANNET_ERR_FAILED_PRECONDITION 10 /* a call the current state cannot serve */
#define GANNET_ERR_INTERNAL 11

/* Static text naming the status ("GANNET_ERR_INVALID_ARGUMENT"); never NULL. Any thread. */
GANNET_API const char* gannet_status_string(gannet_status_t status);
/* The last error on the calling thread ("" if none): valid until that thread's next gannet call;
 * never freed by the caller. */
GANNET_API const char* gannet_last_error_message(void);
/* "MAJOR.MINOR.PATCH" of the library actually linked. Any thread. */
GANNET_API const char* gannet_version(void);
/* GANNET_VERSION_CODE of the library actually linked (compare with the header's). Any thread. */
GANNET_API int32_t gannet_version_code(void);
/* GANNET_ABI_VERSION of the library actually linked: a program must not use a library whose ABI
 * version differs from its header's. Any thread. */
GANNET_API int32_t gannet_abi_version(void);

/* ---- logging --------------------------------------------------------------------------- */

#define GANNET_LOG_LEVEL_DEBUG 0
#define GANNET_LOG_LEVEL_INFO 1
#define GANNET_LOG_LEVEL_WARNING 2
#define GANNET_LOG_LEVEL_ERROR 3
#define GANNET_LOG_LEVEL_OFF 4

/* Called from any gannet thread; messages never arrive concurrently. */
typedef void (*gannet_log_fn)(void* user_data, int32_t level, const char* message);

/* The library logs to stderr ("gannet [W] ..."), warnings and errors only by default
 * (GANNET_LOG_LEVEL_WARNING): creating an engine prints nothing when all is well. The environment
 * variable GANNET_LOG_LEVEL (debug, info, warning, error or off), read when the library first
 * logs, sets another default level; any other value is reported once on stderr and means warning;
 * gannet_set_log_callback overrides both.
 *
 * Process-wide: replaces the log sink (NULL restores stderr) and sets the minimum level. Call it
 * before creating engines; replacing the sink while engines log is safe, but the old user data
 * may still be used by a message in flight until this call returns. */
GANNET_API void gannet_set_log_callback(gannet_log_fn fn, void* user_data, int32_t min_level);

/* ---- engine ---------------------------------------------------------------------------- */

typedef struct gannet_engine gannet_engine_t;

/* The id that joins the processes of a multi-process tensor-parallel group (NCCL's unique id).
 * Rank 0's process makes it with gannet_tp_create_id (the group's bootstrap then listens in that
 * process until every rank has joined) and the host application hands the bytes to the other
 * ranks' processes (a file, a socket, MPI: any way), as NCCL users do. */
typedef struct gannet_tp_id {
  uint8_t bytes[128];
} gannet_tp_id_t;

/* UNIMPLEMENTED in a build without NCCL. Any thread. */
GANNET_API gannet_status_t gannet_tp_create_id(gannet_tp_id_t* id_out);

/* Loading progress of one stage. */
typedef struct gannet_progress {
  uint32_t struct_size; /* the library's sizeof(gannet_progress_t) */
  const char* stage;    /* static label: "weights" */
  double fraction;      /* 0 .. 1 */
  int64_t bytes_done;
  int64_t bytes_total;
  double elapsed_s;   /* since gannet_engine_create began */
  double bytes_per_s; /* average rate of this stage so far */
  double eta_s;       /* estimated seconds left in this stage; < 0 while unknown */
} gannet_progress_t;

/* Return 0 to continue, anything else to abort the load: gannet_engine_create then returns
 * GANNET_ERR_CANCELLED and frees everything it made. Runs on the thread calling
 * gannet_engine_create; `progress` is valid during the call only. */
typedef int32_t (*gannet_progress_fn)(void* user_data, const gannet_progress_t* progress);

typedef struct gannet_engine_config {
  uint32_t struct_size;
  const char* model_dir;    /* HF checkpoint folder: config.json, safetensors, tokenizer.json;
                               or "dummy:31b" (26b-a4b, e4b, e2b): real geometry, random weights */
  const char* backend;      /* "cpu" or "cuda"; NULL = cuda if a GPU is usable, else cpu (said in
                               the stats' backend_fallback, and logged: at info level on a
                               machine without an NVIDIA driver or GPU, else as a warning) */
  int32_t device_id;        /* CUDA device ordinal; one that does not exist is an error */
  int32_t max_running_seqs; /* concurrent sequences; 0 = 64 per GPU of the tensor-parallel group
                               (cpu: 16), lowered (with a warning) to what the memory holds with
                               every running sequence at 2048 tokens; an explicit value that
                               cannot fit is an error naming the value that would */
  int32_t max_step_tokens;  /* per-step token budget (chunked prefill); 0 = 2048 (cpu: 256) */
  int32_t max_model_len;    /* longest sequence; 0 = min(max_position_embeddings, 32768) */
  int32_t page_size;        /* KV page size in tokens; 0 = 16; at most 1024 */
  int64_t kv_memory_bytes;  /* KV budget; 0 = what the device has free after the weights and
                               activations, less max(10%, 1 GiB) for workspaces (cpu: the running
                               sequences at full length twice, at most a quarter of the RAM) */
  int32_t kv_sliding_pages; /* override the sliding-window pool; 0 = from the budget */
  int32_t kv_full_pages;    /* override the full-attention pool; 0 = from the budget */
  int32_t disable_prefix_cache; /* 1 = off */
  int32_t num_threads;          /* CPU backend threads; 0 = hardware concurrency; at most 1024 */
  int32_t max_queued_requests;  /* submit fails with RESOURCE_EXHAUSTED beyond it (requests whose
                                   terminal event has not been polled yet); 0 = 4096 */
  int32_t disable_cuda_graphs;  /* 1 = run decode steps without CUDA graphs */
  const char* load_format; /* NULL/"auto" = safetensors; "dummy" = random weights (benchmarks) */
  gannet_progress_fn progress_callback; /* optional */
  void* progress_user_data;
  /* Speculative decoding with the target's Gemma-4 MTP assistant: its folder, or
   * "dummy:<variant>-assistant" (random weights: benchmarks); NULL = off. Greedy output is token
   * for token the same as without it; sampled output has the same distribution. */
  const char* draft_model_dir;
  int32_t num_speculative_tokens; /* drafts per round, 1..8; 0 = 3 (needs draft_model_dir) */
  /* At offset 120, past the tail padding of the struct without it: a caller whose struct_size ends
   * before it gets the default. The most prompt tokens (prefill chunks, admissions) a step may
   * carry while sequences decode in it: smaller keeps decodes fast when prompts arrive (time per
   * output token), larger serves prompts sooner (time to first token) and, under full load, keeps
   * the throughput (docs/results-log/general.md). 0 = no limit beyond max_step_tokens; at most
   * max_step_tokens.
   * Steps with no decode always take max_step_tokens of prompt. */
  int64_t max_prefill_tokens_while_decoding;
  /* Tensor parallelism in this process: the model split over tensor_parallel_size CUDA devices
   * (0 or 1 = one device; at most 8), one worker thread per device, NCCL between them (NVLink
   * multicast is never used). device_ids (num_device_ids entries; NULL = devices 0 .. size - 1)
   * names the devices, rank 0 first; with device_ids the size may be left 0. Heads, the MLP and
   * the vocabulary are split (a dimension that does not divide is an error naming it); each
   * device's KV cache holds its heads. With draft_model_dir every device drafts with its shard
   * of the assistant. On the CPU backend the ranks are threads (tests). */
  int32_t tensor_parallel_size;
  int32_t num_device_ids;
  const int32_t* device_ids;
  /* One process per GPU (on one host or several): every rank's process calls
   * gannet_engine_create with the same tp_id, tensor_parallel_size = the number of ranks, its
   * own tp_rank and its device (device_id, or one entry of device_ids); create returns once every
   * rank has joined (it waits for them, at most 300 s: GANNET_TP_JOIN_TIMEOUT_S; then it fails
   * with GANNET_ERR_DEADLINE_EXCEEDED). Rank 0 accepts requests and decides every limit; the
   * others load their shard and serve rank 0 (see gannet_engine_serve) until rank 0's engine is
   * destroyed. With speculative decoding every rank needs the same draft_model_dir. A rank that
   * dies makes the others fail with GANNET_ERR_DEVICE_LOST within the group timeout (30 s;
   * GANNET_TP_TIMEOUT_S), never hang. NULL = one process. */
  int32_t tp_rank;
  const gannet_tp_id_t* tp_id;
  /* How the KV cache stores keys and values: NULL or "bf16" = the model's precision (bf16 on
   * CUDA; the CPU backend keeps f32); "fp8" (or "fp8_e4m3") = FP8 E4M3 with one f32 scale per
   * token and KV head: about half the bytes, so about twice the sequences or context, and faster
   * decode where KV bytes dominate (many sequences), at an accuracy cost measured in
   * docs/results-log/fp8-kv.md. */
  const char* kv_cache_dtype;
  /* The full-attention layers of 31B and 26B-A4B use one projection for K and V (K=V). By default
   * their cache keeps ONE array, the normalised projection, and attention derives K from it (half
   * those layers' KV bytes, same outputs within bf16 rounding); 1 = keep K and V apart as two
   * arrays (for comparison). No effect on E2B/E4B. */
  int32_t kv_separate_k_eq_v;
  /* What the CUDA backend computes in: NULL or "auto" = bf16, except on GPUs older than sm_75
   * (V100), which have no bf16 tensor cores: there f16; "bf16"; or "f16" (any GPU: weights are
   * converted to fp16 at load, activations are fp16, and every value that can leave fp16's range
   * -- the residual stream, the projections feeding a norm, the router input, the logits -- stays
   * f32; agreement with bf16 in docs/results-log/arch.md). The CPU backend computes in f32 and
   * takes only "auto". */
  const char* compute_dtype;
  /* 1 = before gannet_engine_create returns, run one step of every shape the limits allow: each
   * row count at which the CUDA backend tunes its linear layers, and each decode batch size at
   * each context-length bucket up to max_model_len, twice (the second records its CUDA graph).
   * The first requests of each shape then run as fast as later ones, instead of paying that
   * tuning (tens of ms a shape, more for prompt chunks) and recording; the start takes seconds
   * longer (load_seconds counts it). Speculative verify steps and the drafter are not warmed.
   * 0 = the default, which is off; -1 = off. */
  int32_t startup_warmup;
  /* Back-pressure on events (at offset 192, past the tail padding of the struct without it).
   * TOKEN events wait in the engine until gannet_engine_poll hands them out; a host that stops
   * polling (a stalled client, a forgotten request) must not grow the engine without bound. When
   * a request has max_undelivered_tokens_per_request TOKEN events waiting, or the engine has
   * max_undelivered_tokens of all requests together, the request whose next token would pass the
   * bound ends instead: its KV pages are freed and it gets an ERROR event with status
   * GANNET_ERR_RESOURCE_EXHAUSTED (the tokens already queued stay deliverable; the final event
   * itself is always queued, and max_queued_requests bounds those). A host that polls as tokens
   * come never meets either bound. 0 = 262144 for the engine (~40 MB of events; ~110 MB with 20
   * logprobs each), 4096 per request; negative is an error. */
  int64_t max_undelivered_tokens;
  int32_t max_undelivered_tokens_per_request;
  /* Quantize the weights as they load (at offset 208): NULL = as the checkpoint stores them;
   * "int4-g32", "int4-g64", "int4-g128" or "int4-channel" (each optionally "-asym": unsigned
   * with zero points) = the linear layers' bf16/f16/f32 matrices become W4A16 int4, rounded to
   * nearest exactly as `gannet quantize` writes them (the embeddings, LM head, router, PLE model
   * projection and MoE experts stay as they are). About 0.28x the bytes of those layers, so a
   * larger model fits and decode reads less; accuracy as round-to-nearest int4 (a QAT or GPTQ
   * checkpoint is better: load it directly). The CUDA backend needs each K a multiple of 64
   * (every Gemma-4 geometry). An already quantized checkpoint is INVALID_ARGUMENT, and so is
   * per-channel int4 with tensor parallelism (its ranks split the channels' inputs: use a group
   * size). A draft model (speculative decoding) keeps its own weights. */
  const char* weight_dtype;
} gannet_engine_config_t;

#define GANNET_ENGINE_CONFIG_INIT                                                             \
  {                                                                                           \
    (uint32_t)sizeof(gannet_engine_config_t), NULL, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
        NULL, NULL, NULL, NULL, 0, 0, 0, 0, NULL, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL       \
  }

/* Loads the model and starts the engine thread. Everything that can be checked (files, backend,
 * device, limits, memory) is checked before the weights load: the CPU backend's check counts the
 * checkpoint's weights (a model larger than the available RAM is RESOURCE_EXHAUSTED naming both
 * sizes), and a device backend's also checks that the host can hold the checkpoint it reads.
 * The weights are read (read(2), never mmap) into memory the process owns: a checkpoint file
 * truncated or rewritten while the engine runs cannot crash the process (no SIGBUS) or change its
 * weights, and one that shrinks during the load is GANNET_ERR_DATA_LOSS naming it. The price: on
 * the CPU backend the weights are private memory of this process, not page cache shared with
 * other processes or evicted under pressure (and tensors the backend copies, such as fused
 * projections, stay resident twice); a single-device CUDA engine gives the host copy back once
 * the device holds the weights (tensor-parallel ranks keep theirs). `config` and what
 * it points to may be freed when the call returns. */
GANNET_API gannet_status_t gannet_engine_create(const gannet_engine_config_t* config,
                                                gannet_engine_t** engine_out);
/* Stops the engine; requests in flight are dropped without events. NULL is a no-op. Must not race
 * with any other call on this engine; the handle, its events and its tokenizer are invalid
 * afterwards. */
GANNET_API void gannet_engine_destroy(gannet_engine_t* engine);

/* On a rank other than 0 of a multi-process group (whose submit fails with
 * GANNET_ERR_FAILED_PRECONDITION): waits until the group ends. GANNET_OK once rank 0's engine was
 * destroyed; GANNET_ERR_DEVICE_LOST when a rank died (or did not answer in time);
 * GANNET_ERR_DEADLINE_EXCEEDED when timeout_ms (>= 0) passed while the group still serves
 * (-1 = no limit). FAILED_PRECONDITION on an engine that serves requests itself. Then destroy the
 * engine. Any thread, once at a time per engine. */
GANNET_API gannet_status_t gannet_engine_serve(gannet_engine_t* engine, int32_t timeout_ms);

/* ---- model information (no engine needed) ---------------------------------------------- */

typedef struct gannet_model_info {
  uint32_t struct_size;        /* set by the caller; the library fills what fits */
  char model_type[32];         /* "gemma4", "gemma4_text", "gemma4_assistant" */
  char variant[64];            /* e.g. "gemma4-e4b (ple, kv-sharing)" */
  char dtypes[32];             /* weight dtypes found, e.g. "BF16" */
  int64_t num_parameters;      /* text decoder, tied head counted once */
  int64_t weight_bytes;        /* of the tensors gannet loads */
  int64_t skipped_tower_bytes; /* vision/audio tower tensors a text-only load skips */
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
  int32_t num_kv_heads;      /* sliding layers */
  int32_t num_full_kv_heads; /* full-attention layers */
  int32_t head_dim;          /* sliding layers */
  int32_t full_head_dim;     /* full-attention layers */
  int32_t num_experts;       /* 0 unless MoE */
  int32_t top_k_experts;
  int64_t kv_bytes_per_token_sliding; /* bf16 K and V over the layers that own KV (one array on
                                       * K=V layers: the default single store) */
  int64_t kv_bytes_per_token_full;
  /* How the weights are stored (since quantized checkpoints, issue 53). Bytes as loaded: packed
   * int4 with its scales and zero points. */
  char weight_format[64]; /* matrices: "bf16", "int4 g32 (bf16 scales), compressed-tensors" */
  int64_t weight_bytes_attention;  /* q/k/v/o projections */
  int64_t weight_bytes_mlp;        /* dense MLP gate/up/down */
  int64_t weight_bytes_experts;    /* MoE experts */
  int64_t weight_bytes_embeddings; /* token embeddings, LM head, PLE tables and projections */
  int64_t weight_bytes_other;      /* norms, router, scalars, drafter projections */
  char kept_plain[128];            /* quantized checkpoints: kinds of matrices kept unquantized,
                                    * e.g. "embeddings,lm_head,router"; "" otherwise */
  /* Images (since issue 59): 1 when config.json has a vision_config (the tower's weights are
   * checked when the engine loads), and the image placeholder token id (<|image|>). */
  int32_t has_vision;
  int32_t image_token_id;
} gannet_model_info_t;

#define GANNET_MODEL_INFO_INIT                                                                   \
  {                                                                                              \
    (uint32_t)sizeof(gannet_model_info_t), "", "", "", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
        0, 0, 0, 0, 0, 0, 0, 0, "", 0, 0, 0, 0, 0, "", 0, 0                                      \
  }

/* Reads config.json, tokenizer.json (validated, when present) and the safetensors headers of a
 * checkpoint folder (no weights are read), or describes "dummy:<variant>" (the real geometry, bf16
 * weights the engine would generate). Any thread. */
GANNET_API gannet_status_t gannet_model_info(const char* model_dir, gannet_model_info_t* info_out);

/* ---- requests -------------------------------------------------------------------------- */

typedef struct gannet_chat_message {
  uint32_t struct_size; /* GANNET_CHAT_MESSAGE_INIT; every element of an array shares the first's */
  const char* role;     /* "system", "developer", "user", "assistant"/"model" */
  const char* content;  /* UTF-8 */
} gannet_chat_message_t;

#define GANNET_CHAT_MESSAGE_INIT \
  { (uint32_t)sizeof(gannet_chat_message_t), NULL, NULL }

/* How a request's sampling seed is chosen (gannet_request_t.seed_mode). */
#define GANNET_SEED_RANDOM 0 /* default: fresh entropy from the OS for every request */
#define GANNET_SEED_FIXED                                        \
  1 /* `seed`: same seed + same request => same output, whatever \
       else is running */
#define GANNET_SEED_REQUEST_ID                                    \
  2 /* derived from the request id: repeatable runs of one engine \
       without choosing seeds */

/* One image of a request: encoded bytes (PNG, JPEG or WebP, recognised by their signature) or a
 * raw buffer of 8-bit RGB, width x height x 3 bytes, rows top down; exactly one of the two.
 * Decoded and resized as HF's Gemma-4 processor does (docs/vision.md), by gannet_engine_submit on
 * the calling thread (a 12-megapixel photo takes ~150 ms on one core). */
typedef struct gannet_image {
  uint32_t struct_size;    /* GANNET_IMAGE_INIT; every element of an array shares the first's */
  int32_t max_soft_tokens; /* the image's token budget: 0 = 280; else 70, 140, 280, 560 or 1120 */
  const uint8_t* data;     /* encoded bytes ... */
  size_t size;             /* ... and their count */
  const uint8_t* rgb;      /* or raw RGB, with width and height */
  int32_t width;
  int32_t height;
} gannet_image_t;

#define GANNET_IMAGE_INIT \
  { (uint32_t)sizeof(gannet_image_t), 0, NULL, 0, NULL, 0, 0 }

typedef struct gannet_request {
  uint32_t struct_size;
  /* The prompt: exactly one of token ids, UTF-8 text, or chat messages. */
  const int32_t* prompt_tokens;
  size_t num_prompt_tokens;
  const char* prompt_text;
  const gannet_chat_message_t* messages;
  size_t num_messages;
  int32_t max_tokens; /* 0 = until the context is full */
  int32_t min_tokens; /* stop tokens/strings are ignored before this many tokens */
  /* Sampling. */
  float temperature;        /* 0 = greedy (argmax, lowest id on ties) */
  int32_t top_k;            /* 0 = off */
  float top_p;              /* 0 or 1 = off; else in (0, 1] */
  float min_p;              /* 0 = off; else in [0, 1] */
  float repetition_penalty; /* 0 or 1 = off; applies to prompt and output tokens (HF rule) */
  float presence_penalty;   /* 0 = off; output tokens */
  float frequency_penalty;  /* 0 = off; output tokens */
  int32_t seed_mode;        /* GANNET_SEED_* */
  uint64_t seed;            /* with GANNET_SEED_FIXED */
  /* Stops. */
  const int32_t*
      stop_token_ids; /* NULL: the defaults (<eos> 1, <turn|> 106, <|tool_response> 50) */
  size_t num_stop_token_ids;
  int32_t ignore_default_stop_tokens; /* 1: only stop_token_ids stop */
  const char* const* stop_strings;    /* UTF-8; may span tokens; not included in the output */
  size_t num_stop_strings;
  int32_t logprobs;              /* 0..20: > 0 gives the chosen token's logprob and this many top */
  int32_t priority;              /* higher is scheduled first; ties in arrival order */
  int64_t deadline_ms;           /* > 0: fail with DEADLINE_EXCEEDED this long after submit
                                    (saturating: INT64_MAX means never) */
  int32_t add_generation_prompt; /* chat: 0 or 1 = end with the model turn opener; 2 = don't */
  int32_t enable_thinking;       /* chat: 1 = thinking mode */
  int32_t disable_speculation;   /* 1 = decode without drafts (engines with a draft model) */
  /* Chat messages from untrusted users (an int64_t only to start at offset 168, past the tail
   * padding of the struct without it, which an older caller's struct_size covers). The chat
   * template writes each message's content verbatim between its turn markers, and by default (0)
   * the prompt is tokenized as the model's reference template does: text in a message that spells a
   * control token ("<|turn>", "<turn|>", "<|channel>", any special token of the vocabulary) becomes
   * that token, so one message can open and close turns of its own (a forged system or model turn).
   * 1 = the content (and reasoning) of every message is tokenized as plain text: such spellings
   * become the ordinary tokens of their characters and only the template's own markers are control
   * tokens (HF's split_special_tokens, applied to the messages only). Content without such
   * spellings gives the same tokens either way. No effect on prompt_text or prompt_tokens, which
   * the caller renders. Servers facing users should set it. */
  int64_t split_special_tokens;
  /* A chat as one UTF-8 JSON object in the OpenAI chat shape, for what `messages` cannot say:
   * {"messages": [{"role": "system"|"developer"|"user"|"assistant"|"tool", "content": string or
   * [{"type": "text", "text": ...}], "tool_calls": [{"id", "type": "function", "function":
   * {"name", "arguments": object}}], "tool_call_id", "reasoning_content"}, ...],
   * "tools": [{"type": "function", "function": {"name", "description", "parameters"}}]}.
   * The model's own chat template renders it (chat_template.jinja or tokenizer_config.json's
   * chat_template; see gannet_tokenizer_has_chat_template); a model without one renders text
   * messages only and refuses tools. A fourth kind of prompt: exactly one of prompt_tokens,
   * prompt_text, messages and chat_json. add_generation_prompt, enable_thinking and
   * split_special_tokens apply as to messages. */
  const char* chat_json;
  /* Chat prompts (messages or chat_json) only; NULL or "" = none. UTF-8 text appended after the
   * rendered chat, i.e. after the generation prompt: the start of the model's reply, forced (a
   * server honouring a forced tool choice appends "<|tool_call>call:NAME{"). It is the caller's
   * own text, not the users': its spellings of control tokens become those tokens whatever
   * split_special_tokens says. Its tokens are prompt tokens (num_prompt_tokens counts them) and
   * never come back as TOKEN events; the model continues after them. */
  const char* reply_prefix;
  /* Images (models with a vision tower, CPU backend for now), in prompt order: the k-th image
   * placeholder of the prompt is the k-th image. A placeholder is one image token: `<|image|>`
   * in prompt_text or a message's content (not with split_special_tokens = 1, which makes it
   * plain text), a {"type": "image"} content part in chat_json (which the chat template renders
   * as `<|image|>`; "image_url" parts are refused: decode a data: URL yourself and pass its
   * bytes here), the config's image_token_id in prompt_tokens. Each becomes `<|image>`, the
   * image's N soft tokens and `<image|>` (num_prompt_tokens counts them all). INVALID_ARGUMENT
   * (message naming the image) for a count that differs from the placeholders', bytes that do
   * not decode (0 bytes, truncated, unknown format), a raw buffer of 0 x 0, an unsupported
   * max_soft_tokens, a prompt that no longer fits the context, or a model without a vision
   * tower; UNIMPLEMENTED for an unsupported kind (CMYK JPEG, animated WebP) or backend. */
  const gannet_image_t* images;
  size_t num_images;
} gannet_request_t;

#define GANNET_REQUEST_INIT                                                                      \
  {                                                                                              \
    (uint32_t)sizeof(gannet_request_t), NULL, 0, NULL, NULL, 0, 0, 0, 0.0f, 0, 0.0f, 0.0f, 0.0f, \
        0.0f, 0.0f, 0, 0, NULL, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0          \
  }

/* Queues a request and returns its id at once. INVALID_ARGUMENT for a malformed request (no or
 * several prompts, bad sampling values, min_tokens > max_tokens, invalid UTF-8, text without a
 * tokenizer), and for prompt text (prompt_text, or the chat messages' content together) longer
 * than the context could hold: more than max_model_len x the most bytes one token stands for (the
 * longest token string of the vocabulary), checked before any tokenization, so an oversized text
 * costs a pass over its bytes, never the tokenizer's time and memory; RESOURCE_EXHAUSTED when
 * max_queued_requests are unfinished or unpolled (the slot is taken atomically: concurrent submits
 * never pass the limit). Problems found later (a token id outside the vocabulary, a prompt longer
 * than the context in tokens) arrive as an ERROR event for this id. Any thread; the request may be
 * freed when this returns. */
GANNET_API gannet_status_t gannet_engine_submit(gannet_engine_t* engine,
                                                const gannet_request_t* request,
                                                uint64_t* request_id_out);

/* Validates a request as submit would, against a model's info (NULL: the checks that need no
 * model), without an engine: so a program can refuse a bad request before loading weights.
 * Checks prompt sources, sampling values, limits, UTF-8, ids against the vocabulary, and that
 * text needs a tokenizer. Images are decoded and preprocessed (as slow as submit's), their count
 * is compared with the prompt's placeholders (spelled `<|image|>` in text, {"type": "image"}
 * parts in chat_json, image_token_id in prompt_tokens) and their tokens with the context
 * (for text prompts only what the images alone take); with a model, that it has a vision tower.
 * Any thread. */
GANNET_API gannet_status_t gannet_request_check(const gannet_request_t* request,
                                                const gannet_model_info_t* model);

/* Cancels a request at any moment: its KV pages are freed and a FINISH event with reason
 * CANCELLED follows (unless it already finished). NOT_FOUND for an unknown or finished id. Any
 * thread. */
GANNET_API gannet_status_t gannet_engine_cancel(gannet_engine_t* engine, uint64_t request_id);

/* ---- events ---------------------------------------------------------------------------- */

/* Thinking. Gemma-4 writes its reasoning as `<|channel>thought\n ... <channel|>` before the answer
 * (when the request sets enable_thinking; E2B/E4B may also do it unasked). The two markers are
 * special tokens: they arrive as TOKEN events with their token_id, never as text (a marker's
 * event carries only text held back before it, flagged as the side the marker closes). The
 * channel's name line ("thought\n") is dropped, and the text between the markers arrives with
 * thinking = 1; everything else with thinking = 0. One event's text is never part thinking, part
 * answer (stop strings apply to both and do not span a marker). Thinking is not sent back to the
 * model: the chat template drops it from earlier model turns, so a host keeps a turn's answer text
 * as its content. */

#define GANNET_EVENT_TOKEN 1  /* one generated token (token_id, text delta, logprobs) */
#define GANNET_EVENT_FINISH 2 /* the request is done: finish_reason; no more events follow */
#define GANNET_EVENT_ERROR 3  /* the request failed: status, message; no more events follow */

#define GANNET_FINISH_STOP 1   /* a stop token or stop string */
#define GANNET_FINISH_LENGTH 2 /* max_tokens or the context length */
#define GANNET_FINISH_CANCELLED 3
#define GANNET_FINISH_ERROR 4 /* only on ERROR events */

typedef struct gannet_event {
  uint32_t struct_size; /* the library's sizeof(gannet_event_t) */
  int32_t type;         /* GANNET_EVENT_* */
  uint64_t request_id;
  int32_t token_id; /* TOKEN: the generated id */
  int32_t num_top_logprobs;
  const char* text; /* TOKEN/FINISH: UTF-8 text completed by this event (may be ""),
                       NUL-terminated; held back while it could start a stop string */
  size_t text_len;
  float logprob;                /* TOKEN with logprobs: log-probability of token_id */
  int32_t finish_reason;        /* FINISH/ERROR: GANNET_FINISH_* */
  const int32_t* top_token_ids; /* [num_top_logprobs], most likely first */
  const float* top_logprobs;
  gannet_status_t status;            /* ERROR: why */
  int32_t num_prompt_tokens;         /* FINISH/ERROR: the prompt's length in tokens once it was
                                        tokenized (0 when it never was) */
  const char* message;               /* ERROR: what was wrong (never NULL; "" otherwise) */
  int32_t num_generated_tokens;      /* FINISH/ERROR */
  int32_t num_cached_prompt_tokens;  /* FINISH: prompt tokens served from the prefix cache */
  int32_t num_draft_tokens;          /* FINISH: drafts verified for this request (speculation) */
  int32_t num_accepted_draft_tokens; /* FINISH: of which accepted */
  /* TOKEN/FINISH: 1 = `text` is the model's thinking, 0 = its answer (see "Thinking" above).
   * Present when struct_size > offsetof(gannet_event_t, thinking): earlier 0.2 libraries hand out
   * 96-byte events without it (read it as 0). */
  int32_t thinking;
} gannet_event_t;

/* Waits up to timeout_ms (0 = don't wait, < 0 = forever) for events and hands out at most
 * max_events of them: *events_out points to an array of *num_events_out event pointers. They stay
 * valid until the next poll on this engine (or destroy). Returns GANNET_OK with
 * *num_events_out == 0 on timeout. One thread at a time. Events wait in the engine until polled,
 * within bounds (max_undelivered_tokens and max_undelivered_tokens_per_request of the config: a
 * request that would pass one ends with a RESOURCE_EXHAUSTED ERROR event) so a host that stops
 * polling cannot grow the engine without bound. Every request accepted by submit gets exactly one
 * FINISH or ERROR event, last, unless the engine is destroyed first. */
GANNET_API gannet_status_t gannet_engine_poll(gannet_engine_t* engine, int32_t timeout_ms,
                                              size_t max_events,
                                              const gannet_event_t* const** events_out,
                                              size_t* num_events_out);

/* ---- statistics ------------------------------------------------------------------------ */

typedef struct gannet_engine_stats {
  uint32_t struct_size; /* set by the caller; the library fills what fits */
  int32_t num_running;
  int32_t num_waiting;
  int32_t kv_pages_total[2];  /* [0] sliding-window pool, [1] full-attention pool */
  int32_t kv_pages_used[2];   /* held by running sequences */
  int32_t kv_pages_cached[2]; /* free but holding reusable prefix-cache blocks */
  int32_t kv_pages_free[2];
  int32_t page_size;
  int64_t prefix_cache_hit_tokens;
  int64_t prefix_cache_query_tokens;
  double prefix_cache_hit_rate; /* hit tokens / query tokens */
  int64_t total_prompt_tokens;  /* computed (not served from the cache) */
  int64_t total_generated_tokens;
  int64_t num_preemptions;
  int64_t num_steps;
  double prompt_tokens_per_s; /* over the last few seconds */
  double generated_tokens_per_s;
  int64_t weight_bytes;          /* model weights in backend memory */
  int64_t kv_bytes_per_token[2]; /* [0] sliding-window layers, [1] full-attention layers */
  int32_t sliding_window;
  int32_t max_model_len;
  int32_t max_running_seqs;    /* after any lowering to what the memory holds */
  int32_t device_id;           /* CUDA ordinal; -1 on the CPU */
  int64_t kv_bytes;            /* KV cache arrays in backend memory */
  int64_t device_memory_bytes; /* of the device (cpu: the host's RAM) */
  double load_seconds;         /* gannet_engine_create, start to ready */
  char backend[16];            /* "cpu", "cuda" */
  char device_name[96];        /* "NVIDIA H100 80GB HBM3 (sm_90)", "16 threads"; rank 0's, then
                                  ", tensor parallel over N ranks" */
  char backend_fallback[256];  /* why an automatic backend choice ran on the CPU; "" otherwise */
  /* Speculative decoding (zeros without a draft model). */
  int32_t num_speculative_tokens;   /* drafts per round (K) */
  int64_t spec_verify_chunks;       /* steps' chunks that verified drafts */
  int64_t spec_draft_tokens;        /* drafts verified */
  int64_t spec_accepted_tokens;     /* drafts accepted */
  double spec_mean_accepted_length; /* tokens emitted per verify chunk (accepted + 1) */
  int64_t spec_draft_rounds;        /* drafter rounds (one per step with proposing requests) */
  /* Decode steps (no prompt tokens) that ran back to back, each from its start to the next step's:
   * their count, wall time, and the device time from each step's first device op to its last. The
   * difference is host work on the critical path (planning, batches, events, text) during which
   * the device idles; host gaps inside a step's span are not counted. Device time is 0 on the CPU
   * backend, where all work is host work. */
  int64_t timed_decode_steps;
  double timed_decode_seconds;
  double timed_decode_device_seconds;
  char kv_cache_dtype[16]; /* what the KV cache stores: "bf16", "f32" (cpu), "fp8_e4m3" */
  char compute_dtype[8];   /* what activations and weights are: "bf16", "f16", "f32" (cpu) */
} gannet_engine_stats_t;

#define GANNET_ENGINE_STATS_INIT                                                                   \
  {                                                                                                \
    (uint32_t)sizeof(gannet_engine_stats_t), 0, 0, {0, 0}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0, 0.0,   \
        0, 0, 0, 0, 0.0, 0.0, 0, {0, 0}, 0, 0, 0, 0, 0, 0, 0.0, "", "", "", 0, 0, 0, 0, 0.0, 0, 0, \
        0.0, 0.0, "", ""                                                                           \
  }

/* A consistent snapshot. Any thread, also concurrently with poll and submit. */
GANNET_API gannet_status_t gannet_engine_get_stats(gannet_engine_t* engine,
                                                   gannet_engine_stats_t* stats_out);

/* ---- tokenizer ------------------------------------------------------------------------- */

/* A model's tokenizer and chat template, so hosts can count, trim and render prompts exactly as
 * the engine does. Immutable: every call below may run concurrently on one tokenizer. */
typedef struct gannet_tokenizer gannet_tokenizer_t;

/* Loads <model_dir>/tokenizer.json (and config.json, for the chat template's variant) without a
 * model. NOT_FOUND when the folder has no tokenizer.json. Close it with gannet_tokenizer_close. */
GANNET_API gannet_status_t gannet_tokenizer_open(const char* model_dir,
                                                 gannet_tokenizer_t** tokenizer_out);
/* NULL is a no-op. Must not race with other calls on this tokenizer. */
GANNET_API void gannet_tokenizer_close(gannet_tokenizer_t* tokenizer);
/* The engine's own tokenizer: valid until the engine is destroyed; never close it. NOT_FOUND when
 * the model has none (dummy models, folders without tokenizer.json). */
GANNET_API gannet_status_t gannet_engine_tokenizer(gannet_engine_t* engine,
                                                   const gannet_tokenizer_t** tokenizer_out);

typedef struct gannet_tokenizer_info {
  uint32_t struct_size; /* set by the caller; the library fills what fits */
  int32_t vocab_size;   /* one past the largest id */
  int32_t bos_id;       /* -1 when the vocabulary lacks the token */
  int32_t eos_id;
  int32_t pad_id;
  int32_t unk_id;
  int32_t start_of_turn_id; /* <|turn> */
  int32_t end_of_turn_id;   /* <turn|> */
} gannet_tokenizer_info_t;

#define GANNET_TOKENIZER_INFO_INIT \
  { (uint32_t)sizeof(gannet_tokenizer_info_t), 0, 0, 0, 0, 0, 0, 0 }

GANNET_API gannet_status_t gannet_tokenizer_get_info(const gannet_tokenizer_t* tokenizer,
                                                     gannet_tokenizer_info_t* info_out);

/* The buffer calls below write at most `capacity` elements. With ids_out/text_out NULL and
 * capacity 0 they only count: GANNET_OK with the size. When the buffer is too small they write
 * nothing, set the size needed and return GANNET_ERR_RESOURCE_EXHAUSTED. Text outputs are
 * NUL-terminated when capacity allows one more byte (the size never counts the NUL). */

/* text (text_len bytes, valid UTF-8) -> ids. add_special_tokens = 1 prepends what the
 * tokenizer's post-processor adds (Gemma: <bos>). */
GANNET_API gannet_status_t gannet_tokenize(const gannet_tokenizer_t* tokenizer, const char* text,
                                           size_t text_len, int32_t add_special_tokens,
                                           int32_t* ids_out, size_t capacity, size_t* num_ids_out);
/* ids -> UTF-8 text; skip_special_tokens = 1 drops <bos>, <|turn> and the like. */
GANNET_API gannet_status_t gannet_detokenize(const gannet_tokenizer_t* tokenizer,
                                             const int32_t* ids, size_t num_ids,
                                             int32_t skip_special_tokens, char* text_out,
                                             size_t capacity, size_t* text_len_out);
/* The text one token contributes when decoded alone (a byte token gives its raw byte, which
 * alone may not be valid UTF-8). */
GANNET_API gannet_status_t gannet_token_to_piece(const gannet_tokenizer_t* tokenizer, int32_t id,
                                                 char* text_out, size_t capacity,
                                                 size_t* text_len_out);
/* Renders chat messages into the prompt text the engine would build (the model's own chat
 * template when the checkpoint has one, else gannet's built-in Gemma-4 rendering for this model's
 * size class; it starts with "<bos>": tokenize it with add_special_tokens = 0). Text
 * cannot carry the request's split_special_tokens: tokenizing it gives the reference (default)
 * tokenization, in which markers spelled in the content are control tokens.
 * add_generation_prompt: 1 = end with the model turn opener, 0 = don't (unlike the request's
 * field, where 0 is the default "yes" and 2 is "no"); enable_thinking: 0 or 1. Other values of
 * these and of the other 0/1 flags are GANNET_ERR_INVALID_ARGUMENT. */
GANNET_API gannet_status_t gannet_apply_chat_template(const gannet_tokenizer_t* tokenizer,
                                                      const gannet_chat_message_t* messages,
                                                      size_t num_messages,
                                                      int32_t add_generation_prompt,
                                                      int32_t enable_thinking, char* text_out,
                                                      size_t capacity, size_t* text_len_out);

/* The same for a chat object in the OpenAI shape (gannet_request_t.chat_json: tools, tool calls,
 * tool results): the prompt text a request with this chat_json gets. */
GANNET_API gannet_status_t gannet_apply_chat_template_json(const gannet_tokenizer_t* tokenizer,
                                                           const char* chat_json,
                                                           int32_t add_generation_prompt,
                                                           int32_t enable_thinking, char* text_out,
                                                           size_t capacity, size_t* text_len_out);

/* 1 when the model folder carries its own chat template (chat_template.jinja, or
 * tokenizer_config.json's chat_template), which gannet renders; 0 when gannet's built-in Gemma-4
 * rendering is used (text messages only), or for NULL. */
GANNET_API int32_t gannet_tokenizer_has_chat_template(const gannet_tokenizer_t* tokenizer);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GANNET_GANNET_H_ */
