#include "lib/tokenizer/chat_format.h"

#include "lib/common/file_util.h"
#include "lib/common/status.h"

namespace gannet::tokenizer {
namespace {

constexpr int64_t kMaxTemplateBytes = int64_t{1} << 20;

// tokenizer_config.json's "chat_template": a string, or named templates of which "default".
absl::StatusOr<std::optional<std::string>> TemplateFromTokenizerConfig(const std::string& path) {
  GANNET_ASSIGN_OR_RETURN(std::string text,
                          ReadFileToString(path, int64_t{64} << 20, "tokenizer_config.json"));
  GANNET_ASSIGN_OR_RETURN(Json config, Json::Parse(text));
  const Json* t = config.Find("chat_template");
  if (t == nullptr || t->is_null()) return std::optional<std::string>();
  if (t->is_string()) return std::optional<std::string>(t->AsString());
  if (t->is_array()) {
    for (const Json& named : t->AsArray()) {
      const Json* name = named.Find("name");
      const Json* body = named.Find("template");
      if (name && name->is_string() && name->AsString() == "default" && body && body->is_string()) {
        return std::optional<std::string>(body->AsString());
      }
    }
    return InvalidArgumentError("{}: chat_template lists no template named 'default'", path);
  }
  return InvalidArgumentError("{}: chat_template must be a string or a list of named templates",
                              path);
}

}  // namespace

absl::Status CheckChatJson(const Json& chat) {
  if (!chat.is_object()) return InvalidArgumentError("chat: expected a JSON object");
  const Json* messages = chat.Find("messages");
  if (messages == nullptr || !messages->is_array() || messages->AsArray().empty()) {
    return InvalidArgumentError("chat: 'messages' must be a non-empty array");
  }
  const Json::Array& list = messages->AsArray();
  for (size_t i = 0; i < list.size(); ++i) {
    const Json* role = list[i].Find("role");
    if (!list[i].is_object() || role == nullptr || !role->is_string()) {
      return InvalidArgumentError("chat: messages[{}] must be an object with a string 'role'", i);
    }
    // Images are bytes in the request (gannet_request_t.images), one {"type": "image"} part each;
    // the library fetches and decodes no URLs (a server turns data: URLs into bytes), and the
    // template would silently drop such a part.
    const Json* content = list[i].Find("content");
    if (content != nullptr && content->is_array()) {
      const Json::Array& parts = content->AsArray();
      for (size_t j = 0; j < parts.size(); ++j) {
        const Json* type = parts[j].Find("type");
        if (type != nullptr && type->is_string() &&
            (type->AsString() == "image_url" || type->AsString() == "input_image")) {
          return InvalidArgumentError(
              "chat: messages[{}].content[{}] is an '{}' part: pass the image's bytes in the "
              "request's images and write a {{\"type\": \"image\"}} part in its place",
              i, j, type->AsString());
        }
      }
    }
  }
  const Json* tools = chat.Find("tools");
  if (tools != nullptr && !tools->is_null() && !tools->is_array()) {
    return InvalidArgumentError("chat: 'tools' must be an array");
  }
  return absl::OkStatus();
}

absl::StatusOr<ChatFormat> ChatFormat::Load(const std::string& model_dir,
                                            ChatTemplateVariant variant) {
  ChatFormat f(variant);
  std::optional<std::string> source;
  const std::string jinja_path = model_dir + "/chat_template.jinja";
  const std::string config_path = model_dir + "/tokenizer_config.json";
  if (FileExists(jinja_path)) {
    GANNET_ASSIGN_OR_RETURN(std::string text,
                            ReadFileToString(jinja_path, kMaxTemplateBytes, "chat template"));
    source = std::move(text);
    f.origin_ = jinja_path;
  } else if (FileExists(config_path)) {
    GANNET_ASSIGN_OR_RETURN(source, TemplateFromTokenizerConfig(config_path));
    f.origin_ = config_path;
  }
  if (!source) {
    f.origin_.clear();
    return f;
  }
  auto parsed = JinjaTemplate::Parse(*source);
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(),
                        fmt::format("{}: {}", f.origin_, parsed.status().message()));
  }
  f.tmpl_ = std::move(*parsed);
  return f;
}

