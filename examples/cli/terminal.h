// What the CLI writes and how it is interrupted.
//
// Output: every write to stdout goes through WriteOut, which remembers the first failure (a full
// disk, /dev/full, a closed pipe) so the command can stop and exit non-zero with the reason.
// When stdout is a terminal, control bytes from the model (C0 except newline and tab, DEL, and
// the C1 range) are shown escaped (\x1b), so a model cannot move the cursor or retitle the
// window; piped output keeps the bytes exactly.
//
// Ctrl-C: the first one during a reply asks RunRequest to cancel that reply (statistics still
// print, chat returns to its prompt); a Ctrl-C with no reply running, or a second one, exits
// at once with status 130.
#pragma once

#include <cstddef>
#include <istream>
#include <string>

namespace gannet_cli {

// Writes text to stdout (escaped on a terminal). False once any write has failed.
bool WriteOut(const char* data, size_t n);
inline bool WriteOut(const std::string& s) { return WriteOut(s.data(), s.size()); }
// Writes the CLI's own bytes to stdout as they are (its prompt and styling escapes), never
// escaped: only text from the model is. Shares WriteOut's error state.
bool WriteRaw(const std::string& s);
// Flushes stdout; false (and the reason in OutError) if it or any earlier write failed.
bool FlushOut();
std::string OutError();

// Control bytes of `text` escaped as \xNN (UTF-8 C1 controls as \u0080..\u009f).
std::string EscapeControls(const std::string& text);
// EscapeControls, and bytes that are not valid UTF-8 as \xNN too (a token's piece can be one
// byte of a multi-byte character): for diagnostic lines such as --logprobs.
std::string EscapeForDisplay(const std::string& text);

void InstallInterruptHandler();
// Marks a reply running (Ctrl-C cancels it) or not (Ctrl-C exits).
void SetReplyRunning(bool running);
// Whether Ctrl-C asked the running reply to stop.
bool InterruptRequested();

// Input: prompts are bounded (stdin may be /dev/zero or `yes`) and must not hold NUL bytes (the
// C ABI takes NUL-terminated text, so a NUL would silently cut the prompt).
inline constexpr size_t kMaxPromptBytes = size_t{64} << 20;
// Reads all of `in`; false once more than max_bytes have come (out then holds max_bytes).
bool ReadAllBounded(std::istream& in, size_t max_bytes, std::string* out);
// std::getline with a bound: kTooLong for a line longer than max_bytes (read to its end and
// dropped), kEnd at the end of input.
enum class LineRead { kLine, kEnd, kTooLong };
LineRead ReadLineBounded(std::istream& in, size_t max_bytes, std::string* line);

bool StdoutIsTerminal();
bool StderrIsTerminal();

}  // namespace gannet_cli
