// POST /v1/chat/completions and /v1/completions: one API request becomes n x prompts engine
// requests; the answer is one JSON object or a stream of server-sent events ending in
// `data: [DONE]`. A connection that goes away cancels its engine requests.
#pragma once

#include <string>

#include <httplib.h>

#include "examples/server/api_request.h"
#include "examples/server/gen_config.h"
#include "examples/server/hub.h"
#include "examples/server/thinking.h"
#include "examples/server/tool_calls.h"

namespace gannet_server {

struct ServerInfo {
  std::string model_name;                         // what responses and /v1/models call the model
  SamplingDefaults defaults;                      // generation_config.json, then command-line flags
  const gannet_tokenizer_t* tokenizer = nullptr;  // null for models without tokenizer.json
  int64_t created = 0;                            // unix time the server started
  int32_t channel_open_id = -1;                   // <|channel> and <channel|>: thinking (-1: none)
  int32_t channel_close_id = -1;
  ToolCallParser::Ids tool_ids;  // <|tool_call>, <tool_call|>, <|"|> (-1: none)
};

// `in_flight` lives as long as the answer does (the streamed body outlives this call): its
// release counts the request out of the active-requests gauge.
void HandleCompletion(Hub& hub, const ServerInfo& info, Endpoint endpoint,
                      const httplib::Request& req, httplib::Response& res,
                      std::shared_ptr<void> in_flight);

// Writes an OpenAI-style error as the response.
void SendError(httplib::Response& res, const ApiError& e);

// The HTTP answer to a failed submit or an ERROR event before any token.
ApiError ErrorForStatus(gannet_status_t status, const std::string& message);

}  // namespace gannet_server
