// Unicode helpers the tokenizer needs on top of lib/common/utf8.h: the two whitespace
// definitions its reference implementations use, and the invalid-UTF-8 replacement rule.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gannet::tokenizer {

// Rust's char::is_whitespace (the Unicode White_Space property). HF tokenizers uses it for the
// Strip normalizer and for the lstrip/rstrip flags of added tokens.
bool IsUnicodeWhitespace(uint32_t cp);

// Python's str.isspace(): White_Space plus U+001C..U+001F. Jinja's `trim` filter (str.strip)
// uses it, so the chat template must too.
bool IsPythonSpace(uint32_t cp);

// The rule for invalid UTF-8 input: every maximal ill-formed subsequence (Unicode §3.9, "U+FFFD
// substitution of maximal subparts") becomes one U+FFFD. This is exactly what Python's
// bytes.decode("utf-8", "replace") does, so raw bytes given to Tokenizer::Encode produce the ids
// HF produces for the Python-decoded string. Returns false and leaves *out alone when `text` is
// already valid (the common case costs no copy).
bool ReplaceInvalidUtf8(std::string_view text, std::string* out);

// Decodes the well-formed code point starting at s[0]; *len receives its length (1..4).
// Requires valid UTF-8 (callers sanitize first); returns U+FFFD with *len = 1 otherwise.
uint32_t NextCodePoint(std::string_view s, size_t* len);

// The code point that ends at s.end(), with its length. Requires valid UTF-8.
uint32_t LastCodePoint(std::string_view s, size_t* len);

// str.strip() of Python (and therefore Jinja's `trim`).
std::string_view TrimPythonSpace(std::string_view s);

}  // namespace gannet::tokenizer
