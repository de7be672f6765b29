#include "examples/cli/session.h"

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <thread>

#include "examples/cli/request_flags.h"
#include "examples/cli/terminal.h"

namespace gannet_cli {
namespace {

std::string Gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / 1073741824.0);
  return buf;
}

int32_t DrawProgress(void* /*user*/, const gannet_progress_t* p) {
  static int last = -1;
  const int permille = static_cast<int>(p->fraction * 1000);
  if (permille == last) return 0;
  last = permille;
  const int width = 24;
  const int filled = static_cast<int>(p->fraction * width);
  char eta[32] = "";
  if (p->eta_s >= 0) std::snprintf(eta, sizeof(eta), ", %.0f s left", p->eta_s);
  std::fprintf(stderr, "\r\033[2Kloading %s [%s%s] %5.1f%% %s of %s, %.2f GiB/s%s", p->stage,
               std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(),
               p->fraction * 100, Gib(static_cast<double>(p->bytes_done)).c_str(),
               Gib(static_cast<double>(p->bytes_total)).c_str(), p->bytes_per_s / 1073741824.0,
               eta);
  if (p->bytes_done >= p->bytes_total) {
    std::fprintf(stderr, "\r\033[2K");
    last = -1;
  }
  std::fflush(stderr);
  return 0;
}

// The CLI spelling of the engine settings its error messages name.
const char kSettingNames[] =
    "  (CLI flags: max_running_seqs is --max-running, max_model_len is -c/--ctx-size, "
    "kv_memory_bytes is --kv-memory)\n";

}  // namespace

bool ReadModel(const std::string& command, const std::string& dir, gannet_model_info_t* info) {
  *info = gannet_model_info_t GANNET_MODEL_INFO_INIT;
  const gannet_status_t st = gannet_model_info(dir.c_str(), info);
  if (st == GANNET_OK) return true;
  std::fprintf(stderr, "gannet %s: cannot read the model: %s\n", command.c_str(),
               gannet_last_error_message());
  if (st == GANNET_ERR_NOT_FOUND) {
    std::fprintf(stderr,
                 "  hint: -m takes a Hugging Face checkpoint folder (config.json, *.safetensors, "
                 "tokenizer.json) or dummy:31b/26b-a4b/e4b/e2b; `gannet info DIR` checks one.\n");
  }
  return false;
}

bool CheckRequest(const std::string& command, const gannet_request_t& request,
                  const gannet_model_info_t& info) {
  if (gannet_request_check(&request, &info) == GANNET_OK) return true;
  std::fprintf(stderr, "gannet %s: %s\n", command.c_str(), gannet_last_error_message());
  if (!info.has_tokenizer) {
    std::fprintf(stderr,
                 "  hint: this model has no tokenizer.json: give --prompt-ids and --stop-id\n");
  }
  return false;
}

gannet_engine_t* OpenEngine(const std::string& command, const EngineOptions& o) {
  gannet_engine_config_t config = EngineConfigOf(o);
  if (o.progress && StderrIsTerminal()) config.progress_callback = DrawProgress;
  gannet_engine_t* engine = nullptr;
  const gannet_status_t st = gannet_engine_create(&config, &engine);
  if (st != GANNET_OK) {
    const std::string message = gannet_last_error_message();
    std::fprintf(stderr, "gannet %s: cannot load the model: %s\n", command.c_str(),
                 message.c_str());
    if (st == GANNET_ERR_UNIMPLEMENTED && o.backend != "cpu") {
      std::fprintf(stderr, "  hint: this build or GPU cannot run it on CUDA: try --backend cpu\n");
    } else if (st == GANNET_ERR_NOT_FOUND && o.backend == "cuda") {
      std::fprintf(stderr,
                   "  hint: no usable CUDA device: drop --backend cuda to run on the CPU\n");
    } else if (st == GANNET_ERR_RESOURCE_EXHAUSTED && message.find("max_") != std::string::npos) {
      std::fprintf(stderr, "%s", kSettingNames);
    }
    return nullptr;
  }
  if (!o.quiet) {
    gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
    if (gannet_engine_get_stats(engine, &s) == GANNET_OK) {
      const std::string where = s.device_id >= 0
                                    ? std::string(s.backend) + ":" + std::to_string(s.device_id)
                                    : std::string(s.backend);
      std::fprintf(stderr,
                   "[gannet: %s %s, %s of memory | weights %s, KV %s%s %s | up to %d sequences of "
                   "%d tokens | loaded in %.1f s]\n",
                   where.c_str(), s.device_name,
                   Gib(static_cast<double>(s.device_memory_bytes)).c_str(),
                   Gib(static_cast<double>(s.weight_bytes)).c_str(),
                   s.device_id < 0 ? "up to " : "", Gib(static_cast<double>(s.kv_bytes)).c_str(),
                   s.kv_cache_dtype, s.max_running_seqs, s.max_model_len, s.load_seconds);
      if (s.num_speculative_tokens > 0) {
        std::fprintf(stderr, "[gannet: speculative decoding with %s, %d drafts per round]\n",
                     o.draft_dir.c_str(), s.num_speculative_tokens);
      }
    }
  }
  return engine;
}

