#include "examples/server/completion.h"

#include "examples/server/call_after_thought.h"
#include "examples/server/chat_reply.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

namespace gannet_server {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// A client that stops reading is noticed at the next write; while no token comes (a long
// prompt, a full batch) something must still be written to notice it: a space before a JSON
// body, an SSE comment in a stream. Both are ignored by JSON parsers and SSE clients.
constexpr milliseconds kKeepAlive(1000);
constexpr milliseconds kPopSlice(100);

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string NewId(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s%016llx%08llx", prefix, static_cast<unsigned long long>(salt),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return buf;
}

std::string Piece(const gannet_tokenizer_t* tok, int32_t id) {
  if (!tok) return "token_id:" + std::to_string(id);
  char buf[256];
  size_t len = 0;
  if (gannet_token_to_piece(tok, id, buf, sizeof(buf), &len) != GANNET_OK) {
    return "token_id:" + std::to_string(id);
  }
  return std::string(buf, len);
}

json Bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

std::string Detokenize(const gannet_tokenizer_t* tok, const std::vector<int32_t>& ids) {
  if (!tok) return "";
  size_t len = 0;
  gannet_detokenize(tok, ids.data(), ids.size(), 0, nullptr, 0, &len);
  std::string out(len + 1, '\0');
  if (gannet_detokenize(tok, ids.data(), ids.size(), 0, out.data(), out.size(), &len) !=
      GANNET_OK) {
    return "";
  }
  out.resize(len);
  return out;
}

struct Choice {
  uint64_t id = 0;
  size_t prompt_index = 0;
  std::string text;  // completions: the text so far
  ChatReply reply;   // chat: answer, reasoning and tool calls
  int32_t finish = 0;
  bool done = false;
  bool announced = false;  // streaming: the role chunk went out
  int32_t prompt_tokens = 0, generated = 0, cached = 0;
  // A forced call after thinking (call_after_thought.h): phase 1 (the thought) runs as `id`
  // until the call phase replaces it; what phase 1 counted is carried into the usage.
  bool two_phase = false, in_call_phase = false;
  int choice = 0;  // the index among the n choices (seeds)
  ThoughtPhase thought;
  int32_t max_tokens = 0, min_tokens = 0;  // of the whole reply, as the engine took them
  int32_t thought_prompt = 0, thought_cached = 0;
  json chat_logprobs = json::array();  // chat: logprobs.content
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();  // completions
};

const char* FinishReason(const Choice& c, bool chat) {
  return chat ? c.reply.FinishReason(c.finish) : FinishName(c.finish);
}

// Everything one HTTP request's answer needs; shared by the handler and the content provider,
// which httplib may call after the handler returned.
struct Exchange {
  Hub* hub = nullptr;
  const ServerInfo* info = nullptr;
  ApiRequest request;
  std::shared_ptr<Channel> channel = std::make_shared<Channel>();
  std::vector<uint64_t> ids;
  std::map<uint64_t, size_t> choice_of;
  std::vector<Choice> choices;
  std::deque<OwnedEvent> pending;  // popped while waiting for each request's first event
  std::string id;
  int64_t created = 0;
  size_t open = 0;                                // choices not done
  std::optional<ApiError> late_error;             // an ERROR event after the answer began
  std::optional<CallAfterThought> after_thought;  // a forced call with thinking on
  std::shared_ptr<void> in_flight;
  bool chat() const { return request.endpoint == Endpoint::kChat; }

