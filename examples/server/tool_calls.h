// Gemma-4 tool calls, parsed out of a reply: the model writes
//   <|tool_call>call:NAME{key:value,...}<tool_call|>
// with strings between <|"|> delimiters, objects in braces, arrays in brackets, and bare
// numbers, true, false and null. The three markers are special tokens, which the detokenizer
// does not write as text, so the parser follows the token ids (as ThinkingSplitter does) and
// spells the delimiters back itself. A call that does not parse (unbalanced, unterminated, no
// name, trailing text) is never dropped: its raw text, markers spelled out, goes to the content.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gannet_server {

struct ToolCall {
  std::string id;  // "call_..." (unique in the server's life)
  std::string name;
  std::string arguments;  // a JSON object, as OpenAI's function.arguments
};

// Parses the text between the markers ("call:NAME{...}", delimiters spelled "<|\"|>") into a
// name and JSON arguments; nullopt when malformed.
std::optional<ToolCall> ParseToolCallBody(std::string_view body);

class ToolCallParser {
 public:
  struct Ids {
    int32_t call_open = -1;   // <|tool_call>
    int32_t call_close = -1;  // <tool_call|>
    int32_t quote = -1;       // <|"|>
  };
  ToolCallParser() = default;
  explicit ToolCallParser(Ids ids) : ids_(ids) {}

  struct Delta {
    std::string content;
    std::vector<ToolCall> calls;
  };
  // One piece of answer text and the token that completed it (-1: none); like the engine's
  // events, the text comes before the token.
  Delta Feed(int32_t token_id, const std::string& text);
  // The end of the reply: a call never closed is content, raw.
  Delta Finish();

  int calls_made() const { return calls_made_; }

 private:
  void Close(Delta* d);

  Ids ids_;
  bool in_call_ = false;
  std::string raw_;  // the open call's text, delimiters spelled
  int calls_made_ = 0;
};

}  // namespace gannet_server