int ServeRankZero(const std::string& command, const EngineOptions& o) {
  std::fprintf(stderr,
               "gannet %s: rank %d of a tensor-parallel group of %d: loading this rank's shard, "
               "then serving rank 0 until it exits (this process generates nothing itself)\n",
               command.c_str(), o.tp_rank, o.tensor_parallel_size);
  gannet_engine_t* engine = OpenEngine(command, o);
  if (engine == nullptr) return 1;
  const gannet_status_t st = gannet_engine_serve(engine, -1);
  const std::string message = st == GANNET_OK ? "" : gannet_last_error_message();
  gannet_engine_destroy(engine);
  if (st != GANNET_OK) {
    std::fprintf(stderr, "gannet %s: rank %d left the group: %s: %s\n", command.c_str(), o.tp_rank,
                 gannet_status_string(st), message.c_str());
    return 1;
  }
  return 0;
}

double EngineLoadSeconds(gannet_engine_t* engine) {
  gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
  return gannet_engine_get_stats(engine, &s) == GANNET_OK ? s.load_seconds : -1.0;
}

namespace {

std::string Piece(const gannet_tokenizer_t* tok, int32_t id) {
  char buf[256];
  size_t n = 0;
  if (tok != nullptr && gannet_token_to_piece(tok, id, buf, sizeof(buf) - 1, &n) == GANNET_OK) {
    // Appended, not "'" + s: GCC 12 at -O3 reports operator+(const char*, string&&) as an
    // overlapping copy (-Wrestrict, a false positive); so below and in the CLI's other lines.
    std::string piece = "'";
    piece += EscapeForDisplay(std::string(buf, n));
    piece += '\'';
    return piece;
  }
  std::string piece = "#";
  piece += std::to_string(id);
  return piece;
}

}  // namespace

void WriteThinking(const char* text, size_t n) {
  static const bool tty = StderrIsTerminal();
  FlushOut();  // keep the order when stdout and stderr are one terminal
  const std::string shown =
      tty ? "\033[2m" + EscapeControls(std::string(text, n)) + "\033[0m" : std::string(text, n);
  std::fwrite(shown.data(), 1, shown.size(), stderr);
}

