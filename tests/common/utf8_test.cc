#include "lib/common/utf8.h"

#include "gtest/gtest.h"

namespace gannet {
namespace {

TEST(Utf8Test, ValidatesSequences) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\x80"));          // overlong NUL
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe4\xb8"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));              // stray continuation
}

TEST(Utf8Test, EncodesAndDecodes) {
  for (uint32_t cp : {0x41u, 0xE9u, 0x4E2Du, 0x1F600u, 0x10FFFFu}) {
    std::string s;
    AppendUtf8(cp, &s);
    size_t n = Utf8SequenceLength(s);
    ASSERT_EQ(n, s.size());
    EXPECT_EQ(DecodeUtf8(s, n), cp);
  }
}

}  // namespace
}  // namespace gannet
