#include "examples/cli/terminal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>

#include "lib/common/utf8.h"

namespace gannet_cli {
namespace {

int g_out_errno = 0;
std::atomic<bool> g_reply_running{false};
std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) {
  if (g_reply_running.load() && !g_interrupted.exchange(true)) return;  // cancel the reply
  const char nl = '\n';
  (void)!::write(STDERR_FILENO, &nl, 1);
  ::_exit(130);
}

}  // namespace

bool StdoutIsTerminal() { return ::isatty(STDOUT_FILENO) == 1; }
bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

std::string EscapeControls(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  char buf[8];
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(text[i + 1]));
      out += buf;
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string EscapeForDisplay(const std::string& text) {
  std::string valid;
  char buf[8];
  for (size_t i = 0; i < text.size();) {
    const size_t n = gannet::Utf8SequenceLength(std::string_view(text).substr(i));
    if (n == 0) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(text[i]));
      valid += buf;
      ++i;
    } else {
      valid.append(text, i, n);
      i += n;
    }
  }
  return EscapeControls(valid);
}

bool WriteOut(const char* data, size_t n) {
  if (g_out_errno != 0) return false;
  if (n == 0) return true;
  static const bool tty = StdoutIsTerminal();
  const std::string escaped = tty ? EscapeControls(std::string(data, n)) : std::string();
  const char* p = tty ? escaped.data() : data;
  const size_t len = tty ? escaped.size() : n;
  errno = 0;
  if (std::fwrite(p, 1, len, stdout) != len) {
    g_out_errno = errno != 0 ? errno : EIO;
    return false;
  }
  return true;
}

bool WriteRaw(const std::string& s) {
  if (g_out_errno != 0) return false;
  errno = 0;
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) {
    g_out_errno = errno != 0 ? errno : EIO;
    return false;
  }
  return true;
}

bool FlushOut() {
  if (g_out_errno == 0) {
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) g_out_errno = errno != 0 ? errno : EIO;
  }
  return g_out_errno == 0;
}

std::string OutError() {
  return g_out_errno == 0
             ? ""
             : std::string("cannot write to standard output: ") + std::strerror(g_out_errno);
}

void InstallInterruptHandler() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

void SetReplyRunning(bool running) {
  if (running) g_interrupted.store(false);
  g_reply_running.store(running);
}

bool InterruptRequested() { return g_interrupted.load(); }

bool ReadAllBounded(std::istream& in, size_t max_bytes, std::string* out) {
  out->clear();
  char buf[1 << 16];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    const size_t n = static_cast<size_t>(in.gcount());
    if (out->size() + n > max_bytes) {
      out->append(buf, max_bytes - out->size());
      return false;
    }
    out->append(buf, n);
  }
  return true;
}

LineRead ReadLineBounded(std::istream& in, size_t max_bytes, std::string* line) {
  line->clear();
  bool too_long = false;
  for (int c; (c = in.get()) != std::char_traits<char>::eof();) {
    if (c == '\n') return too_long ? LineRead::kTooLong : LineRead::kLine;
    if (line->size() < max_bytes) {
      line->push_back(static_cast<char>(c));
    } else {
      too_long = true;
    }
  }
  if (too_long) return LineRead::kTooLong;
  return line->empty() ? LineRead::kEnd : LineRead::kLine;
}

}  // namespace gannet_cli