void PrintLogprobs(gannet_engine_t* engine, const RunResult& r) {
  const gannet_tokenizer_t* tok = nullptr;
  gannet_engine_tokenizer(engine, &tok);  // ids only without one
  for (const TokenLogprobs& t : r.logprobs) {
    std::string line = "logprobs: " + Piece(tok, t.id);
    char num[32];
    std::snprintf(num, sizeof(num), " %.4f |", t.logprob);
    line += num;
    for (const auto& [id, lp] : t.top) {
      std::snprintf(num, sizeof(num), " %.4f", lp);
      line += ' ';
      line += Piece(tok, id);
      line += num;
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

RunResult RunRequest(gannet_engine_t* engine, const gannet_request_t& request, bool stream) {
  RunResult r;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  uint64_t id = 0;
  gannet_status_t st = gannet_engine_submit(engine, &request, &id);
  if (st != GANNET_OK) {
    r.status = st;
    r.error = gannet_last_error_message();
    return r;
  }
  SetReplyRunning(true);
  bool done = false, cancelled = false;
  while (!done) {
    if (!cancelled && (InterruptRequested() || r.output_failed)) {
      gannet_engine_cancel(engine, id);  // a FINISH (cancelled) event follows
      cancelled = true;
    }
    const gannet_event_t* const* events = nullptr;
    size_t n = 0;
    if (gannet_engine_poll(engine, 50, 64, &events, &n) != GANNET_OK) {
      r.status = GANNET_ERR_INTERNAL;
      r.error = gannet_last_error_message();
      break;
    }
    for (size_t i = 0; i < n; ++i) {
      const gannet_event_t& e = *events[i];
      if (e.request_id != id) continue;
      // Events of an older library end before `thinking`: answer text.
      const bool thinking = e.struct_size > offsetof(gannet_event_t, thinking) && e.thinking != 0;
      if (e.text_len > 0 && thinking) {
        if (stream && r.thinking.empty()) r.thinking_shown = true;
        r.thinking.append(e.text, e.text_len);
        if (stream) WriteThinking(e.text, e.text_len);
      } else if (e.text_len > 0) {
        if (stream && r.thinking_shown && r.text.empty()) WriteThinking("\n", 1);
        r.text.append(e.text, e.text_len);
        if (stream && !r.output_failed) {
          r.output_failed = !WriteOut(e.text, e.text_len) || !FlushOut();
        }
      }
      if (e.type == GANNET_EVENT_TOKEN) {
        if (r.tokens.empty()) {
          r.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        }
        r.tokens.push_back(e.token_id);
        if (request.logprobs > 0) {
          TokenLogprobs t{e.token_id, e.logprob, {}};
          for (int32_t k = 0; k < e.num_top_logprobs; ++k) {
            t.top.emplace_back(e.top_token_ids[k], e.top_logprobs[k]);
          }
          r.logprobs.push_back(std::move(t));
        }
      } else {
        r.finish = e.finish_reason;
        r.status = e.status;
        r.error = e.message;
        r.prompt_tokens = e.num_prompt_tokens;
        r.cached_tokens = e.num_cached_prompt_tokens;
        r.draft_tokens = e.num_draft_tokens;
        r.accepted_drafts = e.num_accepted_draft_tokens;
        done = true;
      }
    }
  }
  SetReplyRunning(false);
  r.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return r;
}

std::string FinishName(int32_t finish) {
  switch (finish) {
    case GANNET_FINISH_STOP:
      return "stop";
    case GANNET_FINISH_LENGTH:
      return "length";
    case GANNET_FINISH_CANCELLED:
      return "cancelled";
    case GANNET_FINISH_ERROR:
      return "error";
    default:
      return "?";
  }
}

void PrintStats(const RunResult& r, double load_seconds) {
  FlushOut();  // keep the stats line after the text when both go to one terminal
  const double decode_s = (r.total_ms - r.ttft_ms) / 1000.0;
  char load[48] = "";
  if (load_seconds >= 0) std::snprintf(load, sizeof(load), " | load %.1f s", load_seconds);
  char spec[96] = "";
  if (r.draft_tokens > 0) {
    std::snprintf(spec, sizeof(spec), " | drafts %d, accepted %d (%.0f%%)", r.draft_tokens,
                  r.accepted_drafts, 100.0 * r.accepted_drafts / r.draft_tokens);
  }
  std::fprintf(stderr,
               "[%d prompt tokens (%d from the prefix cache), %zu generated, finish: %s%s | TTFT "
               "%.1f ms, TPOT %.2f ms, %.1f tok/s%s]\n",
               r.prompt_tokens, r.cached_tokens, r.tokens.size(), FinishName(r.finish).c_str(),
               load, r.ttft_ms, r.tpot_ms(),
               decode_s > 0 && r.tokens.size() > 1 ? (r.tokens.size() - 1) / decode_s : 0.0, spec);
}

}  // namespace gannet_cli
