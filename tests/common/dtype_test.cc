#include "lib/common/dtype.h"

#include <cmath>

#include "gtest/gtest.h"

namespace gannet {
namespace {

TEST(DTypeTest, ParsesSafetensorsNames) {
  EXPECT_EQ(DTypeFromSafetensorsName("BF16"), DType::kBF16);
  EXPECT_EQ(DTypeFromSafetensorsName("F8_E4M3"), DType::kF8E4M3);
  EXPECT_EQ(DTypeFromSafetensorsName("F4"), DType::kF4E2M1);
  EXPECT_FALSE(DTypeFromSafetensorsName("bf16").has_value());
  EXPECT_EQ(DTypeBits(DType::kF4E2M1), 4);
  EXPECT_EQ(DTypeBits(DType::kI64), 64);
  EXPECT_EQ(DTypeName(DType::kF8E5M2), "F8_E5M2");
}

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  // The Gemma-4 embedding scales of docs/gemma4-model.md §2.2.
  EXPECT_EQ(RoundToBf16(std::sqrt(1536.0f)), 39.25f);
  EXPECT_EQ(RoundToBf16(std::sqrt(2560.0f)), 50.5f);
  EXPECT_EQ(RoundToBf16(std::sqrt(2816.0f)), 53.0f);
  EXPECT_EQ(RoundToBf16(std::sqrt(5376.0f)), 73.5f);
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  // Halfway case rounds to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
}

// OCP E4M3: every finite code decodes to the value its fields say and encodes back to itself;
// rounding is to nearest even, finite overflow saturates to +-448, NaN stays NaN.
TEST(DTypeTest, Fp8E4M3Codes) {
  int finite = 0;
  for (int b = 0; b < 256; ++b) {
    const uint8_t code = static_cast<uint8_t>(b);
    const float f = Fp8E4M3ToFloat(code);
    if ((b & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(f)) << b;
      continue;
    }
    ++finite;
    const int e = (b >> 3) & 0xF, m = b & 7;
    const float want = (b & 0x80 ? -1.f : 1.f) * (e == 0 ? std::ldexp(static_cast<float>(m), -9)
                                                         : std::ldexp(1.f + m / 8.f, e - 7));
    EXPECT_EQ(f, want) << b;
    if (f == 0.f) {
      EXPECT_EQ(FloatToFp8E4M3(f) & 0x7F, 0) << b;
    } else {
      EXPECT_EQ(FloatToFp8E4M3(f), code) << b;
    }
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(Fp8E4M3ToFloat(0x7E), 448.f);
  EXPECT_EQ(FloatToFp8E4M3(448.f), 0x7E);
  EXPECT_EQ(FloatToFp8E4M3(1e9f), 0x7E);  // saturates, never NaN
  EXPECT_EQ(FloatToFp8E4M3(-470.f), 0xFE);
  EXPECT_EQ(FloatToFp8E4M3(INFINITY), 0x7E);
  EXPECT_EQ(FloatToFp8E4M3(NAN) & 0x7F, 0x7F);
  // Ties to even: 1.0625 is halfway between 1 (mantissa 0) and 1.125 (mantissa 1) -> 1;
  // 1.1875 is halfway between 1.125 and 1.25 (mantissa 2) -> 1.25.
  EXPECT_EQ(Fp8E4M3ToFloat(FloatToFp8E4M3(1.0625f)), 1.0f);
  EXPECT_EQ(Fp8E4M3ToFloat(FloatToFp8E4M3(1.1875f)), 1.25f);
  EXPECT_EQ(Fp8E4M3ToFloat(FloatToFp8E4M3(1.07f)), 1.125f);
  // Subnormals (steps of 2^-9) and the carry into the smallest normal 2^-6.
  EXPECT_EQ(Fp8E4M3ToFloat(FloatToFp8E4M3(3.1f / 512)), 3.f / 512);
  EXPECT_EQ(Fp8E4M3ToFloat(FloatToFp8E4M3(7.9f / 512)), 1.f / 64);
  EXPECT_EQ(Fp8E4M3ToFloat(FloatToFp8E4M3(0.4f / 512)), 0.f);
  // Relative error of a row scaled to amax = 448 stays within half a step (2^-4).
  for (float x = 0.02f; x < 448.f; x *= 1.01f) {
    EXPECT_LE(std::fabs(Fp8E4M3ToFloat(FloatToFp8E4M3(x)) - x), x / 16 + 1e-7f) << x;
  }
}

// The FP8 KV row: scale amax / 448, bytes FP8(x / scale), zero rows all zero with scale 0.
TEST(DTypeTest, Fp8E4M3RowsScaleByTheirAmax) {
  const float x[5] = {1.0f, -2.0f, 4.0f, 0.0f, 0.3f};
  uint8_t q[5];
  const float s = QuantizeFp8E4M3Row(x, 5, q);
  EXPECT_EQ(s, 4.0f / 448.0f);
  EXPECT_EQ(q[2], 0x7E);  // the amax element lands on 448
  EXPECT_EQ(q[0], FloatToFp8E4M3(112.0f));
  EXPECT_EQ(q[1], FloatToFp8E4M3(-224.0f));
  EXPECT_EQ(q[3], 0);
  float back[5];
  DequantizeFp8E4M3Row(q, 5, s, back);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(back[i], x[i], std::fabs(x[i]) / 16 + 1e-7f) << i;
  EXPECT_EQ(back[2], 4.0f);
  const float zeros[3] = {0.f, 0.f, 0.f};
  uint8_t qz[3] = {1, 1, 1};
  EXPECT_EQ(QuantizeFp8E4M3Row(zeros, 3, qz), 0.0f);
  EXPECT_EQ(qz[0] | qz[1] | qz[2], 0);
}

TEST(DTypeTest, F16RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(F16ToFloat(FloatToF16(f)), f) << f;
  }
  EXPECT_TRUE(std::isinf(F16ToFloat(FloatToF16(1e6f))));
}

TEST(DTypeTest, QuantizedElementTypesHaveTraitsButNoSafetensorsName) {
  EXPECT_EQ(DTypeBits(DType::kI4), 4);
  EXPECT_EQ(DTypeBits(DType::kU4), 4);
  EXPECT_EQ(DTypeElemsPerByte(DType::kI4), 2);
  EXPECT_EQ(DTypeElemsPerByte(DType::kF4E2M1), 2);
  EXPECT_EQ(DTypeElemsPerByte(DType::kF8E4M3), 1);
  EXPECT_EQ(DTypeElemsPerByte(DType::kBF16), 1);
  EXPECT_EQ(DTypeBytes(DType::kI4, 128), 64);
  EXPECT_EQ(DTypeShortName(DType::kI4), "int4");
  EXPECT_EQ(DTypeShortName(DType::kF8E4M3), "fp8e4m3");
  EXPECT_EQ(DTypeShortName(DType::kBF16), "bf16");
  // Safetensors has no int4 dtype (checkpoints pack it into I32 words).
  EXPECT_FALSE(DTypeFromSafetensorsName("I4").has_value());
  EXPECT_EQ(DTypeName(DType::kCount), "?");
}

TEST(DTypeTest, WeightFormatsDescribeTheQuantizedSchemes) {
  EXPECT_EQ(WeightFormatError(WeightFormat::Dense(DType::kBF16)), nullptr);
  EXPECT_EQ(WeightFormatError(WeightFormat::Int4(32)), nullptr);
  EXPECT_EQ(WeightFormatError(WeightFormat::Int4(128)), nullptr);
  EXPECT_EQ(WeightFormatError(WeightFormat::Fp8Channel()), nullptr);
  const WeightFormat nvfp4 = WeightFormat::Nvfp4();
  EXPECT_EQ(WeightFormatError(nvfp4), nullptr);
  EXPECT_EQ(nvfp4.elem, DType::kF4E2M1);
  EXPECT_EQ(nvfp4.group_size, 16);
  EXPECT_EQ(nvfp4.scale, DType::kF8E4M3);
  EXPECT_TRUE(nvfp4.global_scale);
  WeightFormat block{DType::kF8E4M3, ScaleGranularity::kBlock, 128, DType::kF32, 128};
  EXPECT_EQ(WeightFormatError(block), nullptr);

  EXPECT_NE(WeightFormatError(WeightFormat::Int4(0)), nullptr);   // grouped without a group
  EXPECT_NE(WeightFormatError(WeightFormat::Int4(33)), nullptr);  // half a byte per group
  WeightFormat sub_byte_scale = WeightFormat::Int4(32, DType::kF4E2M1);
  EXPECT_NE(WeightFormatError(sub_byte_scale), nullptr);
  WeightFormat signed_zp = WeightFormat::Int4(128);
  signed_zp.zero_point = true;
  EXPECT_NE(WeightFormatError(signed_zp), nullptr);
  WeightFormat dense_grouped = WeightFormat::Dense(DType::kBF16);
  dense_grouped.group_size = 32;
  EXPECT_NE(WeightFormatError(dense_grouped), nullptr);
  block.block_rows = 0;
  EXPECT_NE(WeightFormatError(block), nullptr);
}

TEST(DTypeTest, OnlyUnscaledFloatWeightsLoadToday) {
  EXPECT_TRUE(WeightFormatIsLoadable(WeightFormat::Dense(DType::kBF16)));
  EXPECT_TRUE(WeightFormatIsLoadable(WeightFormat::Dense(DType::kF16)));
  EXPECT_TRUE(WeightFormatIsLoadable(WeightFormat::Dense(DType::kF32)));
  EXPECT_FALSE(WeightFormatIsLoadable(WeightFormat::Dense(DType::kF8E4M3)));
  EXPECT_FALSE(WeightFormatIsLoadable(WeightFormat::Int4(32)));
  EXPECT_FALSE(WeightFormatIsLoadable(WeightFormat::Fp8Channel()));
  EXPECT_FALSE(WeightFormatIsLoadable(WeightFormat::Nvfp4()));
}

}  // namespace
}  // namespace gannet
