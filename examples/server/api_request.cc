#include "examples/server/api_request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"

namespace gannet_server {
namespace {

using nlohmann::json;
using Result = std::variant<ApiRequest, ApiError>;

}  // namespace

bool NestedTooDeep(const std::string& body) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

namespace {

const char* TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_float:
      return "a number";
    default:
      return "an integer";
  }
}

// Reads the fields of one JSON object; the first problem wins and is kept in `error`.
class Fields {
 public:
  explicit Fields(const json& obj) : obj_(obj) {}

  std::optional<ApiError> error;

  // nullptr when absent or null (OpenAI clients send null for "not given").
  const json* Find(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void Fail(const std::string& key, const std::string& what) {
    if (!error) error = BadRequest("'" + key + "' " + what, key);
  }
  void WrongType(const char* key, const char* expected, const json& v) {
    Fail(key, std::string("must be ") + expected + ", got " + TypeName(v));
  }

  void Bool(const char* key, bool* out) {
    const json* v = Find(key);
    if (!v) return;
    if (!v->is_boolean()) return WrongType(key, "a boolean", *v);
    *out = v->get<bool>();
  }
  void String(const char* key, std::string* out) {
    const json* v = Find(key);
    if (!v) return;
    if (!v->is_string()) return WrongType(key, "a string", *v);
    *out = v->get<std::string>();
  }
  template <typename T>
  void Number(const char* key, double lo, double hi, std::optional<T>* out) {
    const json* v = Find(key);
    if (!v) return;
    if (!v->is_number()) return WrongType(key, "a number", *v);
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi)) {
      return Fail(key, "must be in [" + Short(lo) + ", " + Short(hi) + "], got " + v->dump());
    }
    *out = static_cast<T>(d);
  }
  void Int(const char* key, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
    const json* v = Find(key);
    if (!v) return;
    if (!v->is_number_integer()) return WrongType(key, "an integer", *v);
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return Fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                           v->dump());
    }
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) {
      return Fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                           v->dump());
    }
    *out = x;
  }
  // Fields whose meaning the engine cannot honour yet: refused, never silently dropped.
  void Unsupported(const char* key, const std::string& why) {
    if (Find(key)) Fail(key, why);
  }

 private:
  static std::string Short(double d) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", d);
    return buf;
  }
  const json& obj_;
};

constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

bool ReadIds(const json& v, std::vector<int32_t>* out) {
  for (const json& e : v) {
    if (!e.is_number_integer()) return false;
    if (e.is_number_unsigned() ? e.get<uint64_t>() > static_cast<uint64_t>(kI32Max)
                               : (e.get<int64_t>() < 0 || e.get<int64_t>() > kI32Max)) {
      return false;
    }
    out->push_back(e.get<int32_t>());
  }
  return true;
}

// prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]
void ReadPrompts(Fields& f, ApiRequest* r) {
  const json* p = f.Find("prompt");
  if (!p) return f.Fail("prompt", "is required");
  const char* shape =
      "must be a string, an array of strings, an array of token ids or an array of arrays of "
      "token ids (ids in [0, 2^31 - 1])";
  if (p->is_string()) {
    r->prompts.push_back(Prompt{false, p->get<std::string>(), {}});
    return;
  }
  if (!p->is_array() || p->empty()) return f.Fail("prompt", shape);
  if ((*p)[0].is_number_integer()) {
    Prompt one{true, "", {}};
    if (!ReadIds(*p, &one.ids)) return f.Fail("prompt", shape);
    r->prompts.push_back(std::move(one));
    return;
  }
  if (p->size() > kMaxChoices) {
    return f.Fail("prompt", "holds " + std::to_string(p->size()) + " prompts; at most " +
                                std::to_string(kMaxChoices) + " per request");
  }
  for (const json& e : *p) {
    if (e.is_string()) {
      r->prompts.push_back(Prompt{false, e.get<std::string>(), {}});
    } else if (e.is_array() && !e.empty()) {
      Prompt one{true, "", {}};
      if (!ReadIds(e, &one.ids)) return f.Fail("prompt", shape);
      r->prompts.push_back(std::move(one));
    } else {
      return f.Fail("prompt", shape);
    }
  }
}

