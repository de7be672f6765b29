// Process-wide logging with a replaceable sink.
//
// The default sink writes "gannet [I] message" lines to stderr. The C ABI installs the host's log
// callback through SetLogSink. The level comes from GANNET_LOG_LEVEL (debug, info, warning,
// error, off; default warning: a library quiet for embedders; any other value is said on stderr
// and means warning) unless SetLogLevel is called. Thread-safe: the sink is called under a
// mutex, so a sink never sees two messages at once.
#pragma once

#include <optional>
#include <string_view>

#include "fmt/format.h"

namespace gannet {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kOff = 4 };

// C-compatible sink so the C ABI can pass its callback straight through.
using LogSinkFn = void (*)(void* user_data, int level, const char* message);

// A GANNET_LOG_LEVEL value ("warn" is warning); nullopt for anything else.
std::optional<LogLevel> ParseLogLevel(std::string_view value);

void SetLogSink(LogSinkFn fn, void* user_data);  // nullptr restores the stderr sink
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool LogEnabled(LogLevel level);
void LogMessage(LogLevel level, std::string_view message);

template <typename... Args>
void Log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (!LogEnabled(level)) return;
  LogMessage(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace gannet

#define GANNET_LOG_DEBUG(...) ::gannet::Log(::gannet::LogLevel::kDebug, __VA_ARGS__)
#define GANNET_LOG_INFO(...) ::gannet::Log(::gannet::LogLevel::kInfo, __VA_ARGS__)
#define GANNET_LOG_WARNING(...) ::gannet::Log(::gannet::LogLevel::kWarning, __VA_ARGS__)
#define GANNET_LOG_ERROR(...) ::gannet::Log(::gannet::LogLevel::kError, __VA_ARGS__)
