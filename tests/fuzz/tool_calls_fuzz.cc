// Fuzz target: gannet serve's parser of Gemma-4 tool calls in model output
// (examples/server/tool_calls.h). Model output is not under anyone's control, so whatever it
// writes must come back as calls or as content: never a crash.
//
// Input: the output as text, where byte 0x01 stands for the <|tool_call> token, 0x02 for
// <tool_call|> and 0x03 for <|"|>; it is fed in pieces of 1 to 8 bytes (the first byte, mod 8,
// + 1). Properties checked: every call's arguments parse as a JSON object; when no call was
// parsed and no delimiter token was given, the content holds every other byte of the input in
// order (nothing dropped).
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "examples/server/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const size_t step = bytes[0] % 8 + 1;
  gannet_server::ToolCallParser p({1, 2, 3});
  std::string content, plain;
  size_t calls = 0;
  bool quotes = false;
  auto take = [&](gannet_server::ToolCallParser::Delta d) {
    content += d.content;
    for (const auto& c : d.calls) {
      auto j = nlohmann::json::parse(c.arguments, nullptr, false);
      if (j.is_discarded() || !j.is_object() || c.name.empty()) std::abort();
      ++calls;
    }
  };
  std::string text;
  for (size_t i = 1; i < size; ++i) {
    const char c = static_cast<char>(bytes[i]);
    if (c >= 1 && c <= 3) {
      quotes |= c == 3;
      take(p.Feed(c, text));
      text.clear();
      continue;
    }
    text += c;
    plain += c;
    if (text.size() >= step) {
      take(p.Feed(-1, text));
      text.clear();
    }
  }
  take(p.Feed(-1, text));
  take(p.Finish());
  if (calls == 0 && !quotes) {
    // Every plain byte is in the content, in order (markers may be spelled between them).
    size_t k = 0;
    for (char c : content) {
      if (k < plain.size() && c == plain[k]) ++k;
    }
    if (k != plain.size()) std::abort();
  }
  return 0;
}
