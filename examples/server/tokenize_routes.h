// POST /tokenize and /detokenize (vLLM's shapes): count and inspect tokens as the engine makes
// them, without generating.
#pragma once

#include <httplib.h>

#include "examples/server/completion.h"
#include "examples/server/hub.h"

namespace gannet_server {

// {"prompt": "text", "add_special_tokens": true} or {"messages": [...],
// "add_generation_prompt": true} -> {"tokens": [...], "count": N, "max_model_len": M}
void HandleTokenize(const ServerInfo& info, Hub& hub, const httplib::Request& req,
                    httplib::Response& res);
// {"tokens": [...]} -> {"prompt": "text"}
void HandleDetokenize(const ServerInfo& info, const httplib::Request& req, httplib::Response& res);

}  // namespace gannet_server
