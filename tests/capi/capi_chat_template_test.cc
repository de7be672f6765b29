// The model's own chat template through the C ABI: a changed template changes the prompt, a
// folder without one falls back to the built-in Gemma-4 rendering, tokenizer_config.json's
// chat_template is read, and chat_json (tools, tool calls, tool results) renders through the
// template both in gannet_apply_chat_template_json and in a submitted request.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/common/json.h"
#include "tests/capi/capi_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

// A model folder with the tiny E4B's config, tokenizer and (optionally) a chat template.
class ModelFolder {
 public:
  ModelFolder() {
    dir_ = (fs::temp_directory_path() /
            ("gannet_chat_tmpl_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++)))
               .string();
    fs::create_directories(dir_);
    for (const char* f : {"config.json", "tokenizer.json"}) {
      fs::copy_file(TinyModelDir("e4b") + "/" + f, dir_ + "/" + f);
    }
  }
  ~ModelFolder() { fs::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

 private:
  static inline int counter_ = 0;
  std::string dir_;
};

std::string Render(gannet_tokenizer_t* tok, const char* role, const char* content) {
  constexpr uint32_t kMsg = sizeof(gannet_chat_message_t);
  gannet_chat_message_t m[] = {{kMsg, role, content}};
  size_t len = 0;
  EXPECT_EQ(gannet_apply_chat_template(tok, m, 1, 1, 0, nullptr, 0, &len), GANNET_OK)
      << gannet_last_error_message();
  std::string out(len + 1, '\0');
  EXPECT_EQ(gannet_apply_chat_template(tok, m, 1, 1, 0, out.data(), out.size(), &len), GANNET_OK);
  out.resize(len);
  return out;
}

gannet_status_t RenderJson(gannet_tokenizer_t* tok, const std::string& chat, std::string* out) {
  size_t len = 0;
  gannet_status_t st = gannet_apply_chat_template_json(tok, chat.c_str(), 1, 0, nullptr, 0, &len);
  if (st != GANNET_OK) return st;
  out->assign(len + 1, '\0');
  st = gannet_apply_chat_template_json(tok, chat.c_str(), 1, 0, out->data(), out->size(), &len);
  out->resize(len);
  return st;
}

gannet_tokenizer_t* Open(const std::string& dir) {
  gannet_tokenizer_t* tok = nullptr;
  EXPECT_EQ(gannet_tokenizer_open(dir.c_str(), &tok), GANNET_OK) << gannet_last_error_message();
  return tok;
}

TEST(CapiChatTemplateTest, TheFoldersTemplateIsHonoured) {
  ModelFolder folder;
  // No template: the built-in rendering.
  gannet_tokenizer_t* builtin = Open(folder.dir());
  EXPECT_EQ(gannet_tokenizer_has_chat_template(builtin), 0);
  EXPECT_EQ(Render(builtin, "user", "Hi"), "<bos><|turn>user\nHi<turn|>\n<|turn>model\n");
  gannet_tokenizer_close(builtin);

  // A template of our own making: its text, not the built-in one.
  WriteAll(folder.dir() + "/chat_template.jinja",
           "{{ bos_token }}{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n"
           "{% endfor %}{% if add_generation_prompt %}[MODEL]{% endif %}");
  gannet_tokenizer_t* custom = Open(folder.dir());
  EXPECT_EQ(gannet_tokenizer_has_chat_template(custom), 1);
  EXPECT_EQ(Render(custom, "user", "Hi"), "<bos>[USER] Hi\n[MODEL]");
  gannet_tokenizer_close(custom);

  // tokenizer_config.json's chat_template when there is no chat_template.jinja.
  fs::remove(folder.dir() + "/chat_template.jinja");
  WriteAll(folder.dir() + "/tokenizer_config.json",
           R"({"chat_template": [{"name": "tool_use", "template": "x"},
                                 {"name": "default", "template": "{{ bos_token }}CFG:{{ messages[0].content }}"}]})");
  gannet_tokenizer_t* from_config = Open(folder.dir());
  EXPECT_EQ(Render(from_config, "user", "Hi"), "<bos>CFG:Hi");
  gannet_tokenizer_close(from_config);

  // A template gannet cannot run is refused at open, naming the file and line.
  WriteAll(folder.dir() + "/chat_template.jinja", "ok\n{% include 'x' %}");
  gannet_tokenizer_t* bad = nullptr;
  EXPECT_NE(gannet_tokenizer_open(folder.dir().c_str(), &bad), GANNET_OK);
  const std::string err = gannet_last_error_message();
  EXPECT_NE(err.find("chat_template.jinja"), std::string::npos) << err;
  EXPECT_NE(err.find("line 2"), std::string::npos) << err;
}

const char* kToolChat = R"({"messages": [{"role": "user", "content": "Weather in Paris?"}],
  "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "description": "City name, e.g. Paris"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
      "days": {"type": "integer", "description": "Forecast days"}},
      "required": ["city"]}}}]})";

// The corpus's expected rendering (tests/data/chat_corpus/expected.json) of one case.
std::string Expected(const std::string& variant, const std::string& name) {
  auto j = Json::Parse(ReadAll(TestDataDir() + "/chat_corpus/expected.json"));
  EXPECT_TRUE(j.ok());
  return j->Find("variants")->Find(variant)->Find(name)->Find("text")->AsString();
}