// Largest decoded image a data: URL may carry (the library's own limit on encoded images).
constexpr size_t kMaxImageBytes = size_t{64} << 20;

// An image_url part's data: URL -> the image's bytes. Only data: URLs with base64: the server
// fetches nothing (a remote URL would make it a client of whatever the user names).
bool ReadImageUrl(Fields& f, const json& part, const std::string& key, std::string* bytes) {
  auto image_url = part.find("image_url");
  const json* url = nullptr;
  if (image_url != part.end() && image_url->is_string()) url = &*image_url;
  if (image_url != part.end() && image_url->is_object()) {
    auto u = image_url->find("url");
    if (u != image_url->end() && u->is_string()) url = &*u;
  }
  if (url == nullptr) {
    f.Fail(key, "image_url parts need \"image_url\": {\"url\": \"data:...\"}");
    return false;
  }
  const std::string& s = url->get_ref<const std::string&>();
  const size_t comma = s.find(',');
  if (s.rfind("data:", 0) != 0 || comma == std::string::npos || comma < 12 ||
      s.compare(comma - 7, 7, ";base64") != 0) {
    f.Fail(key,
           "image_url must be a data: URL with base64 bytes (data:image/png;base64,...): "
           "gannet fetches no remote images");
    return false;
  }
  const std::string_view b64 = std::string_view(s).substr(comma + 1);
  if (b64.size() / 4 * 3 > kMaxImageBytes) {
    f.Fail(key, "image is larger than " + std::to_string(kMaxImageBytes) + " bytes");
    return false;
  }
  if (!absl::Base64Unescape(absl::string_view(b64.data(), b64.size()), bytes)) {
    f.Fail(key, "image_url's data is not valid base64");
    return false;
  }
  return true;
}

// content: "text" | [{"type": "text", "text": "..."} | {"type": "image_url", ...}, ...]. *out
// gets the text (for the built-in rendering and /tokenize); *norm the parts for the model's
// template, which renders them part by part: image_url parts become {"type": "image"} (the
// template writes the image placeholder) and their bytes go to *images, in order.
bool ReadContent(Fields& f, const json& content, size_t index, std::string* out, json* norm,
                 std::vector<std::string>* images) {
  const std::string key = "messages[" + std::to_string(index) + "].content";
  *norm = content;
  if (content.is_string()) {
    *out = content.get<std::string>();
    return true;
  }
  if (!content.is_array()) {
    f.Fail(key,
           std::string("must be a string or an array of content parts, got ") + TypeName(content));
    return false;
  }
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    auto type = part.is_object() ? part.find("type") : part.end();
    if (!part.is_object() || type == part.end() || !type->is_string()) {
      f.Fail(key, "parts must be objects with a \"type\"");
      return false;
    }
    if (*type == "image_url") {
      std::string bytes;
      if (!ReadImageUrl(f, part, key + "[" + std::to_string(j) + "]", &bytes)) return false;
      images->push_back(std::move(bytes));
      (*norm)[j] = json{{"type", "image"}};
      continue;
    }
    if (*type != "text") {
      f.Fail(key, "part of type " + type->dump() +
                      " is not supported (text and image_url only: audio is not served yet)");
      return false;
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) {
      f.Fail(key, "text parts need a string \"text\"");
      return false;
    }
    *out += text->get<std::string>();
  }
  return true;
}

