#include "examples/server/tokenize_routes.h"

#include <nlohmann/json.hpp>

namespace gannet_server {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

bool ParseObject(const std::string& body, json* out, httplib::Response& res) {
  if (NestedTooDeep(body)) {
    SendError(res, BadRequest("the body nests too deeply"));
    return false;
  }
  *out = json::parse(body, nullptr, false);
  if (out->is_discarded() || !out->is_object()) {
    SendError(res, BadRequest("the body must be a JSON object"));
    return false;
  }
  return true;
}

bool HaveTokenizer(const ServerInfo& info, httplib::Response& res) {
  if (info.tokenizer) return true;
  SendError(res, BadRequest("this model has no tokenizer.json"));
  return false;
}

}  // namespace

void HandleTokenize(const ServerInfo& info, Hub& hub, const httplib::Request& req,
                    httplib::Response& res) {
  json body;
  if (!ParseObject(req.body, &body, res) || !HaveTokenizer(info, res)) return;
  std::string text;
  int32_t add_special = 1;
  if (body.contains("messages")) {
    // Reuse the chat parser: same roles, content parts and errors as /v1/chat/completions.
    auto parsed = ParseApiRequest(Endpoint::kChat, req.body);
    if (auto* err = std::get_if<ApiError>(&parsed)) return SendError(res, *err);
    const ApiRequest& r = std::get<ApiRequest>(parsed);
    const std::string chat = ChatJson(r);
    size_t len = 0;
    const int32_t agp = r.add_generation_prompt ? 1 : 0;
    const int32_t think = r.enable_thinking ? 1 : 0;
    gannet_status_t st =
        gannet_apply_chat_template_json(info.tokenizer, chat.c_str(), agp, think, nullptr, 0, &len);
    if (st == GANNET_OK) {
      text.assign(len + 1, '\0');
      st = gannet_apply_chat_template_json(info.tokenizer, chat.c_str(), agp, think, text.data(),
                                           text.size(), &len);
      text.resize(len);
    }
    if (st != GANNET_OK) return SendError(res, ErrorForStatus(st, gannet_last_error_message()));
    // A forced tool choice's start of the reply, as the engine appends it (reply_prefix).
    text += ForcedReplyPrefix(r);
    add_special = 0;  // the rendered text starts with <bos>
  } else {
    auto p = body.find("prompt");
    if (p == body.end() || !p->is_string()) {
      return SendError(res, BadRequest("'prompt' must be a string (or give 'messages')", "prompt"));
    }
    text = p->get<std::string>();
    auto a = body.find("add_special_tokens");
    if (a != body.end() && !a->is_null()) {
      if (!a->is_boolean()) {
        return SendError(
            res, BadRequest("'add_special_tokens' must be a boolean", "add_special_tokens"));
      }
      add_special = a->get<bool>() ? 1 : 0;
    }
  }
  size_t n = 0;
  gannet_status_t st =
      gannet_tokenize(info.tokenizer, text.data(), text.size(), add_special, nullptr, 0, &n);
  std::vector<int32_t> ids(n);
  if (st == GANNET_OK) {
    st = gannet_tokenize(info.tokenizer, text.data(), text.size(), add_special, ids.data(),
                         ids.size(), &n);
  }
  if (st != GANNET_OK) return SendError(res, ErrorForStatus(st, gannet_last_error_message()));
  json out = {{"tokens", ids}, {"count", ids.size()}};
  gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
  if (hub.Ready() && gannet_engine_get_stats(hub.engine(), &s) == GANNET_OK) {
    out["max_model_len"] = s.max_model_len;
  }
  res.set_content(Dump(out), "application/json");
}

void HandleDetokenize(const ServerInfo& info, const httplib::Request& req, httplib::Response& res) {
  json body;
  if (!ParseObject(req.body, &body, res) || !HaveTokenizer(info, res)) return;
  auto t = body.find("tokens");
  std::vector<int32_t> ids;
  bool ok = t != body.end() && t->is_array();
  if (ok) {
    for (const json& e : *t) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX) {
        ok = false;
        break;
      }
      ids.push_back(e.get<int32_t>());
    }
  }
  if (!ok) return SendError(res, BadRequest("'tokens' must be an array of token ids", "tokens"));
  size_t len = 0;
  gannet_status_t st =
      gannet_detokenize(info.tokenizer, ids.data(), ids.size(), 0, nullptr, 0, &len);
  std::string text(len + 1, '\0');
  if (st == GANNET_OK) {
    st = gannet_detokenize(info.tokenizer, ids.data(), ids.size(), 0, text.data(), text.size(),
                           &len);
    text.resize(len);
  }
  if (st != GANNET_OK) return SendError(res, ErrorForStatus(st, gannet_last_error_message()));
  res.set_content(Dump({{"prompt", text}}), "application/json");
}

}  // namespace gannet_server
