// GANNET_LOG_LEVEL values: the five names (and "warn"); anything else is no level, which the
// library reports on stderr and reads as info (issue 56: "garbage" silently meant info).
#include "lib/common/logging.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace gannet {
namespace {

TEST(LoggingTest, ParsesTheLevelNamesOnly) {
  EXPECT_EQ(ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(ParseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogLevel("warn"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogLevel("error"), LogLevel::kError);
  EXPECT_EQ(ParseLogLevel("off"), LogLevel::kOff);
  EXPECT_EQ(ParseLogLevel("garbage"), std::nullopt);
  EXPECT_EQ(ParseLogLevel("INFO"), std::nullopt);
  EXPECT_EQ(ParseLogLevel(""), std::nullopt);
}

// The warning names the variable and every valid value, and never echoes the value itself.
TEST(LoggingTest, AnUnknownLevelIsSaidOnStderr) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the level is read once
  EXPECT_EXIT(
      {
        ::setenv("GANNET_LOG_LEVEL", "garbage\x1b[31m", 1);
        GANNET_LOG_ERROR("first message");
        std::exit(GetLogLevel() == LogLevel::kWarning ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "GANNET_LOG_LEVEL \\(.* bytes\\) is not one of debug, info, warning, error, off; using "
      "warning");
}

}  // namespace
}  // namespace gannet