  // Applies one event; returns the stream chunks it gives (empty when not streaming).
  std::vector<json> Apply(const OwnedEvent& e);
  // Phase 1 of a two-phase choice ended with the thought closed (or never opened): submits
  // the call phase and returns true, or turns `e` into the choice's end (no room left for the
  // call: length; a failed submit: its error) and returns false.
  bool StartCallPhase(Choice& c, size_t index, OwnedEvent* e);
  json Usage() const;
  json Final() const;
  json Chunk(const json& choice) const;
};

json Exchange::Chunk(const json& choice) const {
  json c = {{"id", id},
            {"object", chat() ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", info->model_name},
            {"choices", json::array({choice})}};
  if (request.include_usage) c["usage"] = nullptr;
  return c;
}

std::vector<json> Exchange::Apply(const OwnedEvent& event) {
  std::vector<json> out;
  const OwnedEvent* ev = &event;
  auto it = choice_of.find(event.request_id);
  if (it == choice_of.end()) return out;
  Choice& c = choices[it->second];
  const int index = static_cast<int>(it->second);
  if (c.done) return out;
  OwnedEvent phase_end;  // phase 1's end, when it becomes the reply's end
  if (c.two_phase && !c.in_call_phase) {
    if (event.type == GANNET_EVENT_TOKEN) {
      const bool keep = c.thought.Keep(event.token_id);
      if (c.thought.cancel_now()) {
        hub->Cancel(event.request_id);
        c.thought.cancelled();
      }
      if (!keep) return out;
    } else if (event.type == GANNET_EVENT_FINISH && c.thought.call_follows()) {
      phase_end = event;
      if (StartCallPhase(c, it->second, &phase_end)) return out;
      ev = &phase_end;
    }
  }
  const OwnedEvent& e = *ev;
  const bool stream = request.stream;
  if (stream && chat() && !c.announced) {
    out.push_back(Chunk({{"index", index},
                         {"delta", {{"role", "assistant"}, {"content", ""}}},
                         {"logprobs", nullptr},
                         {"finish_reason", nullptr}}));
  }
  if (stream && !chat() && request.echo && !c.announced) {
    const Prompt& p = request.prompts[c.prompt_index];
    out.push_back(Chunk({{"index", index},
                         {"text", p.is_ids ? Detokenize(info->tokenizer, p.ids) : p.text},
                         {"logprobs", nullptr},
                         {"finish_reason", nullptr}}));
  }
  c.announced = true;
  json lp_delta = nullptr;
  if (e.type == GANNET_EVENT_TOKEN && request.logprobs) {
    const std::string piece = Piece(info->tokenizer, e.token_id);
    const size_t want = static_cast<size_t>(request.top_logprobs);
    if (chat()) {
      json top = json::array();
      for (size_t k = 0; k < std::min(want, e.top_ids.size()); ++k) {
        const std::string p = Piece(info->tokenizer, e.top_ids[k]);
        top.push_back({{"token", p}, {"logprob", e.top_logprobs[k]}, {"bytes", Bytes(p)}});
      }
      json entry = {
          {"token", piece}, {"logprob", e.logprob}, {"bytes", Bytes(piece)}, {"top_logprobs", top}};
      c.chat_logprobs.push_back(entry);
      lp_delta = {{"content", json::array({entry})}};
    } else {
      json top = json::object();
      for (size_t k = 0; k < std::min(want, e.top_ids.size()); ++k) {
        top[Piece(info->tokenizer, e.top_ids[k])] = e.top_logprobs[k];
      }
      const size_t offset = c.text.size();
      c.tokens.push_back(piece);
      c.token_logprobs.push_back(e.logprob);
      c.top.push_back(want > 0 ? top : json(nullptr));
      c.offsets.push_back(offset);
      lp_delta = {{"tokens", {piece}},
                  {"token_logprobs", {e.logprob}},
                  {"top_logprobs", {want > 0 ? top : json(nullptr)}},
                  {"text_offset", {offset}}};
    }
  }
  if (e.type == GANNET_EVENT_ERROR) {
    late_error = ErrorForStatus(e.status, e.message);
  }
  std::string content = e.text, reasoning;
  json new_calls = json::array();
  if (chat()) {
    ChatReply::Delta d = c.reply.Feed(e.type == GANNET_EVENT_TOKEN ? e.token_id : -1, e.text,
                                      e.type != GANNET_EVENT_TOKEN);
    content = std::move(d.content);
    reasoning = std::move(d.reasoning);
    new_calls = std::move(d.tool_calls);
  } else {
    c.text += content;
  }
  if (stream &&
      (!content.empty() || !reasoning.empty() || !lp_delta.is_null() || !new_calls.empty())) {
    if (chat()) {
      json delta = json::object();
      if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
      if (!content.empty()) delta["content"] = content;
      if (!new_calls.empty()) delta["tool_calls"] = std::move(new_calls);
      out.push_back(Chunk({{"index", index},
                           {"delta", delta},
                           {"logprobs", lp_delta},
                           {"finish_reason", nullptr}}));
    } else {
      out.push_back(Chunk({{"index", index},
                           {"text", content},
                           {"logprobs", lp_delta},
                           {"finish_reason", nullptr}}));
    }
  }
  if (e.type != GANNET_EVENT_TOKEN) {
    c.done = true;
    --open;
    c.finish = e.type == GANNET_EVENT_ERROR ? GANNET_FINISH_ERROR : e.finish_reason;
    c.prompt_tokens = e.num_prompt_tokens;
    c.generated = e.num_generated_tokens;
    c.cached = e.num_cached_prompt_tokens;
    if (c.in_call_phase) {
      // Prompt: phase 1's and the forced start (the thought is counted as generated).
      c.prompt_tokens = c.thought_prompt + static_cast<int32_t>(after_thought->prefix.size());
      c.generated += static_cast<int32_t>(c.thought.thought().size());
      c.cached = c.thought_cached;
    } else if (c.two_phase && c.thought.call_follows()) {
      c.generated = static_cast<int32_t>(c.thought.thought().size());  // dropped ones aside
    }
    if (stream) {
      json fin = chat() ? json{{"index", index}, {"delta", json::object()}}
                        : json{{"index", index}, {"text", ""}};
      fin["logprobs"] = nullptr;
      fin["finish_reason"] = FinishReason(c, chat());
      out.push_back(Chunk(fin));
    }
  }
  return out;
}

bool Exchange::StartCallPhase(Choice& c, size_t index, OwnedEvent* e) {
  const std::vector<int32_t>& thought = c.thought.thought();
  // The engine's prompt must be the one the server rendered: the call phase goes on from it.
  if (e->num_prompt_tokens != static_cast<int32_t>(after_thought->prompt.size())) {
    e->type = GANNET_EVENT_ERROR;
    e->status = GANNET_ERR_INTERNAL;
    e->message = "the server's tokenization of the chat (" +
                 std::to_string(after_thought->prompt.size()) +
                 " tokens) differs from the engine's (" + std::to_string(e->num_prompt_tokens) +
                 "); the forced call cannot follow the thought";
    return false;
  }
  std::vector<int32_t> prompt = after_thought->prompt;
  prompt.insert(prompt.end(), thought.begin(), thought.end());
  prompt.insert(prompt.end(), after_thought->prefix.begin(), after_thought->prefix.end());
  gannet_engine_stats_t stats = GANNET_ENGINE_STATS_INIT;
  int32_t max_model_len = 0;
  if (gannet_engine_get_stats(hub->engine(), &stats) == GANNET_OK) {
    max_model_len = stats.max_model_len;
  }
  const CallPhasePlan plan =
      PlanCallPhase(c.max_tokens, c.min_tokens, thought.size(), prompt.size(), max_model_len);
  // Text held back at phase 1's end came after the thought: not part of the reply.
  e->text.clear();
  if (!plan.submit) {
    e->type = GANNET_EVENT_FINISH;
    e->finish_reason = GANNET_FINISH_LENGTH;
    return false;
  }
  RequestStorage storage;
  gannet_request_t req;
  FillCallPhaseRequest(request, info->defaults, c.choice, prompt, plan.max_tokens, plan.min_tokens,
                       &storage, &req);
  std::vector<uint64_t> submitted;
  std::string message;
  const gannet_status_t st = hub->Submit({req}, channel, &submitted, &message);
  if (st != GANNET_OK) {
    e->type = GANNET_EVENT_ERROR;
    e->status = st;
    e->message = message;
    return false;
  }
  c.thought_prompt = e->num_prompt_tokens;
  c.thought_cached = e->num_cached_prompt_tokens;
  c.in_call_phase = true;
  c.id = submitted[0];
  ids.push_back(c.id);
  choice_of[c.id] = index;
  c.reply.ForceToolCall(ForcedCallStart(request), ToolNames(request));
  return true;
}

json Exchange::Usage() const {
  // A prompt counts once however many choices sampled from it (n), as OpenAI counts it.
  int64_t prompt = 0, completion = 0, cached = 0;
  std::vector<bool> seen(request.endpoint == Endpoint::kChat ? 1 : request.prompts.size(), false);
  for (const Choice& c : choices) {
    completion += c.generated;
    if (!seen[c.prompt_index]) {
      seen[c.prompt_index] = true;
      prompt += c.prompt_tokens;
      cached += c.cached;
    }
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json Exchange::Final() const {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    json one = {{"index", i}, {"finish_reason", FinishReason(c, chat())}};
    if (chat()) {
      one["message"] = c.reply.Message();
      one["logprobs"] = request.logprobs ? json{{"content", c.chat_logprobs}} : json(nullptr);
    } else {
      std::string text = c.text;
      if (request.echo) {
        const Prompt& p = request.prompts[c.prompt_index];
        text = (p.is_ids ? Detokenize(info->tokenizer, p.ids) : p.text) + text;
      }
      one["text"] = text;
      one["logprobs"] = request.logprobs ? json{{"tokens", c.tokens},
                                                {"token_logprobs", c.token_logprobs},
                                                {"top_logprobs", c.top},
                                                {"text_offset", c.offsets}}
                                         : json(nullptr);
    }
    list.push_back(one);
  }
  return {{"id", id},           {"object", chat() ? "chat.completion" : "text_completion"},
          {"created", created}, {"model", info->model_name},
          {"choices", list},    {"usage", Usage()}};
}

std::string Sse(const json& j) { return "data: " + Dump(j) + "\n\n"; }

}  // namespace

ApiError ErrorForStatus(gannet_status_t status, const std::string& message) {
  switch (status) {
    case GANNET_ERR_INVALID_ARGUMENT:
      return ApiError{400, message, "invalid_request_error", ""};
    case GANNET_ERR_RESOURCE_EXHAUSTED:
      return ApiError{429, "the server is busy (" + message + "); retry later", "rate_limit_error",
                      ""};
    case GANNET_ERR_DEADLINE_EXCEEDED:
      return ApiError{504, message, "timeout", ""};
    case GANNET_ERR_UNIMPLEMENTED:
      return ApiError{400, message, "invalid_request_error", ""};
    case GANNET_ERR_CANCELLED:
      return ApiError{503, "the request was cancelled: " + message, "server_error", ""};
    default:
      return ApiError{500, std::string(gannet_status_string(status)) + ": " + message,
                      "server_error", ""};
  }
}

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  res.set_content(e.Json(), "application/json");
}

void HandleCompletion(Hub& hub, const ServerInfo& info, Endpoint endpoint,
                      const httplib::Request& req, httplib::Response& res,
                      std::shared_ptr<void> in_flight) {
  if (!hub.Ready()) {
    return SendError(res, ApiError{503, "the model is still loading", "server_error", ""});
  }
  auto parsed = ParseApiRequest(endpoint, req.body);
  if (auto* err = std::get_if<ApiError>(&parsed)) return SendError(res, *err);

  auto ex = std::make_shared<Exchange>();
  ex->in_flight = std::move(in_flight);
  ex->hub = &hub;
  ex->info = &info;
  ex->request = std::move(std::get<ApiRequest>(parsed));
  ex->id = NewId(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-");
  ex->created = static_cast<int64_t>(std::time(nullptr));
  const ApiRequest& r = ex->request;
  const bool two_phase = ForcesCallAfterThought(r);
  if (two_phase) {
    auto prepared = PrepareCallAfterThought(info.tokenizer, r);
    if (auto* err = std::get_if<ApiError>(&prepared)) return SendError(res, *err);
    ex->after_thought = std::move(std::get<CallAfterThought>(prepared));
  }
  const size_t prompts = endpoint == Endpoint::kChat ? 1 : r.prompts.size();
  // Choice index p * n + c, as OpenAI numbers the choices of a batch of prompts.
  std::vector<RequestStorage> storage(prompts * r.n);
  std::vector<gannet_request_t> requests(prompts * r.n);
  for (size_t p = 0; p < prompts; ++p) {
    for (int c = 0; c < r.n; ++c) {
      const size_t k = p * r.n + c;
      FillEngineRequest(r, info.defaults, p, c, &storage[k], &requests[k]);
      Choice choice;
      choice.prompt_index = p;
      choice.reply = ChatReply(ThinkingSplitter(info.channel_open_id, info.channel_close_id),
                               endpoint == Endpoint::kChat && !r.tools.is_null(),
                               ToolCallParser(info.tool_ids));
      choice.choice = c;
      if (two_phase) {
        // Phase 1, the thought: it stops where the channel closes; the call comes after it.
        if (info.channel_close_id >= 0) {
          AddStopToken(info.channel_close_id, &storage[k], &requests[k]);
        }
        choice.two_phase = true;
        choice.thought = ThoughtPhase(info.channel_open_id, info.channel_close_id);
        choice.max_tokens = requests[k].max_tokens;
        choice.min_tokens = requests[k].min_tokens;
      } else if (endpoint == Endpoint::kChat && !ForcedCallStart(r).empty()) {
        choice.reply.ForceToolCall(ForcedCallStart(r), ToolNames(r));
      }
      ex->choices.push_back(choice);
    }
  }
  std::string message;
  const gannet_status_t st = hub.Submit(requests, ex->channel, &ex->ids, &message);
  if (st != GANNET_OK) return SendError(res, ErrorForStatus(st, message));
  for (size_t k = 0; k < ex->ids.size(); ++k) {
    ex->choices[k].id = ex->ids[k];
    ex->choice_of[ex->ids[k]] = k;
  }
  ex->open = ex->ids.size();

  // The status line goes out with the first byte, so problems found after submit (a prompt
  // longer than the context, a token id outside the vocabulary) must be known first: wait for
  // each request's first event.
  std::map<uint64_t, bool> heard;
  while (heard.size() < ex->ids.size()) {
    OwnedEvent e;
    if (!ex->channel->Pop(kPopSlice, &e)) {
      if (!hub.Ready()) {
        hub.Abandon(ex->ids);
        return SendError(res, ApiError{503, "the server is shutting down", "server_error", ""});
      }
      continue;
    }
    heard[e.request_id] = true;
    if (e.type == GANNET_EVENT_ERROR) {
      hub.Abandon(ex->ids);
      return SendError(res, ErrorForStatus(e.status, e.message));
    }
    ex->pending.push_back(std::move(e));
  }

  const bool stream = r.stream;
  auto last_write =
      std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  auto provider = [ex, stream, last_write](size_t, httplib::DataSink& sink) -> bool {
    auto write = [&](const std::string& s) {
      *last_write = std::chrono::steady_clock::now();
      return sink.write(s.data(), s.size());
    };
    while (ex->open > 0) {
      if (!ex->hub->Ready()) return false;  // shutting down: end the stream now
      // Checked on every event too: a non-streaming answer writes nothing while tokens flow.
      if (std::chrono::steady_clock::now() - *last_write >= kKeepAlive) {
        return write(stream ? ": keep-alive\n\n" : " ");
      }
      OwnedEvent e;
      if (!ex->pending.empty()) {
        e = std::move(ex->pending.front());
        ex->pending.pop_front();
      } else if (!ex->channel->Pop(kPopSlice, &e)) {
        continue;
      }
      std::string out;
      for (const json& chunk : ex->Apply(e)) out += Sse(chunk);
      if (stream && ex->late_error) {
        out += "data: " + ex->late_error->Json() + "\n\n";
        ex->late_error.reset();
      }
      if (!out.empty()) return write(out);
    }
    std::string tail;
    if (stream) {
      if (ex->request.include_usage) {
        json last = {{"id", ex->id},
                     {"object", ex->chat() ? "chat.completion.chunk" : "text_completion"},
                     {"created", ex->created},
                     {"model", ex->info->model_name},
                     {"choices", json::array()},
                     {"usage", ex->Usage()}};
        tail += Sse(last);
      }
      tail += "data: [DONE]\n\n";
    } else {
      tail = ex->late_error ? ex->late_error->Json() : Dump(ex->Final());
    }
    if (!write(tail)) return false;
    sink.done();
    return true;
  };
  // Runs when the answer is complete or the connection failed: anything unfinished is
  // cancelled so its KV pages go back at once.
  auto release = [ex](bool) { ex->hub->Abandon(ex->ids); };
  res.status = 200;
  if (stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", provider, release);
  } else {
    res.set_chunked_content_provider("application/json", provider, release);
  }
}

}  // namespace gannet_server
