#include "lib/tokenizer/unicode_text.h"

#include "lib/common/utf8.h"

namespace gannet::tokenizer {

bool IsUnicodeWhitespace(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool IsPythonSpace(uint32_t cp) { return (cp >= 0x1C && cp <= 0x1F) || IsUnicodeWhitespace(cp); }

namespace {

// Length of the maximal prefix of an ill-formed sequence starting at s[0] that could still begin
// a well-formed sequence (Unicode Table 3-7); at least 1.
size_t MaximalSubpart(std::string_view s) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = b(0);
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  size_t n = 1;
  while (n < need && n < s.size()) {
    unsigned char x = b(n);
    bool ok = n == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

bool ReplaceInvalidUtf8(std::string_view text, std::string* out) {
  if (IsValidUtf8(text)) return false;
  out->clear();
  out->reserve(text.size() + 8);
  size_t i = 0;
  while (i < text.size()) {
    size_t n = Utf8SequenceLength(text.substr(i));
    if (n > 0) {
      out->append(text.data() + i, n);
      i += n;
    } else {
      out->append("\xEF\xBF\xBD");
      i += MaximalSubpart(text.substr(i));
    }
  }
  return true;
}

uint32_t NextCodePoint(std::string_view s, size_t* len) {
  size_t n = Utf8SequenceLength(s);
  if (n == 0) {
    *len = 1;
    return 0xFFFD;
  }
  *len = n;
  return DecodeUtf8(s, n);
}

uint32_t LastCodePoint(std::string_view s, size_t* len) {
  size_t start = s.size();
  while (start > 0 && s.size() - start < 4) {
    --start;
    if ((static_cast<unsigned char>(s[start]) & 0xC0) != 0x80) break;
  }
  return NextCodePoint(s.substr(start), len);
}

std::string_view TrimPythonSpace(std::string_view s) {
  size_t len;
  while (!s.empty() && IsPythonSpace(NextCodePoint(s, &len))) s.remove_prefix(len);
  while (!s.empty() && IsPythonSpace(LastCodePoint(s, &len))) s.remove_suffix(len);
  return s;
}

}  // namespace gannet::tokenizer
