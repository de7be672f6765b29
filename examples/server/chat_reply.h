// One chat choice's reply as the engine streams it: thinking split off into reasoning_content
// (ThinkingSplitter), and, when tools were offered, tool calls parsed out of the answer
// (ToolCallParser). Each event gives the delta a stream sends; the whole gives the message a
// non-streamed answer holds. Kept apart from the HTTP plumbing so it can be tested event by event.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "examples/server/thinking.h"
#include "examples/server/tool_calls.h"

namespace gannet_server {

class ChatReply {
 public:
  ChatReply() = default;
  ChatReply(ThinkingSplitter splitter, bool parse_tools, ToolCallParser tools)
      : splitter_(splitter), parse_tools_(parse_tools), tools_(tools) {}

  struct Delta {
    std::string reasoning;
    std::string content;
    nlohmann::json tool_calls = nlohmann::json::array();  // OpenAI's delta.tool_calls entries
    bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  };
  // One engine event: its token (-1 for none) and text; `last` for the FINISH or ERROR event,
  // which flushes what is held back (an open thought header, an unclosed tool call, as text).
  Delta Feed(int32_t token_id, const std::string& text, bool last);
  // tool_choice "required" or a named function: the reply begins with "<|tool_call>" +
  // `body_start`, forced through the prompt rather than generated; the parser takes it as the
  // start of the answer (ToolCallParser::Force) and accepts only calls to `allowed_names`.
  // With tools parsed, before the first Feed (thinking off: the reply starts as answer) or,
  // thinking on, once the thought closed (the call follows it: call_after_thought.h).
  void ForceToolCall(const std::string& body_start, std::vector<std::string> allowed_names) {
    tools_.set_allowed_names(std::move(allowed_names));
    tools_.Force(body_start);
  }

  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const nlohmann::json& tool_calls() const { return tool_calls_; }
  // finish_reason for the engine's GANNET_FINISH_*: "tool_calls" when a reply that stopped
  // made calls (the model hands control back), else stop/length/abort/error.
  const char* FinishReason(int32_t finish) const;
  // {"role": "assistant", "content", ["reasoning_content"], ["tool_calls"]}; content is null
  // when the reply is only tool calls.
  nlohmann::json Message() const;

 private:
  ThinkingSplitter splitter_;
  bool parse_tools_ = false;
  ToolCallParser tools_;
  std::string content_, reasoning_;
  nlohmann::json tool_calls_ = nlohmann::json::array();
};

// The OpenAI name of a GANNET_FINISH_* reason.
const char* FinishName(int32_t reason);

}  // namespace gannet_server