// An assistant message's tool_calls, normalised for the template: arguments become a JSON
// object (OpenAI clients send them as a JSON string), ids are kept.
bool ReadToolCalls(Fields& f, const json& calls, const std::string& key, json* out) {
  if (!calls.is_array()) {
    f.Fail(key, std::string("must be an array, got ") + TypeName(calls));
    return false;
  }
  *out = json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const json& c = calls[j];
    const std::string ck = key + "[" + std::to_string(j) + "]";
    auto fn = c.is_object() ? c.find("function") : c.end();
    if (!c.is_object() || fn == c.end() || !fn->is_object()) {
      f.Fail(ck, "must be an object with a \"function\" object");
      return false;
    }
    auto type = c.find("type");
    if (type != c.end() && !(type->is_string() && *type == "function")) {
      f.Fail(ck + ".type", "must be \"function\"");
      return false;
    }
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      f.Fail(ck + ".function.name", "must be a non-empty string");
      return false;
    }
    json args = json::object();
    auto a = fn->find("arguments");
    if (a != fn->end() && a->is_string()) {
      args = json::parse(a->get<std::string>(), nullptr, false);
      if (args.is_discarded() || !args.is_object()) {
        f.Fail(ck + ".function.arguments", "must be a JSON object (as a string or an object)");
        return false;
      }
    } else if (a != fn->end() && a->is_object()) {
      args = *a;
    } else if (a != fn->end() && !a->is_null()) {
      f.Fail(ck + ".function.arguments", "must be a JSON object (as a string or an object)");
      return false;
    }
    json call = {{"type", "function"}, {"function", {{"name", *name}, {"arguments", args}}}};
    auto id = c.find("id");
    if (id != c.end() && id->is_string()) call["id"] = *id;
    out->push_back(std::move(call));
  }
  return true;
}

void ReadMessages(Fields& f, ApiRequest* r) {
  const json* m = f.Find("messages");
  if (!m) return f.Fail("messages", "is required");
  if (!m->is_array() || m->empty()) return f.Fail("messages", "must be a non-empty array");
  r->chat_messages = json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string key = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) return f.Fail(key, "must be an object");
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string()) return f.Fail(key + ".role", "must be a string");
    ChatMessage out{role->get<std::string>(), ""};
    if (out.role == "function") {
      return f.Fail(key + ".role", "'function' is OpenAI's legacy form; use 'tool' messages");
    }
    if (out.role != "system" && out.role != "developer" && out.role != "user" &&
        out.role != "assistant" && out.role != "tool") {
      return f.Fail(key + ".role",
                    "must be system, developer, user, assistant or tool, got '" + out.role + "'");
    }
    json norm = {{"role", out.role}};
    auto tool_calls = msg.find("tool_calls");
    if (tool_calls != msg.end() && !tool_calls->is_null()) {
      if (out.role != "assistant")
        return f.Fail(key + ".tool_calls", "only assistant messages make tool calls");
      json calls;
      if (!ReadToolCalls(f, *tool_calls, key + ".tool_calls", &calls)) return;
      if (!calls.empty()) norm["tool_calls"] = std::move(calls);
    }
    auto content = msg.find("content");
    if (content == msg.end() || content->is_null()) {
      if (out.role != "assistant") return f.Fail(key + ".content", "is required");
      norm["content"] = nullptr;
    } else if (json parts; !ReadContent(f, *content, i, &out.content, &parts, &r->images)) {
      return;
    } else {
      norm["content"] = std::move(parts);
    }
    if (out.role == "tool") {
      for (const char* k : {"tool_call_id", "name"}) {
        auto v = msg.find(k);
        if (v == msg.end() || v->is_null()) continue;
        if (!v->is_string()) return f.Fail(key + "." + k, "must be a string");
        norm[k] = *v;
      }
      if (!norm.contains("tool_call_id") && !norm.contains("name")) {
        return f.Fail(key, "a tool message needs \"tool_call_id\" (or \"name\")");
      }
    }
    if (out.role == "assistant") {
      for (const char* k : {"reasoning_content", "reasoning"}) {
        auto v = msg.find(k);
        if (v == msg.end() || v->is_null()) continue;
        if (!v->is_string()) return f.Fail(key + "." + k, "must be a string");
        norm[k] = *v;
      }
    }
    r->has_tool_messages |= out.role == "tool" || norm.contains("tool_calls");
    r->chat_messages.push_back(std::move(norm));
    r->messages.push_back(std::move(out));
  }
}

