// The engine: one loaded model served by a background engine thread (docs/request-path.md).
//
// Submit() validates and tokenizes a request on the caller's thread, queues it and returns its id
// at once. The engine thread drains the queue into the scheduler, runs steps (scheduler plan ->
// runner forward -> sampling) and turns the results into events that Poll() hands out. The
// C ABI (lib/capi) is a thin layer over this class.
//
// Thread safety: Submit, Cancel and GetStats from any thread; Poll from one thread at a time; the
// destructor must not race with other calls. Per-request problems become ERROR events; an
// unrecoverable backend failure makes the engine sticky DEVICE_LOST (every later Submit fails).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/sampling/sampling.h"
#include "lib/backend/backend.h"
#include "lib/model/config.h"
#include "lib/tokenizer/chat_format.h"
#include "lib/tokenizer/chat_template.h"
#include "lib/tokenizer/tokenizer.h"

namespace gannet::engine {

// Loading progress of one stage ("weights"): bytes done of the total, and time since it began.
struct LoadProgress {
  const char* stage = "";
  int64_t bytes_done = 0;
  int64_t bytes_total = 0;
  double elapsed_s = 0;
};

struct EngineConfig {
  std::string model_dir;
  std::string backend;  // "cpu", "cuda" or "" (auto)
  int device_id = 0;
  // Tensor parallelism in this process: the model split over tensor_parallel_size devices (0 or
  // 1 = one device), CUDA devices device_ids (empty = 0 .. size - 1; when given, the size may be
  // left 0). On the CPU backend the ranks are threads (tests).
  int tensor_parallel_size = 0;
  std::vector<int> device_ids;
  // One process per rank (tp_group_id set, from parallel::CreateNcclId on rank 0's process): this
  // process is rank tp_rank of tensor_parallel_size, on device_id (or device_ids' one entry).
  // Rank 0 serves requests; any other rank serves rank 0 (Serve) until rank 0 is destroyed.
  int tp_rank = 0;
  std::string tp_group_id;
  int max_running_seqs = 0;
  int max_step_tokens = 0;
  // Prompt tokens a step may carry while it decodes; 0 = no limit beyond max_step_tokens.
  int max_prefill_tokens_while_decoding = 0;
  int64_t max_model_len = 0;
  int page_size = 0;
  int64_t kv_memory_bytes = 0;
  int kv_sliding_pages = 0;
  int kv_full_pages = 0;
  bool enable_prefix_cache = true;
  int num_threads = 0;
  int max_queued_requests = 0;
  // Bounds on TOKEN events generated but not yet handed out by Poll (a host that stops polling
  // must not grow the engine without bound): one request's, and all requests' together (0 = the
  // defaults below). A token that would pass either ends its request with an ERROR event,
  // RESOURCE_EXHAUSTED, instead (the final event itself is always queued: max_queued_requests
  // bounds those).
  int max_undelivered_tokens_per_request = 0;
  int64_t max_undelivered_tokens = 0;
  bool enable_cuda_graphs = true;
  std::string load_format;  // "" / "auto" (safetensors) or "dummy"
  // KV cache storage: "" / "bf16" = the backend's own type (bf16 on CUDA, f32 on the CPU), "fp8" /
  // "fp8_e4m3" = FP8 E4M3 with per-(token, head) scales (backend.h).
  std::string kv_cache_dtype;
  // K=V layers (the full layers of 31B and 26B-A4B) keep K and V as two arrays instead of one V
  // array K is derived from (kv_layout.h: single store, the default, half their KV bytes).
  bool kv_separate_k_eq_v = false;
  // What CUDA computes in: "" / "auto" (f16 on GPUs older than sm_75, which have no bf16 tensor
  // cores; bf16 elsewhere), "bf16", or "f16" (weights converted at load; the residual stream,
  // norm inputs and logits stay f32). The CPU backend computes in f32 and takes only "auto".
  std::string compute_dtype;
  // Quantize the linear layers' dense matrices at load ("" = as stored; "int4-g32" ... as
  // model::ParseWeightDtype reads them; int4 only): model::QuantizeAtLoad.
  std::string weight_dtype;
  // Run every step shape the limits allow once before serving (runner/warmup.h), so the linear
  // layers' tuning and the decode graphs' recording happen at start, not in the first requests
  // that meet each shape.
  bool startup_warmup = false;
  // Speculative decoding with a Gemma-4 MTP assistant: its folder or "dummy:<variant>-assistant"
  // ("" = off), and the drafts per round K (1 to 8; 0 = 3).
  std::string draft_model_dir;
  int num_speculative_tokens = 0;
  // Loading progress, on the thread calling Create; returning false cancels the load (Create
  // fails with Cancelled).
  std::function<bool(const LoadProgress&)> progress;
  // Wraps the backend the engine chose before anything uses it (tests inject faults with a
  // backend::ForwardingBackend; not reachable through the C ABI).
  std::function<std::unique_ptr<backend::Backend>(std::unique_ptr<backend::Backend>)> wrap_backend;
  // Replaces greedy requests' drafts (spec_decoder.h): tests and the acceptance-sweep benchmark.
  std::function<void(uint64_t request_id, int64_t first_output, std::vector<int32_t>* drafts)>
      override_drafts;
  // Replaces how many drafts a greedy verify chunk accepts (spec/verify.h AcceptOverride): the
  // acceptance-sweep benchmark only.
  std::function<int(uint64_t request_id, int64_t first_output, int accepted, int num_drafts)>
      override_accept;
};

inline constexpr int kDefaultMaxUndeliveredTokensPerRequest = 4096;
inline constexpr int64_t kDefaultMaxUndeliveredTokens = 262144;

// One image of a request, preprocessed (HF's Gemma-4 image processor layout, docs/vision.md
// "Input"): pixel_values [max_patches, 3 * patch^2] f32 in [0, 1], positions [max_patches, 2]
// int32 (x, y), (-1, -1) on padding rows. Its soft-token count is real patches / pooling_kernel^2.
struct ImageInput {
  std::vector<float> pixel_values;
  std::vector<int32_t> positions;
};

// One image as the public API hands it: encoded PNG/JPEG/WebP bytes, or (raw) width x height x 3
// bytes of RGB, rows top down; decoded and preprocessed at Submit on the caller's thread
// (image_input.h). max_soft_tokens: 0 = 280, else one of 70, 140, 280, 560, 1120.
struct ImageSource {
  std::vector<uint8_t> bytes;
  bool raw = false;
  int32_t width = 0;
  int32_t height = 0;
  int32_t max_soft_tokens = 0;
};

// How a request's sampling seed is chosen (GANNET_SEED_* of the C ABI).
enum class SeedMode : int32_t { kRandom = 0, kFixed = 1, kRequestId = 2 };

struct RequestInput {
  std::vector<int32_t> prompt_tokens;
  std::optional<std::string> prompt_text;
  std::vector<tokenizer::ChatMessage> messages;
  // A chat in the OpenAI shape ({"messages", "tools"}, tokenizer/chat_format.h), for what
  // `messages` cannot say: tool calls, tool results, content parts, tools.
  std::optional<Json> chat;
  bool add_generation_prompt = true;
  bool enable_thinking = false;
  sampling::SamplingParams sampling;  // its seed is set from seed_mode at submit
  SeedMode seed_mode = SeedMode::kRandom;
  uint64_t seed = 0;  // with kFixed
  int32_t max_tokens = 0;
  int32_t min_tokens = 0;
  std::optional<std::vector<int32_t>> stop_token_ids;  // absent: the Gemma-4 defaults
  bool ignore_default_stop_tokens = false;
  std::vector<std::string> stop_strings;
  int32_t logprobs = 0;
  int32_t priority = 0;
  int64_t deadline_ms = 0;
  bool disable_speculation = false;  // decode this request without drafts
  // Chat messages: special tokens spelled in the content ("<|turn>") are tokenized as plain
  // text, so a message cannot open or close turns (tokenizer::Tokenizer::Encode's plain_ranges).
  bool split_special_tokens = false;
  // Chat prompts: text appended after the rendered chat (the forced start of the reply), read
  // as template text: its control-token spellings are control tokens.
  std::string reply_prefix;
  // Images, in prompt order: the k-th run of the config's image_token_id in the prompt is the
  // k-th image's soft tokens (its length must be the image's soft-token count). Internal form
  // (tests); the C ABI gives image_sources. CPU backend only (other backends: Unimplemented at
  // Submit).
  std::vector<ImageInput> images;
  // Images as the C ABI gives them, in prompt order: the k-th image_token_id of the prompt (one
  // token per image: `<|image|>` in text, a {"type": "image"} part in a chat) is the k-th image's
  // placeholder, expanded at Submit to boi + N x image_token_id + eoi once the image is
  // preprocessed. Exclusive with `images`.
  std::vector<ImageSource> image_sources;
};

enum class EventType : int32_t { kToken = 1, kFinish = 2, kError = 3 };
enum class EventFinish : int32_t { kNone = 0, kStop = 1, kLength = 2, kCancelled = 3, kError = 4 };

struct Event {
  uint64_t request_id = 0;
  EventType type = EventType::kToken;
  int32_t token_id = -1;
  std::string text;
  bool thinking = false;  // text is from the model's thought channel (TextOutput)
  float logprob = 0.0f;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
  EventFinish finish = EventFinish::kNone;
  absl::Status status;
  int32_t num_prompt_tokens = 0;
  int32_t num_generated_tokens = 0;
  int32_t num_cached_prompt_tokens = 0;
  int32_t num_draft_tokens = 0;           // FINISH/ERROR: drafts verified (speculation)
  int32_t num_accepted_draft_tokens = 0;  // of which accepted
};

struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t kv_pages_total[2] = {0, 0};
  int32_t kv_pages_used[2] = {0, 0};
  int32_t kv_pages_cached[2] = {0, 0};
  int32_t kv_pages_free[2] = {0, 0};
  int32_t page_size = 0;
  int64_t prefix_cache_hit_tokens = 0;
  int64_t prefix_cache_query_tokens = 0;
  double prefix_cache_hit_rate = 0;
  int64_t total_prompt_tokens = 0;
  int64_t total_generated_tokens = 0;
  int64_t num_preemptions = 0;
  int64_t num_steps = 0;
  double prompt_tokens_per_s = 0;
  double generated_tokens_per_s = 0;
  int64_t weight_bytes = 0;
  int64_t kv_bytes_per_token[2] = {0, 0};
  int32_t sliding_window = 0;
  int32_t max_model_len = 0;
  int32_t max_running_seqs = 0;  // after any lowering to what the memory holds
  int64_t kv_bytes = 0;          // KV arrays in backend memory
  std::string backend;           // "cpu", "cuda"
  std::string kv_cache_dtype;    // what the KV cache stores: "bf16", "f32" (cpu), "fp8_e4m3"
  std::string compute_dtype;  // what the activations and matrices are: "bf16", "f16", "f32" (cpu)
  int32_t device_id = -1;     // CUDA ordinal; -1 on the CPU
  std::string device_name;    // "NVIDIA H100 80GB HBM3 (sm_90)", "16 threads"
  int64_t device_memory_bytes = 0;  // 0 on the CPU
  std::string backend_fallback;     // why an automatic choice ran on the CPU; "" otherwise
  double load_seconds = 0;          // Create, from start to ready
  // Speculative decoding (zero without a drafter).
  int32_t num_speculative_tokens = 0;    // K
  int64_t spec_verify_chunks = 0;        // chunks that verified drafts
  int64_t spec_draft_tokens = 0;         // drafts verified
  int64_t spec_accepted_tokens = 0;      // of which accepted
  double spec_mean_accepted_length = 0;  // tokens per verify chunk: accepted drafts + 1
  int64_t spec_draft_rounds = 0;         // drafter rounds run
  // Decode steps (no prompt tokens) run back to back, each from its start to the next step's: their
  // wall time, and the device time from the step's first device op to its last (CUDA events). The
  // rest is host work on the critical path (planning, batch building, events, text): the device
  // idles through it (host gaps inside the span are not counted). Device time is 0 on the CPU
  // backend, where all work is host work.
  int64_t timed_decode_steps = 0;
  double timed_decode_seconds = 0;
  double timed_decode_device_seconds = 0;
};

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  absl::StatusOr<uint64_t> Submit(RequestInput input);
  // NotFound for an unknown or already finished request.
  absl::Status Cancel(uint64_t request_id);
  // Waits up to timeout_ms (< 0: forever) for at least one event; appends at most max_events.
  absl::Status Poll(int timeout_ms, size_t max_events, std::vector<Event>* out);
  EngineStats GetStats() const;
  // A rank other than 0 of a multi-process group: waits up to timeout_s (< 0: no limit) for the
  // group to end (OK when rank 0 ended it; device lost when a rank died; DeadlineExceeded while
  // it still serves). FailedPrecondition on an engine that serves requests itself.
  absl::Status Serve(double timeout_s);
  // The model's tokenizer (null without tokenizer.json) and variant; valid for the engine's life.
  const tokenizer::Tokenizer* tokenizer() const;
  // How chat prompts are rendered (null without a tokenizer); valid for the engine's life.
  const tokenizer::ChatFormat* chat_format() const;
  model::Variant variant() const;

  class Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gannet::engine
