// The chat corpus (tests/data/chat_corpus/conversations.json: tools, tool calls and results,
// thinking on and off, system and developer prompts) rendered by gannet's template interpreter
// and compared with the reference renderings in expected.json, text byte for byte and token for
// token (tools/golden/chat_template_golden.py writes that file; its "renderer" field says whether
// transformers' apply_chat_template or plain Jinja2 in Hugging Face's settings made it).
//
// Templates rendered:
//   - the tiny checkpoints' chat_template.jinja (tests/data/tiny/31b: large, e2b: small), our own
//     rendition of Gemma-4's reference template (tools/make_tiny/chat_template_*.jinja), always;
//   - the reference template itself when GANNET_GEMMA4_CHAT_TEMPLATE names a copy of it (the
//     repository does not carry it), which checks the interpreter on the real thing.
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/common/file_util.h"
#include "lib/tokenizer/jinja_template.h"
#include "lib/tokenizer/tokenizer.h"
#include "tests/tokenizer/test_util.h"

namespace gannet::tokenizer {
namespace {

std::string DataRoot() {
  const char* root = std::getenv("GANNET_TEST_DATA");
  return root ? root : "";
}

Json LoadData(const std::string& rel) {
  auto text = ReadFileToString(DataRoot() + "/" + rel, int64_t{1} << 26, "test data");
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return Json();
  auto j = Json::Parse(*text);
  EXPECT_TRUE(j.ok()) << j.status();
  return j.ok() ? *j : Json();
}

JinjaTemplate LoadTemplate(const std::string& path) {
  auto text = ReadFileToString(path, int64_t{1} << 24, "chat template");
  EXPECT_TRUE(text.ok()) << text.status();
  auto t = JinjaTemplate::Parse(text.ok() ? *text : "");
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

struct Case {
  std::string name;
  Json data, settings;
};

std::vector<Case> LoadCases() {
  Json corpus = LoadData("chat_corpus/conversations.json");
  std::vector<Case> cases;
  for (const Json& c : corpus.Find("cases")->AsArray()) {
    Case out;
    out.name = c.Find("name")->AsString();
    out.data = Json::MakeObject();
    out.data.Set("messages", *c.Find("messages"));
    if (const Json* tools = c.Find("tools")) {
      Json list = Json::MakeArray();
      for (const Json& t : tools->AsArray()) list.Push(*corpus.Find("tools")->Find(t.AsString()));
      out.data.Set("tools", std::move(list));
    }
    out.settings = Json::MakeObject();
    out.settings.Set("bos_token", Json::String("<bos>"));
    out.settings.Set("eos_token", Json::String("<eos>"));
    const Json* agp = c.Find("add_generation_prompt");
    out.settings.Set("add_generation_prompt", Json::Bool(agp ? agp->AsBool() : true));
    for (const char* k : {"enable_thinking", "preserve_thinking"}) {
      if (const Json* v = c.Find(k)) out.settings.Set(k, *v);
    }
    cases.push_back(std::move(out));
  }
  return cases;
}

// Renders every case with `tmpl` and compares with the expected variant.
void CheckCorpus(const JinjaTemplate& tmpl, const std::string& variant, const char* label) {
  Json expected = LoadData("chat_corpus/expected.json");
  ASSERT_TRUE(expected.is_object());
  const Json* want = expected.Find("variants")->Find(variant);
  ASSERT_NE(want, nullptr);
  auto tok = Tokenizer::FromFile(DataRoot() + "/tiny/31b/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::vector<Case> cases = LoadCases();
  ASSERT_GE(cases.size(), 20u);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(label) + " / " + variant + " / " + c.name);
    const Json* w = want->Find(c.name);
    ASSERT_NE(w, nullptr)
        << "expected.json lacks this case: rerun tools/golden/chat_template_golden.py";
    auto got = tmpl.Render(c.data, c.settings, size_t{1} << 24, nullptr);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::string& text = w->Find("text")->AsString();
    EXPECT_EQ(*got, text);
    const std::vector<int32_t> ids = (*tok)->Encode(*got);
    EXPECT_EQ(ids, (*tok)->Encode(text));
    if (const Json* want_ids = w->Find("ids")) {
      EXPECT_EQ(ids, testing::Ids(*want_ids));
    }
  }
}

TEST(ChatCorpusTest, ExpectedFileSaysWhoRenderedIt) {
  Json expected = LoadData("chat_corpus/expected.json");
  ASSERT_TRUE(expected.is_object());
  const std::string renderer = expected.Find("renderer")->AsString();
  EXPECT_TRUE(renderer == "transformers" || renderer == "jinja2") << renderer;
  if (renderer != "transformers") {
    std::printf(
        "NOTE: chat_corpus/expected.json was rendered by %s, not yet by transformers' "
        "apply_chat_template (run tools/golden/chat_template_golden.py on a machine with "
        "transformers); token ids are compared through gannet's tokenizer only.\n",
        expected.Find("renderer_version")->AsString().c_str());
  }
}

TEST(ChatCorpusTest, TinyCheckpointTemplatesMatchTheReference) {
  CheckCorpus(LoadTemplate(DataRoot() + "/tiny/31b/chat_template.jinja"), "large", "tiny 31b");
  CheckCorpus(LoadTemplate(DataRoot() + "/tiny/26b-a4b/chat_template.jinja"), "large",
              "tiny 26b-a4b");
  CheckCorpus(LoadTemplate(DataRoot() + "/tiny/e2b/chat_template.jinja"), "small", "tiny e2b");
  CheckCorpus(LoadTemplate(DataRoot() + "/tiny/e4b/chat_template.jinja"), "small", "tiny e4b");
}

TEST(ChatCorpusTest, ReferenceTemplateWhenGiven) {
  const char* path = std::getenv("GANNET_GEMMA4_CHAT_TEMPLATE");
  if (path == nullptr || *path == '\0') {
    GTEST_SKIP() << "set GANNET_GEMMA4_CHAT_TEMPLATE to a copy of Gemma-4 31B-it's "
                    "chat_template.jinja to render the corpus with the reference template itself";
  }
  JinjaTemplate large = LoadTemplate(path);
  CheckCorpus(large, "large", "reference");
  // The small-model template differs only in the generation prompt's empty thought channel.
  std::string src = large.source();
  const std::string tail =
      "        {{- '<|turn>model\\n' -}}\n"
      "        {%- if not enable_thinking | default(false) -%}\n"
      "            {{- '<|channel>thought\\n<channel|>' -}}\n"
      "        {%- endif -%}\n";
  const size_t at = src.find(tail);
  ASSERT_NE(at, std::string::npos);
  src.replace(at, tail.size(), "        {{- '<|turn>model\\n' -}}\n");
  auto small = JinjaTemplate::Parse(src);
  ASSERT_TRUE(small.ok()) << small.status();
  CheckCorpus(*small, "small", "reference");
}

}  // namespace
}  // namespace gannet::tokenizer
