// The CLI's use of the C ABI: the model check before loading, engine creation with a progress
// bar (bytes, rate, time left), one request streamed to stdout (cancellable with Ctrl-C; thinking
// apart from the answer; logprobs collected), and the statistics line.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gannet/gannet.h"

namespace gannet_cli {

struct EngineOptions {
  std::string model_dir;
  std::string backend;
  int32_t device = 0;
  int32_t tensor_parallel_size = 0;  // tensor parallel ranks (0 = one device)
  std::vector<int32_t> device_ids;   // their devices, rank 0 first (empty = 0 .. size - 1)
  bool has_tp_id = false;            // one rank of a multi-process group (--tp-id)
  gannet_tp_id_t tp_id = {};         // the group's id
  int32_t tp_rank = 0;               // this process's rank in it
  int32_t threads = 0;
  int32_t max_model_len = 0;
  int32_t max_running = 0;
  int64_t kv_memory = 0;
  std::string kv_cache_dtype;       // "" = the library's default (bf16)
  std::string compute_dtype;        // "" = the library's default (auto)
  std::string weight_dtype;         // "" = as the checkpoint stores the weights; "int4-g32", ...
  bool kv_separate_k_eq_v = false;  // K=V layers keep K and V apart
  bool startup_warmup = false;      // every step shape once before the first request
  std::string draft_dir;            // speculative decoding with this MTP assistant ("" = off)
  int32_t spec_tokens = 0;          // drafts per round (0 = the library's default)
  bool progress = true;             // draw a progress bar on stderr when it is a terminal
  bool quiet = false;               // no engine summary line
};

// gannet_model_info with the CLI's hints on failure; false (message printed) when unreadable.
bool ReadModel(const std::string& command, const std::string& model_dir, gannet_model_info_t* info);

// Checks a request against the model before anything loads; false (message printed) if bad.
bool CheckRequest(const std::string& command, const gannet_request_t& request,
                  const gannet_model_info_t& info);

// Creates the engine or prints what went wrong and what to do; nullptr on failure. Unless quiet,
// prints one line saying where it runs (backend, device, memory, limits, load time).
gannet_engine_t* OpenEngine(const std::string& command, const EngineOptions& options);

// A rank other than 0 of a multi-process tensor-parallel group (--tp-id with --tp-rank > 0):
// such a process generates nothing itself.
inline bool ServesRankZero(const EngineOptions& o) { return o.has_tp_id && o.tp_rank > 0; }

// Joins the group and serves rank 0 until its engine is gone (gannet_engine_serve); the exit
// code: 0 when the group ended normally, 1 (message printed) otherwise.
int ServeRankZero(const std::string& command, const EngineOptions& options);

// One generated token's logprobs (requests with logprobs > 0).
struct TokenLogprobs {
  int32_t id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
};

struct RunResult {
  std::vector<int32_t> tokens;
  std::string text;      // the answer
  std::string thinking;  // the model's thinking (gannet_event_t.thinking), apart from the answer
  std::vector<TokenLogprobs> logprobs;
  bool thinking_shown = false;  // streamed thinking (a newline on stderr sets the answer apart)
  int32_t finish = 0;
  gannet_status_t status = GANNET_OK;
  std::string error;
  bool output_failed = false;  // a stdout write failed (the reason: OutError())
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
  int32_t draft_tokens = 0;     // drafts verified (speculative decoding)
  int32_t accepted_drafts = 0;  // of which accepted
  double ttft_ms = 0;           // submit -> first token
  double total_ms = 0;
  double tpot_ms() const {
    return tokens.size() > 1 ? (total_ms - ttft_ms) / (tokens.size() - 1) : 0.0;
  }
};

// Submits and runs the request until it ends; Ctrl-C cancels it. With `stream` the answer goes to
// stdout as it comes and the thinking to stderr (dimmed on a terminal), so stdout holds only the
// answer. Logprobs are collected in the result (PrintLogprobs shows them).
RunResult RunRequest(gannet_engine_t* engine, const gannet_request_t& request, bool stream);

// Thinking text on stderr: dimmed on a terminal (each piece closes its style, so a cancelled
// thought never leaves the terminal dim; control bytes escaped), as it is otherwise.
void WriteThinking(const char* text, size_t n);

// "logprobs: 'piece' -0.1234 | 'top1' -0.1234 ..." on stderr, one line per token.
void PrintLogprobs(gannet_engine_t* engine, const RunResult& r);

std::string FinishName(int32_t finish);
// "[12 prompt tokens (0 from the prefix cache), 64 generated, finish: length | load 1.2 s |
// TTFT 30.1 ms, TPOT 10.20 ms, 98.0 tok/s]" on stderr; load < 0 leaves it out.
void PrintStats(const RunResult& r, double load_seconds);
double EngineLoadSeconds(gannet_engine_t* engine);

}  // namespace gannet_cli
