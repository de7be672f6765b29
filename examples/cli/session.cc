#include "examples/cli/session.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace gannet_cli {
namespace {

void DrawProgress(void* /*user*/, const char* stage, double fraction) {
  static int last = -1;
  int percent = static_cast<int>(fraction * 100);
  if (percent == last) return;
  last = percent;
  const int width = 30;
  int filled = static_cast<int>(fraction * width);
  std::fprintf(stderr, "\r\033[2Kloading %-8s [%s%s] %3d%%", stage, std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), percent);
  if (percent >= 100) {
    std::fprintf(stderr, "\r\033[2K");
    last = -1;
  }
  std::fflush(stderr);
}

}  // namespace

bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

gannet_engine_t* OpenEngine(const EngineOptions& o) {
  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  config.model_dir = o.model_dir.c_str();
  config.backend = o.backend.empty() ? nullptr : o.backend.c_str();
  config.num_threads = o.threads;
  config.max_model_len = o.max_model_len;
  if (o.progress && StderrIsTerminal()) config.progress_callback = DrawProgress;
  gannet_engine_t* engine = nullptr;
  gannet_status_t st = gannet_engine_create(&config, &engine);
  if (st != GANNET_OK) {
    std::fprintf(stderr, "gannet: cannot load the model: %s\n", gannet_last_error_message());
    if (st == GANNET_ERR_NOT_FOUND) {
      std::fprintf(stderr,
                   "  hint: -m takes a Hugging Face checkpoint folder (config.json, *.safetensors, "
                   "tokenizer.json); `gannet info DIR` checks one.\n");
    } else if (st == GANNET_ERR_UNIMPLEMENTED) {
      std::fprintf(stderr, "  hint: try --backend cpu, or see `gannet info DIR`.\n");
    }
    return nullptr;
  }
  return engine;
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
  bool done = false;
  while (!done) {
    const gannet_event_t* events = nullptr;
    size_t n = 0;
    if (gannet_engine_poll(engine, 200, 64, &events, &n) != GANNET_OK) {
      r.status = GANNET_ERR_INTERNAL;
      r.error = gannet_last_error_message();
      break;
    }
    for (size_t i = 0; i < n; ++i) {
      const gannet_event_t& e = events[i];
      if (e.request_id != id) continue;
      if (e.text_len > 0) {
        r.text.append(e.text, e.text_len);
        if (stream) {
          std::fwrite(e.text, 1, e.text_len, stdout);
          std::fflush(stdout);
        }
      }
      if (e.type == GANNET_EVENT_TOKEN) {
        if (r.tokens.empty()) {
          r.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        }
        r.tokens.push_back(e.token_id);
      } else {
        r.finish = e.finish_reason;
        r.status = e.status;
        r.error = e.message;
        r.prompt_tokens = e.num_prompt_tokens;
        r.cached_tokens = e.num_cached_prompt_tokens;
        done = true;
      }
    }
  }
  r.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return r;
}

std::string FinishName(int32_t finish) {
  switch (finish) {
    case GANNET_FINISH_STOP: return "stop";
    case GANNET_FINISH_LENGTH: return "length";
    case GANNET_FINISH_CANCELLED: return "cancelled";
    case GANNET_FINISH_ERROR: return "error";
    default: return "?";
  }
}

void PrintStats(const RunResult& r) {
  std::fflush(stdout);  // keep the stats line after the text when both go to one terminal
  const double decode_s = (r.total_ms - r.ttft_ms) / 1000.0;
  std::fprintf(stderr,
               "[%d prompt tokens (%d from the prefix cache), %zu generated, finish: %s | TTFT "
               "%.1f ms, TPOT %.2f ms, %.1f tok/s]\n",
               r.prompt_tokens, r.cached_tokens, r.tokens.size(), FinishName(r.finish).c_str(),
               r.ttft_ms, r.tpot_ms(),
               decode_s > 0 && r.tokens.size() > 1 ? (r.tokens.size() - 1) / decode_s : 0.0);
}

}  // namespace gannet_cli
