#include "lib/common/dtype.h"

#include <cmath>

#include "gtest/gtest.h"

namespace gannet {
namespace {

TEST(DTypeTest, ParsesSafetensorsNames) {
  EXPECT_EQ(DTypeFromSafetensorsName("BF16"), DType::kBF16);
  EXPECT_EQ(DTypeFromSafetensorsName("F8_E4M3"), DType::kF8E4M3);
  EXPECT_EQ(DTypeFromSafetensorsName("F4"), DType::kF4);
  EXPECT_FALSE(DTypeFromSafetensorsName("bf16").has_value());
  EXPECT_EQ(DTypeBits(DType::kF4), 4);
  EXPECT_EQ(DTypeBits(DType::kI64), 64);
  EXPECT_EQ(DTypeName(DType::kF8E5M2), "F8_E5M2");
}

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  // The Gemma-4 embedding scales of gemma4-architecture.md 2.2.
  EXPECT_EQ(RoundToBf16(std::sqrt(1536.0f)), 39.25f);
  EXPECT_EQ(RoundToBf16(std::sqrt(2560.0f)), 50.5f);
  EXPECT_EQ(RoundToBf16(std::sqrt(2816.0f)), 53.0f);
  EXPECT_EQ(RoundToBf16(std::sqrt(5376.0f)), 73.5f);
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  // Halfway case rounds to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
}

TEST(DTypeTest, F16RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(F16ToFloat(FloatToF16(f)), f) << f;
  }
  EXPECT_TRUE(std::isinf(F16ToFloat(FloatToF16(1e6f))));
}

}  // namespace
}  // namespace gannet
