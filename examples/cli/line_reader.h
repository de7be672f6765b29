// What `gannet chat` reads: one message at a time.
//
// On a terminal (stdin and stdout both), with libedit (BSD licence; the CLI alone links it, never
// libgannet): line editing (arrow keys, Home/End, Ctrl-A/E/K/W, ...) and history (up/down) for the
// session. Without libedit the terminal's own line discipline edits (Backspace only; a note says
// so once). Everywhere:
// - a line ending in `\` goes on: the backslash is dropped and the next line joins the message;
// - on a terminal, lines that were already waiting when Enter was read (a paste of several lines)
//   join the message, so a pasted paragraph is one turn. Typed lines never are: a person cannot
//   type the next line within the few milliseconds this looks.
// Piped input is one message a line (plus the `\` rule), as before.
#pragma once

#include <memory>
#include <string>

#include "examples/cli/terminal.h"

namespace gannet_cli {

class LineReader {
 public:
  // interactive: stdin and stdout are terminals. prompt and continuation are plain text (the
  // reader styles them).
  LineReader(bool interactive, std::string prompt, std::string continuation);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // One message: kLine (message set, without the final newline), kEnd at the end of input
  // (Ctrl-D), kTooLong for a message past kMaxPromptBytes (read to its end and dropped).
  LineRead ReadMessage(std::string* message);

  // Whether libedit edits the lines (false for piped input or a build without libedit).
  bool editing() const;

 private:
  struct Editor;
  LineRead ReadLine(bool first, std::string* line);
  bool interactive_;
  std::string prompt_, continuation_;
  std::unique_ptr<Editor> editor_;
};

// Whether more input is already waiting on the terminal on stdin within `wait_ms`: what a paste
// leaves after its first line. False when stdin is not a terminal.
bool TerminalInputPending(int wait_ms);

}  // namespace gannet_cli
