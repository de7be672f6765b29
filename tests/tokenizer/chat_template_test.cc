#include "lib/tokenizer/chat_template.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/test_util.h"

namespace gannet::tokenizer {
namespace {

// Byte-for-byte against Jinja renderings of Gemma-4's chat_template.jinja
// (tools/tokenizer/make_chat_template_data.py).
TEST(ChatTemplateTest, MatchesJinjaRenderings) {
  Json expected = testing::LoadJson("chat_template_expected.json");
  const Json::Array& cases = expected.Find("cases")->AsArray();
  ASSERT_GE(cases.size(), 40u);
  for (const Json& c : cases) {
    std::vector<ChatMessage> messages;
    for (const Json& m : c.Find("messages")->AsArray()) {
      ChatMessage msg{m.Find("role")->AsString(), m.Find("content")->AsString(), ""};
      if (const Json* r = m.Find("reasoning")) msg.reasoning = r->AsString();
      messages.push_back(std::move(msg));
    }
    ChatTemplateOptions options;
    options.variant = c.Find("variant")->AsString() == "small" ? ChatTemplateVariant::kSmall
                                                               : ChatTemplateVariant::kLarge;
    const Json& o = *c.Find("options");
    options.add_generation_prompt = o.Find("add_generation_prompt")->AsBool();
    if (const Json* v = o.Find("enable_thinking")) options.enable_thinking = v->AsBool();
    if (const Json* v = o.Find("preserve_thinking")) options.preserve_thinking = v->AsBool();
    auto rendered = RenderChatTemplate(messages, options);
    ASSERT_TRUE(rendered.ok()) << rendered.status();
    EXPECT_EQ(*rendered, c.Find("expected")->AsString())
        << c.Find("messages")->Dump() << " " << o.Dump() << " " << c.Find("variant")->AsString();
  }
}

TEST(ChatTemplateTest, GenerationPromptDiffersByVariant) {
  std::vector<ChatMessage> messages = {{"user", "Hi", ""}};
  ChatTemplateOptions options;
  options.variant = ChatTemplateVariant::kLarge;
  EXPECT_EQ(*RenderChatTemplate(messages, options),
            "<bos><|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  options.variant = ChatTemplateVariant::kSmall;
  EXPECT_EQ(*RenderChatTemplate(messages, options), "<bos><|turn>user\nHi<turn|>\n<|turn>model\n");
  options.enable_thinking = true;
  EXPECT_EQ(*RenderChatTemplate(messages, options),
            "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
}

TEST(ChatTemplateTest, BadConversationsAreErrors) {
  ChatTemplateOptions options;
  auto empty = RenderChatTemplate({}, options);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<ChatMessage> tool = {{"user", "x", ""}, {"tool", "result", ""}};
  auto bad_role = RenderChatTemplate(tool, options);
  ASSERT_FALSE(bad_role.ok());
  EXPECT_TRUE(absl::StrContains(bad_role.status().message(), "'tool'"));
  std::vector<ChatMessage> bad_utf8 = {{"user", "\xC3", ""}};
  EXPECT_FALSE(RenderChatTemplate(bad_utf8, options).ok());
}

}  // namespace
}  // namespace gannet::tokenizer
