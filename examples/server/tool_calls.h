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
  // The end of the reply: a call never closed is content, raw (a forced one: see Force).
  Delta Finish();

  // Non-empty: a call naming a function not in the list is content, raw, as a malformed one
  // is (tool_choice "required" or named; "auto" takes the model's names as they come).
  void set_allowed_names(std::vector<std::string> names) { allowed_ = std::move(names); }
  // A forced tool choice: the reply was made to begin with "<|tool_call>" + `body_start`
  // ("call:" for "required", "call:NAME{" for a named function), written into the prompt, not
  // generated. Opens that call as if the marker had come, so the call parses whole. A forced
  // call that does not parse still is a call when its name can be read (up to the first '{')
  // and is allowed: its arguments are then the model's raw text from '{' on, delimiters
  // spelled, which may not be JSON (cut off by max_tokens, or a small model's garbage).
  void Force(const std::string& body_start);

  int calls_made() const { return calls_made_; }

 private:
  void Close(Delta* d);
  // The open call ends unclosed: raw content (a forced one: a call if RawForcedCall reads it).
  void Abandon(Delta* d);
  bool Allowed(const std::string& name) const;
  // A forced call that did not parse, as a call with raw arguments (nullopt: no allowed name).
  std::optional<ToolCall> RawForcedCall() const;

  Ids ids_;
  bool in_call_ = false;
  bool forced_ = false;  // the open call is the forced one
  std::string raw_;      // the open call's text, delimiters spelled
  int calls_made_ = 0;
  std::vector<std::string> allowed_;
};

}  // namespace gannet_server
