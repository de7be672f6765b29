#include "examples/server/chat_reply.h"

#include "gannet/gannet.h"

namespace gannet_server {

using nlohmann::json;

const char* FinishName(int32_t reason) {
  switch (reason) {
    case GANNET_FINISH_STOP:
      return "stop";
    case GANNET_FINISH_LENGTH:
      return "length";
    case GANNET_FINISH_CANCELLED:
      return "abort";
    default:
      return "error";
  }
}

ChatReply::Delta ChatReply::Feed(int32_t token_id, const std::string& text, bool last) {
  Delta out;
  ThinkingSplitter::Delta d = splitter_.Feed(token_id, text);
  if (last) d.reasoning += splitter_.Finish().reasoning;
  out.reasoning = std::move(d.reasoning);
  out.content = std::move(d.content);
  if (parse_tools_) {
    // The token counts for tool calls only where the answer (not thinking) goes on.
    ToolCallParser::Delta td = tools_.Feed(splitter_.in_content() ? token_id : -1, out.content);
    if (last) {
      // The end: an open call is content, raw (a forced one may still be the reply's call).
      ToolCallParser::Delta end = tools_.Finish();
      td.content += end.content;
      for (ToolCall& call : end.calls) td.calls.push_back(std::move(call));
    }
    out.content = std::move(td.content);
    for (ToolCall& call : td.calls) {
      json one = {{"index", tool_calls_.size()},
                  {"id", call.id},
                  {"type", "function"},
                  {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
      tool_calls_.push_back(one);
      out.tool_calls.push_back(std::move(one));
    }
  }
  reasoning_ += out.reasoning;
  content_ += out.content;
  return out;
}

const char* ChatReply::FinishReason(int32_t finish) const {
  if (finish == GANNET_FINISH_STOP && !tool_calls_.empty()) return "tool_calls";
  return FinishName(finish);
}

json ChatReply::Message() const {
  json m = {{"role", "assistant"}, {"content", content_}};
  if (!reasoning_.empty()) m["reasoning_content"] = reasoning_;
  if (!tool_calls_.empty()) {
    json calls = tool_calls_;
    for (json& c : calls) c.erase("index");  // message.tool_calls carry no index
    m["tool_calls"] = std::move(calls);
    if (content_.empty()) m["content"] = nullptr;
  }
  return m;
}

}  // namespace gannet_server
