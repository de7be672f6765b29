#include "lib/common/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

namespace gannet {

std::optional<LogLevel> ParseLogLevel(std::string_view v) {
  if (v == "debug") return LogLevel::kDebug;
  if (v == "info") return LogLevel::kInfo;
  if (v == "warning" || v == "warn") return LogLevel::kWarning;
  if (v == "error") return LogLevel::kError;
  if (v == "off") return LogLevel::kOff;
  return std::nullopt;
}

namespace {

LogLevel LevelFromEnv() {
  const char* v = std::getenv("GANNET_LOG_LEVEL");
  // Embedders get warnings and errors only unless they ask for more (issue 57).
  if (v == nullptr) return LogLevel::kWarning;
  std::optional<LogLevel> level = ParseLogLevel(v);
  if (level.has_value()) return *level;
  // Said once, at the first log call or level query, on stderr (the sink may not be set yet). The
  // value is not echoed: it may be anything, control characters included.
  std::fprintf(stderr,
               "gannet [W] GANNET_LOG_LEVEL (%zu bytes) is not one of debug, info, warning, "
               "error, off; using warning\n",
               std::strlen(v));
  return LogLevel::kWarning;
}

struct LogState {
  std::mutex mu;
  LogSinkFn sink = nullptr;
  void* user_data = nullptr;
  std::atomic<int> level{static_cast<int>(LevelFromEnv())};
};

LogState& State() {
  static LogState* state = new LogState();  // never destroyed: logging works during exit
  return *state;
}

void StderrSink(int level, const char* message) {
  static const char kTag[] = {'D', 'I', 'W', 'E'};
  std::fprintf(stderr, "gannet [%c] %s\n", kTag[level < 0 || level > 3 ? 3 : level], message);
}

}  // namespace

void SetLogSink(LogSinkFn fn, void* user_data) {
  LogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.sink = fn;
  s.user_data = user_data;
}

void SetLogLevel(LogLevel level) { State().level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(State().level.load()); }
bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= State().level.load(std::memory_order_relaxed) &&
         level != LogLevel::kOff;
}

void LogMessage(LogLevel level, std::string_view message) {
  LogState& s = State();
  std::string text(message);
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.sink != nullptr) {
    s.sink(s.user_data, static_cast<int>(level), text.c_str());
  } else {
    StderrSink(static_cast<int>(level), text.c_str());
  }
}

}  // namespace gannet
