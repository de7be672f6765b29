// The CLI's parser rules and terminal escaping, without running a model.
#include <string>
#include <vector>

#include "examples/cli/args.h"
#include "examples/cli/terminal.h"
#include "gtest/gtest.h"

namespace gannet_cli {
namespace {

bool ParseOk(const std::vector<std::string>& words, Args* args, std::string* error = nullptr) {
  static const std::vector<FlagSpec> specs = {
      {"max-tokens", 'n', true, false, "N", ""},
      {"temperature", 't', true, false, "T", "", {"temp"}},
      {"quiet", 'q', false, false, "", ""},
  };
  std::vector<std::string> storage = {"gannet", "generate"};
  storage.insert(storage.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (std::string& w : storage) argv.push_back(w.data());
  const bool ok = args->Parse(specs, static_cast<int>(argv.size()), argv.data(), 2);
  if (error) *error = args->error();
  return ok;
}

TEST(CliArgsTest, OnlyTheDocumentedSpellingsParse) {
  Args a;
  EXPECT_TRUE(ParseOk({"-n", "5", "--temp=0.5", "-q"}, &a));
  EXPECT_EQ(a.GetInt("max-tokens", 0, 0, 100), 5);
  EXPECT_EQ(a.GetDouble("temperature", 0, 0, 2), 0.5);
  std::string e;
  Args b;
  EXPECT_FALSE(ParseOk({"-n5"}, &b, &e));
  EXPECT_NE(e.find("-n 5"), std::string::npos) << e;
  Args c;
  EXPECT_FALSE(ParseOk({"-ngl", "99"}, &c, &e));
  EXPECT_NE(e.find("unknown option -ngl"), std::string::npos) << e;
  Args d;
  EXPECT_FALSE(ParseOk({"prompt"}, &d, &e));
  EXPECT_NE(e.find("unexpected argument"), std::string::npos) << e;
  Args f;
  EXPECT_FALSE(ParseOk({"-q=1"}, &f, &e));
  Args g;
  EXPECT_FALSE(ParseOk({"--quiet=1"}, &g, &e));
  EXPECT_NE(e.find("takes no value"), std::string::npos) << e;
}

TEST(CliArgsTest, LlamaCppDashWordsParseOrSayWhatToWrite) {
  const std::vector<FlagSpec> specs = {
      {"system", 0, true, false, "TEXT", "", {"system-prompt"}, {"sys"}},
      {"threads", 't', true, false, "N", ""},
      {"seed", 's', true, false, "S", ""},
  };
  auto parse = [&](std::vector<std::string> words, Args* args) {
    words.insert(words.begin(), {"gannet", "chat"});
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    return args->Parse(specs, static_cast<int>(argv.size()), argv.data(), 2);
  };
  Args a;
  ASSERT_TRUE(parse({"-sys", "Be brief.", "-t", "8", "-s", "42"}, &a)) << a.error();
  EXPECT_EQ(a.Get("system"), "Be brief.");
  EXPECT_EQ(a.GetInt("threads", 0, 1, 64), 8);
  EXPECT_EQ(a.GetU64("seed", 0), 42u);
  Args b;
  ASSERT_TRUE(parse({"--system-prompt", "x"}, &b));
  EXPECT_EQ(b.Get("system"), "x");
  Args c;
  EXPECT_FALSE(parse({"-ngl", "99"}, &c));
  EXPECT_NE(c.error().find("no layers to offload"), std::string::npos) << c.error();
  Args d;
  EXPECT_FALSE(parse({"-syss", "x"}, &d));  // only the listed words
  EXPECT_NE(d.error().find("unknown option -syss"), std::string::npos) << d.error();
  EXPECT_NE(FormatFlags(specs).find("(also -sys --system-prompt)"), std::string::npos);
}

TEST(CliArgsTest, NumbersAreRangeChecked) {
  int64_t v = 0;
  EXPECT_TRUE(ParseInt64("42", 0, 100, &v));
  EXPECT_EQ(v, 42);
  EXPECT_FALSE(ParseInt64("4294967297", 0, 2147483647, &v));
  EXPECT_FALSE(ParseInt64("99999999999999999999999", INT64_MIN, INT64_MAX, &v));
  EXPECT_FALSE(ParseInt64("-1", 0, 10, &v));
  EXPECT_FALSE(ParseInt64("1e3", 0, 10000, &v));
  EXPECT_FALSE(ParseInt64(" 5", 0, 10, &v));
  EXPECT_FALSE(ParseInt64("", 0, 10, &v));
  Args a;
  ASSERT_TRUE(ParseOk({"-n", "-1"}, &a));
  EXPECT_EQ(a.GetInt("max-tokens", 7, 0, 100), 7);
  EXPECT_NE(a.error().find("[0, 100]"), std::string::npos) << a.error();
}

TEST(CliTerminalTest, ControlBytesAreEscapedAndTextKept) {
  EXPECT_EQ(EscapeControls("a\x1b[2Jb\n\tc"), "a\\x1b[2Jb\n\tc");
  EXPECT_EQ(EscapeControls("\x7f"), "\\x7f");
  EXPECT_EQ(EscapeControls("\xc2\x9b"
                           "31m"),
            "\\u009b31m");  // C1 CSI
  EXPECT_EQ(EscapeControls("h\xc3\xa9llo \xe2\x96\x81"), "h\xc3\xa9llo \xe2\x96\x81");
  EXPECT_EQ(EscapeForDisplay("\xe2\x96"), "\\xe2\\x96");  // half a character
  EXPECT_EQ(EscapeForDisplay("ok\xff"), "ok\\xff");
}

}  // namespace
}  // namespace gannet_cli
