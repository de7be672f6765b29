#include "lib/tokenizer/unicode_text.h"

#include <string>

#include "gtest/gtest.h"

namespace gannet::tokenizer {
namespace {

std::string Sanitized(const std::string& in) {
  std::string out;
  return ReplaceInvalidUtf8(in, &out) ? out : in;
}

constexpr char kFffd[] = "\xEF\xBF\xBD";

TEST(ReplaceInvalidUtf8Test, ValidTextIsUntouched) {
  std::string out = "sentinel";
  EXPECT_FALSE(ReplaceInvalidUtf8("plain ascii, 日本, 😀", &out));
  EXPECT_EQ(out, "sentinel");
}

// Expected values are Python's bytes.decode("utf-8", "replace") of the same bytes.
TEST(ReplaceInvalidUtf8Test, OneReplacementPerMaximalSubpart) {
  const std::string f = kFffd;
  EXPECT_EQ(Sanitized("\xFF"), f);
  EXPECT_EQ(Sanitized("a\xE2\x82"
                      "b"),
            "a" + f + "b");                                 // truncated 3-byte sequence
  EXPECT_EQ(Sanitized("\xF0\x9F\x98"), f);                  // truncated 4-byte sequence
  EXPECT_EQ(Sanitized("\xC0\xAF"), f + f);                  // overlong lead is never valid
  EXPECT_EQ(Sanitized("\xE0\x80\x80"), f + f + f);          // E0 needs A0..BF next
  EXPECT_EQ(Sanitized("\xED\xA0\x80"), f + f + f);          // surrogate
  EXPECT_EQ(Sanitized("\xF4\x90\x80\x80"), f + f + f + f);  // above U+10FFFF
  EXPECT_EQ(Sanitized("\x80\xBF"), f + f);                  // stray continuations
  EXPECT_EQ(Sanitized("\xE2\x28\xA1"), f + "(" + f);
  EXPECT_EQ(Sanitized("\xF0\x9F\x98\x80\xFF"), "\xF0\x9F\x98\x80" + f);
}

TEST(WhitespaceTest, RustAndPythonDefinitionsDifferOnlyInInformationSeparators) {
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u,
                      0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_TRUE(IsUnicodeWhitespace(cp)) << cp;
    EXPECT_TRUE(IsPythonSpace(cp)) << cp;
  }
  for (uint32_t cp : {0x1Cu, 0x1Fu}) {
    EXPECT_FALSE(IsUnicodeWhitespace(cp)) << cp;
    EXPECT_TRUE(IsPythonSpace(cp)) << cp;
  }
  for (uint32_t cp : {0x00u, 0x08u, 0x200Bu, 0xFEFFu, 0x180Eu, 0x61u}) {
    EXPECT_FALSE(IsUnicodeWhitespace(cp)) << cp;
    EXPECT_FALSE(IsPythonSpace(cp)) << cp;
  }
}

TEST(TrimPythonSpaceTest, StripsBothEnds) {
  EXPECT_EQ(TrimPythonSpace("  \t\nhi there\n\x1c\xE3\x80\x80"), "hi there");
  EXPECT_EQ(TrimPythonSpace("\xC2\xA0"), "");
  EXPECT_EQ(TrimPythonSpace("x"), "x");
  EXPECT_EQ(TrimPythonSpace("\xE2\x80\x8Bzw\xE2\x80\x8B"), "\xE2\x80\x8Bzw\xE2\x80\x8B");
}

TEST(CodePointTest, NextAndLast) {
  size_t len;
  EXPECT_EQ(NextCodePoint("\xE2\x82\xAC!", &len), 0x20ACu);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(LastCodePoint("a\xF0\x9F\x98\x80", &len), 0x1F600u);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(NextCodePoint("\xFF", &len), 0xFFFDu);
  EXPECT_EQ(len, 1u);
}

}  // namespace
}  // namespace gannet::tokenizer
