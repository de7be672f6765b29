#include "examples/cli/line_reader.h"

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#if GANNET_HAVE_LIBEDIT
#include <histedit.h>
#endif

namespace gannet_cli {

#if GANNET_HAVE_LIBEDIT

struct LineReader::Editor {
  EditLine* el = nullptr;
  History* hist = nullptr;
  std::string shown_prompt;  // what PromptFn hands libedit, with \1-delimited escapes

  static const char* PromptFn(EditLine* el) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    return static_cast<Editor*>(self)->shown_prompt.c_str();
  }
  ~Editor() {
    if (el != nullptr) el_end(el);
    if (hist != nullptr) history_end(hist);
  }
};

#else

struct LineReader::Editor {};

#endif

namespace {

// The CLI's bold prompt, raw (never through the escaping meant for model text).
std::string Bold(const std::string& s) { return "\033[1m" + s + "\033[0m"; }

}  // namespace

LineReader::LineReader(bool interactive, std::string prompt, std::string continuation)
    : interactive_(interactive),
      prompt_(std::move(prompt)),
      continuation_(std::move(continuation)) {
#if GANNET_HAVE_LIBEDIT
  if (interactive_) {
    auto e = std::make_unique<Editor>();
    e->el = el_init("gannet", stdin, stdout, stderr);
    e->hist = history_init();
    if (e->el != nullptr && e->hist != nullptr) {
      HistEvent ev;
      history(e->hist, &ev, H_SETSIZE, 1000);
      history(e->hist, &ev, H_SETUNIQUE, 1);
      el_set(e->el, EL_CLIENTDATA, e.get());
      el_set(e->el, EL_EDITOR, "emacs");
      el_set(e->el, EL_HIST, history, e->hist);
      // libedit restores the terminal before a signal reaches the CLI's handler (Ctrl-C at the
      // prompt exits with the terminal in its normal mode).
      el_set(e->el, EL_SIGNAL, 1);
      el_set(e->el, EL_PROMPT_ESC, &Editor::PromptFn, '\1');
      el_source(e->el, nullptr);  // the user's ~/.editrc, as other libedit programs read it
      editor_ = std::move(e);
    }
  }
#endif
}

LineReader::~LineReader() = default;

bool LineReader::editing() const { return editor_ != nullptr; }

bool TerminalInputPending(int wait_ms) {
  if (::isatty(STDIN_FILENO) != 1) return false;
  // A terminal in canonical mode reports input only once a whole line is in: the last line of a
  // paste (no newline yet) would look absent. Look with the line discipline off for a moment;
  // switching modes keeps what is queued.
  termios saved;
  if (::tcgetattr(STDIN_FILENO, &saved) != 0) return false;
  termios raw = saved;
  raw.c_lflag &= ~(ICANON | ECHO);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  ::tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  pollfd p = {STDIN_FILENO, POLLIN, 0};
  const bool pending = ::poll(&p, 1, wait_ms) > 0 && (p.revents & POLLIN) != 0;
  ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  return pending;
}

LineRead LineReader::ReadLine(bool first, std::string* line) {
  const std::string& prompt = first ? prompt_ : continuation_;
#if GANNET_HAVE_LIBEDIT
  if (editor_ != nullptr) {
    FlushOut();  // libedit writes to the terminal itself: what stdout holds goes first
    editor_->shown_prompt = "\1\033[1m\1" + prompt + "\1\033[0m\1";
    int count = 0;
    const char* got = el_gets(editor_->el, &count);
    if (got == nullptr || count <= 0) return LineRead::kEnd;
    line->assign(got, static_cast<size_t>(count));
    if (!line->empty() && line->back() == '\n') line->pop_back();
    if (!line->empty()) {
      HistEvent ev;  // each line, as a shell keeps them: up/down recall lines
      history(editor_->hist, &ev, H_ENTER, line->c_str());
    }
    if (line->size() > kMaxPromptBytes) return LineRead::kTooLong;
    return LineRead::kLine;
  }
#endif
  if (interactive_) {
    WriteRaw(Bold(prompt));
  } else if (first) {
    WriteRaw(prompt);
  }
  FlushOut();
  return ReadLineBounded(std::cin, kMaxPromptBytes, line);
}

LineRead LineReader::ReadMessage(std::string* message) {
  message->clear();
  std::string line;
  bool too_long = false;
  for (bool first = true;; first = false) {
    const LineRead got = ReadLine(first, &line);
    if (got == LineRead::kEnd) {
      if (first) return LineRead::kEnd;
      break;  // the end of input ends the message
    }
    too_long =
        too_long || got == LineRead::kTooLong || message->size() + line.size() > kMaxPromptBytes;
    const bool continued = !line.empty() && line.back() == '\\';
    if (continued) line.pop_back();
    if (!too_long) {
      if (!first) *message += '\n';
      *message += line;
    }
    // Typed continuation (`\`), or the rest of a paste already waiting (the libedit reader reads
    // byte by byte, so a paste's later lines are still queued on the terminal; std::cin may
    // hold them in its buffer).
    const bool pasted =
        interactive_ && (std::cin.rdbuf()->in_avail() > 0 || TerminalInputPending(25));
    if (!continued && !pasted) break;
  }
  return too_long ? LineRead::kTooLong : LineRead::kLine;
}

}  // namespace gannet_cli
