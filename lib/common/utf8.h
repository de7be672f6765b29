// Small UTF-8 helpers shared by the JSON reader and the tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gannet {

// Length of the well-formed UTF-8 sequence at the start of s (1..4), or 0 if s starts with an
// ill-formed sequence (overlong, surrogate, > U+10FFFF, truncated, stray continuation byte).
size_t Utf8SequenceLength(std::string_view s);

// Decodes the sequence at s[0..len); only valid after Utf8SequenceLength returned len > 0.
uint32_t DecodeUtf8(std::string_view s, size_t len);

void AppendUtf8(uint32_t code_point, std::string* out);

bool IsValidUtf8(std::string_view s);

}  // namespace gannet

namespace gannet {

// A string from a file or a caller, made safe to put in an error message: bytes that are not
// valid UTF-8, control characters and backslashes are written \xNN (\\), and more than
// max_bytes is cut with "...". Messages stay one readable line whatever the input holds.
std::string EscapeForMessage(std::string_view s, size_t max_bytes = 80);

}  // namespace gannet