TEST(CapiChatTemplateTest, ToolsRenderThroughTheTemplate) {
  gannet_tokenizer_t* tok = Open(TinyModelDir("e4b"));
  ASSERT_EQ(gannet_tokenizer_has_chat_template(tok), 1);
  std::string text;
  ASSERT_EQ(RenderJson(tok, kToolChat, &text), GANNET_OK) << gannet_last_error_message();
  EXPECT_EQ(text, Expected("small", "tools_declared"));
  // Malformed chat objects are errors, not crashes.
  for (const char* bad :
       {"", "[]", "{\"messages\": []}", "{\"messages\": [{\"content\": \"x\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": 3}",
        "{\"messages\": [{\"role\": \"user\""}) {
    EXPECT_EQ(RenderJson(tok, bad, &text), GANNET_ERR_INVALID_ARGUMENT) << bad;
  }
  gannet_tokenizer_close(tok);

  // Without a template, tools are refused with the reason.
  ModelFolder folder;
  gannet_tokenizer_t* builtin = Open(folder.dir());
  EXPECT_EQ(RenderJson(builtin, kToolChat, &text), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gannet_last_error_message()).find("chat template"), std::string::npos)
      << gannet_last_error_message();
  gannet_tokenizer_close(builtin);
}

// A corpus case (tests/data/chat_corpus/conversations.json) as a chat_json object.
std::string CorpusChat(const std::string& name) {
  auto corpus = Json::Parse(ReadAll(TestDataDir() + "/chat_corpus/conversations.json"));
  EXPECT_TRUE(corpus.ok());
  for (const Json& c : corpus->Find("cases")->AsArray()) {
    if (c.Find("name")->AsString() != name) continue;
    Json chat = Json::MakeObject();
    chat.Set("messages", *c.Find("messages"));
    return chat.Dump();
  }
  ADD_FAILURE() << "no corpus case " << name;
  return "";
}

TEST(CapiChatTemplateTest, SubmittedChatJsonUsesTheTemplate) {
  gannet_engine_t* engine = CreateTinyEngine("e4b");
  ASSERT_NE(engine, nullptr);
  const gannet_tokenizer_t* tok = nullptr;
  ASSERT_EQ(gannet_engine_tokenizer(engine, &tok), GANNET_OK) << gannet_last_error_message();
  EXPECT_EQ(gannet_tokenizer_has_chat_template(tok), 1);
  // A tool call and its result (the tiny model's context is too short for tool declarations).
  const std::string chat = CorpusChat("tool_message_named");
  const std::string text = Expected("small", "tool_message_named");
  size_t n = 0;
  ASSERT_EQ(gannet_tokenize(tok, text.data(), text.size(), 0, nullptr, 0, &n), GANNET_OK);

  gannet_request_t r = GANNET_REQUEST_INIT;
  r.chat_json = chat.c_str();
  r.max_tokens = 3;
  r.temperature = 0;
  Outcome o = RunAlone(engine, r);
  ASSERT_EQ(o.status, GANNET_OK) << o.message;
  EXPECT_EQ(o.num_prompt_tokens, static_cast<int32_t>(n));

  // reply_prefix: the forced start of the reply is prompt, read as template text (its
  // <|tool_call> one control token even with split_special_tokens), and never a TOKEN event.
  const std::string prefix = "<|tool_call>call:get_weather{";
  size_t np = 0;
  ASSERT_EQ(gannet_tokenize(tok, prefix.data(), prefix.size(), 0, nullptr, 0, &np), GANNET_OK);
  std::vector<int32_t> prefix_ids(np);
  ASSERT_EQ(gannet_tokenize(tok, prefix.data(), prefix.size(), 0, prefix_ids.data(), np, &np),
            GANNET_OK);
  EXPECT_EQ(prefix_ids[0], 48);  // <|tool_call>
  for (int64_t split : {0, 1}) {
    gannet_request_t p = r;
    p.reply_prefix = prefix.c_str();
    p.split_special_tokens = split;
    Outcome po = RunAlone(engine, p);
    ASSERT_EQ(po.status, GANNET_OK) << po.message;
    EXPECT_EQ(po.num_prompt_tokens, static_cast<int32_t>(n + np)) << split;
    EXPECT_LE(po.tokens.size(), 3u);
  }

  uint64_t id = 0;
  gannet_request_t bad = GANNET_REQUEST_INIT;
  bad.prompt_text = "x";
  bad.reply_prefix = "y";  // a text prompt is the caller's own: it has no reply to force
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gannet_last_error_message()).find("reply_prefix"), std::string::npos);
  EXPECT_EQ(gannet_request_check(&bad, nullptr), GANNET_ERR_INVALID_ARGUMENT);
  bad = GANNET_REQUEST_INIT;
  bad.chat_json = "{\"messages\": 5}";
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gannet_last_error_message()).find("messages"), std::string::npos);
  gannet_chat_message_t m[] = {{sizeof(gannet_chat_message_t), "user", "x"}};
  bad.messages = m;
  bad.num_messages = 1;
  bad.chat_json = kToolChat;  // two prompts
  EXPECT_EQ(gannet_engine_submit(engine, &bad, &id), GANNET_ERR_INVALID_ARGUMENT);
  gannet_engine_destroy(engine);
}

}  // namespace
}  // namespace gannet::testing