// tools: [{"type": "function", "function": {"name", "description", "parameters"}}]
void ReadTools(Fields& f, ApiRequest* r) {
  const json* t = f.Find("tools");
  if (!t || t->is_null()) return;
  if (!t->is_array()) return f.WrongType("tools", "an array of tools", *t);
  for (size_t i = 0; i < t->size(); ++i) {
    const json& tool = (*t)[i];
    const std::string key = "tools[" + std::to_string(i) + "]";
    auto type = tool.is_object() ? tool.find("type") : tool.end();
    if (!tool.is_object() || type == tool.end() || *type != "function") {
      return f.Fail(key, "must be {\"type\": \"function\", \"function\": {...}}");
    }
    auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object()) return f.Fail(key + ".function", "must be an object");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      return f.Fail(key + ".function.name", "must be a non-empty string");
    }
    auto desc = fn->find("description");
    if (desc != fn->end() && !desc->is_string() && !desc->is_null()) {
      return f.Fail(key + ".function.description", "must be a string");
    }
    auto params = fn->find("parameters");
    if (params != fn->end() && !params->is_object() && !params->is_null()) {
      return f.Fail(key + ".function.parameters", "must be a JSON Schema object");
    }
  }
  if (!t->empty()) r->tools = *t;
}

// OpenAI's rule for function names; it also keeps a named tool_choice, which goes into the
// prompt as template text, from spelling control tokens or Gemma-4's call syntax.
bool IsFunctionName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (unsigned char c : name) {
    if (!std::isalnum(c) && c != '_' && c != '-') return false;
  }
  return true;
}

// After ReadTools, add_generation_prompt and chat_template_kwargs.
void ReadToolChoice(Fields& f, ApiRequest* r) {
  using ToolChoice = ApiRequest::ToolChoice;
  const json* tc = f.Find("tool_choice");
  if (!tc || tc->is_null()) return;
  if (tc->is_string() && (*tc == "auto" || *tc == "none" || *tc == "required")) {
    r->tool_choice = *tc == "auto"   ? ToolChoice::kAuto
                     : *tc == "none" ? ToolChoice::kNone
                                     : ToolChoice::kRequired;
  } else if (tc->is_object()) {
    auto type = tc->find("type");
    auto fn = tc->find("function");
    const json* name = nullptr;
    if (fn != tc->end() && fn->is_object() && fn->contains("name")) name = &(*fn)["name"];
    if (type == tc->end() || *type != "function" || !name || !name->is_string()) {
      return f.Fail("tool_choice",
                    "as an object must be {\"type\": \"function\", \"function\": {\"name\": "
                    "string}}");
    }
    r->tool_choice = ToolChoice::kNamed;
    r->tool_choice_name = name->get<std::string>();
    const std::vector<std::string> names = ToolNames(*r);
    if (std::find(names.begin(), names.end(), r->tool_choice_name) == names.end()) {
      return f.Fail("tool_choice", "names the function \"" + r->tool_choice_name +
                                       "\", which is not in \"tools\"");
    }
    if (!IsFunctionName(r->tool_choice_name)) {
      return f.Fail("tool_choice",
                    "names \"" + r->tool_choice_name +
                        "\"; a forced function's name must be 1 to 64 of a-z, A-Z, 0-9, _ and -");
    }
  } else {
    return f.Fail("tool_choice", "must be \"auto\", \"none\", \"required\" or an object");
  }
  if (r->tool_choice != ToolChoice::kRequired && r->tool_choice != ToolChoice::kNamed) return;
  if (r->tools.is_null()) return f.Fail("tool_choice", "forces a tool call but \"tools\" is empty");
  // With thinking on the call follows the model's thought: the server runs the reply as two
  // engine requests (call_after_thought.h). Without the generation prompt there is no reply to
  // start.
  if (!r->add_generation_prompt) {
    return f.Fail("tool_choice",
                  "cannot force a tool call without the generation prompt "
                  "(add_generation_prompt is false)");
  }
}

