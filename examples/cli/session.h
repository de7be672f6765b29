// The CLI's use of the C ABI: engine creation with a progress bar, one request streamed to the
// terminal, and the timing numbers (TTFT, TPOT, tokens/s) the CLI reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gannet/gannet.h"

namespace gannet_cli {

struct EngineOptions {
  std::string model_dir;
  std::string backend;
  int threads = 0;
  int max_model_len = 0;
  bool progress = true;  // draw a progress bar on stderr when it is a terminal
};

// Creates the engine or prints what went wrong and what to do; nullptr on failure.
gannet_engine_t* OpenEngine(const EngineOptions& options);

struct RunResult {
  std::vector<int32_t> tokens;
  std::string text;
  int32_t finish = 0;
  gannet_status_t status = GANNET_OK;
  std::string error;
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
  double ttft_ms = 0;  // submit -> first token
  double total_ms = 0;
  double tpot_ms() const {
    return tokens.size() > 1 ? (total_ms - ttft_ms) / (tokens.size() - 1) : 0.0;
  }
};

// Submits and streams the text (to stdout when `stream`) until the request ends.
RunResult RunRequest(gannet_engine_t* engine, const gannet_request_t& request, bool stream);

std::string FinishName(int32_t finish);
void PrintStats(const RunResult& r);
bool StderrIsTerminal();

}  // namespace gannet_cli
