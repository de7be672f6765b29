// Fuzz target: the Gemma-4 chat template (lib/tokenizer/chat_template.h), which turns caller
// messages (C ABI chat requests, `gannet chat`) into prompt text.
//
// Input: byte 0 holds the options, the rest is the conversation as text, so the seeds stay
// readable (corpus/chat_template_fuzz, from the cases of tests/data/tokenizer/
// chat_template_expected.json, via make_corpus.py):
//   options & 1   variant kSmall (E2B/E4B) instead of kLarge (31B/26B-A4B)
//   options & 2   add_generation_prompt
//   options & 4   enable_thinking
//   options & 8   preserve_thinking
//   options & 16  an empty bos_token instead of "<bos>"
//   messages are separated by 0x1E; the fields of one message by 0x1F: role, content, reasoning
//   (missing fields are empty). A role of one character '0'..'5' stands for system, developer,
//   user, assistant, model, tool (so mutations reach every known role cheaply); any other role is
//   taken verbatim (unknown roles, invalid UTF-8).
// Every byte is allowed in contents: invalid UTF-8, NULs, the template's own markers
// (<|turn>, <channel|>, ...), whitespace that the template trims.
//
// Expected: a status for an empty conversation, an unknown role or invalid UTF-8; otherwise the
// prompt. Properties checked: the prompt starts with bos_token and is valid UTF-8 (its inputs
// were).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/utf8.h"
#include "lib/tokenizer/chat_template.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace gannet;
using tokenizer::ChatMessage;
using tokenizer::ChatTemplateOptions;
using tokenizer::ChatTemplateVariant;

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const uint8_t flags = in.U8();
  const std::string body = in.Rest();

  ChatTemplateOptions options;
  options.variant = (flags & 1) ? ChatTemplateVariant::kSmall : ChatTemplateVariant::kLarge;
  options.add_generation_prompt = flags & 2;
  options.enable_thinking = flags & 4;
  options.preserve_thinking = flags & 8;
  if (flags & 16) options.bos_token.clear();

  static constexpr const char* kRoles[] = {"system",    "developer", "user",
                                           "assistant", "model",     "tool"};
  std::vector<ChatMessage> messages;
  if (!body.empty()) {
    for (std::string_view m : Split(body, '\x1e')) {
      const std::vector<std::string_view> f = Split(m, '\x1f');
      ChatMessage msg;
      msg.role = std::string(f[0]);
      if (msg.role.size() == 1 && msg.role[0] >= '0' && msg.role[0] <= '5') {
        msg.role = kRoles[msg.role[0] - '0'];
      }
      if (f.size() > 1) msg.content = std::string(f[1]);
      if (f.size() > 2) msg.reasoning = std::string(f[2]);
      messages.push_back(std::move(msg));
    }
  }

  auto prompt = tokenizer::RenderChatTemplate(messages, options);
  if (!prompt.ok()) return 0;
  if (prompt->compare(0, options.bos_token.size(), options.bos_token) != 0) {
    fuzz::Fail("prompt does not start with bos_token", *prompt);
  }
  if (!IsValidUtf8(*prompt)) fuzz::Fail("prompt is not valid UTF-8", *prompt);
  return 0;
}