void ReadStop(Fields& f, ApiRequest* r) {
  const json* s = f.Find("stop");
  if (!s) return;
  if (s->is_string()) {
    if (!s->get<std::string>().empty()) r->stop.push_back(s->get<std::string>());
    return;
  }
  if (!s->is_array()) return f.WrongType("stop", "a string or an array of strings", *s);
  for (const json& e : *s) {
    if (!e.is_string()) return f.Fail("stop", "must hold strings only");
    if (!e.get<std::string>().empty()) r->stop.push_back(e.get<std::string>());
  }
  if (r->stop.size() > 64) return f.Fail("stop", "holds more than 64 strings");
}

}  // namespace

std::string ApiError::Json() const {
  json e = {{"message", message}, {"type", type}, {"code", http_status}};
  e["param"] = param.empty() ? json(nullptr) : json(param);
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result ParseApiRequest(Endpoint endpoint, const std::string& body) {
  if (NestedTooDeep(body)) {
    return BadRequest("the body nests arrays/objects deeper than " + std::to_string(kMaxJsonDepth) +
                      " levels");
  }
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return BadRequest("the body is not valid JSON");
  if (!j.is_object()) return BadRequest("the body must be a JSON object");
  ApiRequest r;
  r.endpoint = endpoint;
  Fields f(j);
  f.String("model", &r.model);
  if (endpoint == Endpoint::kChat) {
    ReadMessages(f, &r);
  } else {
    ReadPrompts(f, &r);
  }
  if (f.error) return *f.error;

  std::optional<int64_t> i;
  f.Int("n", 1, kMaxChoices, &i);
  if (i) r.n = static_cast<int>(*i);
  if (r.n * r.prompts.size() > kMaxChoices) {
    f.Fail("n", "times the prompts gives more than " + std::to_string(kMaxChoices) + " choices");
  }
  f.Bool("stream", &r.stream);
  if (const json* so = f.Find("stream_options")) {
    if (!so->is_object()) {
      f.WrongType("stream_options", "an object", *so);
    } else {
      Fields sf(*so);
      sf.Bool("include_usage", &r.include_usage);
      if (sf.error) f.Fail("stream_options", sf.error->message);
    }
  }
  // max_completion_tokens is the chat API's newer name; either may be given.
  std::optional<int64_t> max_tokens, max_completion_tokens;
  // At least 1, as OpenAI and vLLM require (the engine's 0 would mean "until the context is
  // full", a surprise for a client that asked for nothing); absent = the default below.
  f.Int("max_tokens", 1, kI32Max, &max_tokens);
  f.Int("max_completion_tokens", 1, kI32Max, &max_completion_tokens);
  if (max_completion_tokens) max_tokens = max_completion_tokens;
  if (max_tokens) r.max_tokens = static_cast<int32_t>(*max_tokens);
  i.reset();
  f.Int("min_tokens", 0, kI32Max, &i);
  if (i) r.min_tokens = static_cast<int32_t>(*i);
  f.Number("temperature", 0.0, 2.0, &r.temperature);
  f.Number("top_p", 0.0, 1.0, &r.top_p);
  f.Number("min_p", 0.0, 1.0, &r.min_p);
  f.Number("repetition_penalty", 0.0, 100.0, &r.repetition_penalty);
  // top_k: -1 (vLLM's "off") or 0 = off.
  i.reset();
  f.Int("top_k", -1, kI32Max, &i);
  if (i) r.top_k = static_cast<int32_t>(std::max<int64_t>(*i, 0));
  std::optional<float> pp, fp;
  f.Number("presence_penalty", -2.0, 2.0, &pp);
  f.Number("frequency_penalty", -2.0, 2.0, &fp);
  r.presence_penalty = pp.value_or(0.0f);
  r.frequency_penalty = fp.value_or(0.0f);
  if (const json* s = f.Find("seed")) {
    if (!s->is_number_integer()) {
      f.WrongType("seed", "an integer", *s);
    } else {
      r.seed =
          s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
    }
  }
  ReadStop(f, &r);
  if (const json* ids = f.Find("stop_token_ids")) {
    if (!ids->is_array() || !ReadIds(*ids, &r.stop_token_ids)) {
      f.Fail("stop_token_ids", "must be an array of token ids in [0, 2^31 - 1]");
    }
  }
  f.Bool("ignore_eos", &r.ignore_eos);
  if (endpoint == Endpoint::kChat) {
    f.Bool("logprobs", &r.logprobs);
    i.reset();
    f.Int("top_logprobs", 0, 20, &i);
    if (i) r.top_logprobs = static_cast<int32_t>(*i);
    if (r.top_logprobs > 0 && !r.logprobs) f.Fail("top_logprobs", "needs \"logprobs\": true");
    f.Bool("add_generation_prompt", &r.add_generation_prompt);
    if (const json* k = f.Find("chat_template_kwargs")) {
      if (!k->is_object()) {
        f.WrongType("chat_template_kwargs", "an object", *k);
      } else {
        Fields kf(*k);
        kf.Bool("enable_thinking", &r.enable_thinking);
        if (kf.error) f.Fail("chat_template_kwargs", kf.error->message);
      }
    }
    ReadTools(f, &r);
    ReadToolChoice(f, &r);
    if (const json* p = f.Find("parallel_tool_calls"); p && !p->is_null() && !p->is_boolean()) {
      f.WrongType("parallel_tool_calls", "a boolean", *p);
    }
    // "none": the model is not offered the tools, and its output is all content.
    if (r.tool_choice == ApiRequest::ToolChoice::kNone) r.tools = nullptr;
    // Phase 2 of a call forced after the thought is the phase-1 prompt as token ids, which the
    // server tokenizes itself and checks against the engine's count; with images the engine's
    // prompt holds each image's soft tokens, which the server cannot count.
    if (!r.images.empty() && ForcesCallAfterThought(r)) {
      f.Fail("tool_choice", "forced after thinking does not take images yet");
    }
    f.Unsupported("functions", "is OpenAI's legacy form; use \"tools\"");
  } else {
    i.reset();
    f.Int("logprobs", 0, 20, &i);
    if (i) {
      r.logprobs = true;
      r.top_logprobs = static_cast<int32_t>(*i);
    }
    f.Bool("echo", &r.echo);
    f.Unsupported("suffix", "is not supported (Gemma-4 has no fill-in-the-middle format)");
    i.reset();
    f.Int("best_of", 1, kMaxChoices, &i);
    if (i && *i != r.n) f.Fail("best_of", "other than n is not supported");
  }
  if (const json* rf = f.Find("response_format")) {
    auto type = rf->is_object() ? rf->find("type") : rf->end();
    if (!rf->is_object() || type == rf->end() || *type != "text") {
      f.Fail("response_format",
             "constrained output (json_object, json_schema) is not supported "
             "yet; only {\"type\": \"text\"}");
    }
  }
  if (const json* lb = f.Find("logit_bias")) {
    if (!(lb->is_object() && lb->empty())) {
      f.Fail("logit_bias", "is not supported: the engine has no per-token bias");
    }
  }
  f.String("user", &r.user);
  if (f.error) return *f.error;
  return r;
}

std::string ChatJson(const ApiRequest& r) {
  json chat = {{"messages", r.chat_messages}};
  if (!r.tools.is_null()) chat["tools"] = r.tools;
  return chat.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<std::string> ToolNames(const ApiRequest& r) {
  std::vector<std::string> names;
  if (!r.tools.is_array()) return names;
  for (const json& t : r.tools) names.push_back(t["function"]["name"].get<std::string>());
  return names;
}

std::string ForcedCallStart(const ApiRequest& r) {
  switch (r.tool_choice) {
    case ApiRequest::ToolChoice::kRequired:
      return "call:";
    case ApiRequest::ToolChoice::kNamed:
      return "call:" + r.tool_choice_name + "{";
    default:
      return "";
  }
}

bool ForcesCallAfterThought(const ApiRequest& r) {
  return r.endpoint == Endpoint::kChat && r.enable_thinking && !ForcedCallStart(r).empty();
}

std::string ForcedReplyPrefix(const ApiRequest& r) {
  const std::string start = ForcedCallStart(r);
  return start.empty() ? "" : "<|tool_call>" + start;
}

void FillEngineRequest(const ApiRequest& r, const SamplingDefaults& d, size_t prompt_index,
                       int choice, RequestStorage* storage, gannet_request_t* out) {
  *out = gannet_request_t GANNET_REQUEST_INIT;
  if (r.endpoint == Endpoint::kChat) {
    // Always the chat object: the model's template sees tool calls, tool results and content
    // parts as the client sent them.
    storage->chat_json = ChatJson(r);
    out->chat_json = storage->chat_json.c_str();
    out->add_generation_prompt = r.add_generation_prompt ? 1 : 2;
    out->enable_thinking = r.enable_thinking ? 1 : 0;
    // Users' text cannot spell the template's control tokens (a forged turn or tool result).
    out->split_special_tokens = 1;
    // A forced tool choice: the reply starts with the call, in the prompt (prompt tokens, not
    // generated ones, in usage). With thinking on this request is the thought only, and the
    // call comes in a second request (FillCallPhaseRequest).
    storage->reply_prefix = ForcesCallAfterThought(r) ? "" : ForcedReplyPrefix(r);
    if (!storage->reply_prefix.empty()) out->reply_prefix = storage->reply_prefix.c_str();
    // The images of image_url parts, one per {"type": "image"} part, in order.
    storage->images.clear();
    for (const std::string& bytes : r.images) {
      gannet_image_t img = GANNET_IMAGE_INIT;
      img.data = reinterpret_cast<const uint8_t*>(bytes.data());
      img.size = bytes.size();
      storage->images.push_back(img);
    }
    if (!storage->images.empty()) {
      out->images = storage->images.data();
      out->num_images = storage->images.size();
    }
  } else {
    const Prompt& p = r.prompts[prompt_index];
    if (p.is_ids) {
      out->prompt_tokens = p.ids.data();
      out->num_prompt_tokens = p.ids.size();
    } else {
      out->prompt_text = p.text.c_str();
    }
  }
  // OpenAI's legacy completions default to 16 tokens; chat runs until a stop or the context.
  const int32_t default_max = r.endpoint == Endpoint::kCompletion ? 16 : 0;
  out->max_tokens = r.max_tokens.value_or(d.max_tokens.value_or(default_max));
  out->min_tokens = std::min(r.min_tokens, out->max_tokens > 0 ? out->max_tokens : r.min_tokens);
  out->temperature = r.temperature.value_or(d.temperature.value_or(1.0f));
  out->top_p = r.top_p.value_or(d.top_p.value_or(0.0f));
  out->top_k = r.top_k.value_or(d.top_k.value_or(0));
  out->min_p = r.min_p.value_or(d.min_p.value_or(0.0f));
  out->repetition_penalty = r.repetition_penalty.value_or(d.repetition_penalty.value_or(0.0f));
  out->presence_penalty = r.presence_penalty;
  out->frequency_penalty = r.frequency_penalty;
  if (r.seed) {
    out->seed_mode = GANNET_SEED_FIXED;
    out->seed = *r.seed + static_cast<uint64_t>(choice);
  }
  storage->stop_ptrs.clear();
  for (const std::string& s : r.stop) storage->stop_ptrs.push_back(s.c_str());
  out->stop_strings = storage->stop_ptrs.data();
  out->num_stop_strings = storage->stop_ptrs.size();
  storage->stop_ids = r.stop_token_ids;
  if (!storage->stop_ids.empty()) {
    out->stop_token_ids = storage->stop_ids.data();
    out->num_stop_token_ids = storage->stop_ids.size();
  }
  out->ignore_default_stop_tokens = r.ignore_eos ? 1 : 0;
  // The engine gives the chosen token's logprob only together with >= 1 top entry.
  if (r.logprobs) out->logprobs = std::max(r.top_logprobs, 1);
}

}  // namespace gannet_server