const std::string& ChatFormat::template_source() const {
  static const std::string kEmpty;
  return tmpl_ ? tmpl_->source() : kEmpty;
}

absl::StatusOr<std::string> ChatFormat::Render(
    const Json& chat, const ChatTemplateOptions& options,
    std::vector<std::pair<size_t, size_t>>* content_ranges) const {
  GANNET_RETURN_IF_ERROR(CheckChatJson(chat));
  if (!tmpl_) {
    // The built-in rendering takes text messages only.
    const Json* tools = chat.Find("tools");
    if (tools != nullptr && tools->is_array() && !tools->AsArray().empty()) {
      return InvalidArgumentError(
          "chat: tools need the model's chat template, and this model has none "
          "(no chat_template.jinja or tokenizer_config.json chat_template)");
    }
    std::vector<ChatMessage> messages;
    const Json::Array& list = chat.Find("messages")->AsArray();
    for (size_t i = 0; i < list.size(); ++i) {
      ChatMessage m;
      m.role = list[i].Find("role")->AsString();
      const Json* content = list[i].Find("content");
      if (content == nullptr || !content->is_string()) {
        return InvalidArgumentError(
            "chat: messages[{}].content must be a string for a model without a chat template", i);
      }
      if (list[i].Find("tool_calls") != nullptr && !list[i].Find("tool_calls")->is_null()) {
        return InvalidArgumentError(
            "chat: messages[{}] has tool_calls, which need the model's chat template", i);
      }
      m.content = content->AsString();
      for (const char* key : {"reasoning", "reasoning_content"}) {
        const Json* r = list[i].Find(key);
        if (r != nullptr && r->is_string() && m.reasoning.empty()) m.reasoning = r->AsString();
      }
      messages.push_back(std::move(m));
    }
    return RenderChatTemplate(messages, options, content_ranges);
  }
  Json data = Json::MakeObject();
  data.Set("messages", *chat.Find("messages"));
  if (const Json* tools = chat.Find("tools");
      tools != nullptr && tools->is_array() && !tools->AsArray().empty()) {
    data.Set("tools", *tools);
  }
  Json settings = Json::MakeObject();
  settings.Set("bos_token", Json::String(options.bos_token));
  settings.Set("eos_token", Json::String("<eos>"));
  settings.Set("add_generation_prompt", Json::Bool(options.add_generation_prompt));
  // Set only when asked for, so a template's `enable_thinking is defined` sees what HF's does.
  if (options.enable_thinking) settings.Set("enable_thinking", Json::Bool(true));
  if (options.preserve_thinking) settings.Set("preserve_thinking", Json::Bool(true));
  std::vector<std::pair<size_t, size_t>> ranges;
  GANNET_ASSIGN_OR_RETURN(std::string text,
                          tmpl_->Render(data, settings, kMaxRenderedPromptBytes, &ranges));
  if (content_ranges != nullptr) *content_ranges = std::move(ranges);
  return text;
}

absl::StatusOr<std::string> ChatFormat::Render(
    absl::Span<const ChatMessage> messages, const ChatTemplateOptions& options,
    std::vector<std::pair<size_t, size_t>>* content_ranges) const {
  if (!tmpl_) return RenderChatTemplate(messages, options, content_ranges);
  if (messages.empty()) return InvalidArgumentError("chat template: no messages to render");
  Json chat = Json::MakeObject();
  Json list = Json::MakeArray();
  for (const ChatMessage& m : messages) {
    Json j = Json::MakeObject();
    j.Set("role", Json::String(m.role));
    j.Set("content", Json::String(m.content));
    if (!m.reasoning.empty()) j.Set("reasoning", Json::String(m.reasoning));
    list.Push(std::move(j));
  }
  chat.Set("messages", std::move(list));
  return Render(chat, options, content_ranges);
}

}  // namespace gannet::tokenizer
