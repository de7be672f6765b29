// The int4 device layout's host half (kernels/quant/int4_repack.h): format checks, the canonical
// reference dequantization, and that the repack moves every element and scale to the place the
// layout documents (read back through the device layout, bit for bit equal to the canonical form).
#include "kernels/quant/int4_repack.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

#include "tests/kernels/int4_test_util.h"

namespace gannet::kernels {
namespace {

using testing::RandomInt4;

TEST(Int4Format, AcceptsTheKernelsFormats) {
  for (int g : {32, 64, 128}) {
    EXPECT_EQ(Int4FormatError(WeightFormat::Int4(g), 5, 256), nullptr) << g;
  }
  EXPECT_EQ(Int4FormatError(WeightFormat::Int4(320), 5, 320), nullptr);  // per-channel: group = K
  WeightFormat u4 = WeightFormat::Int4(128, DType::kF16);
  u4.elem = DType::kU4;
  u4.zero_point = true;
  EXPECT_EQ(Int4FormatError(u4, 7, 128), nullptr);
}

TEST(Int4Format, RefusesWhatTheKernelsCannotRun) {
  EXPECT_NE(Int4FormatError(WeightFormat::Int4(32), 4, 96), nullptr);    // K % 64
  EXPECT_NE(Int4FormatError(WeightFormat::Int4(16), 4, 128), nullptr);   // group 16
  EXPECT_NE(Int4FormatError(WeightFormat::Int4(128), 4, 192), nullptr);  // K % group
  EXPECT_NE(Int4FormatError(WeightFormat::Int4(32), 0, 128), nullptr);   // no rows
  EXPECT_NE(Int4FormatError(WeightFormat::Int4(32, DType::kF8E4M3), 4, 128), nullptr);
  WeightFormat u4 = WeightFormat::Int4(32);
  u4.elem = DType::kU4;
  EXPECT_NE(Int4FormatError(u4, 4, 128), nullptr);  // kU4 without zero points
  WeightFormat i4zp = WeightFormat::Int4(32);
  i4zp.zero_point = true;
  EXPECT_NE(Int4FormatError(i4zp, 4, 128), nullptr);  // WeightFormatError: signed with zero point
  EXPECT_NE(Int4FormatError(WeightFormat::Fp8Channel(), 4, 128), nullptr);
  WeightFormat channel = WeightFormat::Int4(0);
  channel.granularity = ScaleGranularity::kChannel;
  EXPECT_NE(Int4FormatError(channel, 4, 128),
            nullptr);  // the caller states per-channel as group = K
}

TEST(Int4Reference, DequantizesSignedAndZeroPointValues) {
  // Row 0: bytes 0x7F -> k0 = 0xF (-1), k1 = 0x7 (7); then 0x80 -> k2 = 0, k3 = 0x8 (-8).
  std::vector<uint8_t> packed(32, 0);
  packed[0] = 0x7F;
  packed[1] = 0x80;
  const float scale = 0.5f;
  WeightFormat f = WeightFormat::Int4(64, DType::kF32);
  std::vector<float> w(64);
  Int4DequantizeCanonical(f, 1, 64, {packed.data(), &scale, nullptr}, w.data());
  EXPECT_EQ(w[0], -0.5f);
  EXPECT_EQ(w[1], 3.5f);
  EXPECT_EQ(w[2], 0.f);
  EXPECT_EQ(w[3], -4.f);
  f.elem = DType::kU4;
  f.zero_point = true;
  const uint8_t zp = 3;
  Int4DequantizeCanonical(f, 1, 64, {packed.data(), &scale, &zp}, w.data());
  EXPECT_EQ(w[0], 6.f);    // (15 - 3) * 0.5
  EXPECT_EQ(w[1], 2.f);    // (7 - 3) * 0.5
  EXPECT_EQ(w[3], 2.5f);   // (8 - 3) * 0.5
  EXPECT_EQ(w[4], -1.5f);  // (0 - 3) * 0.5
}

TEST(Int4Layout, PlacesAnElementWhereTheLayoutSays) {
  const Int4Layout l = Int4LayoutOf(WeightFormat::Int4(32), 40, 128);
  EXPECT_EQ(l.n_pad, 48);
  // Row 9 = g 1 of the upper half (a1 / a3); column 18 = k-step 1, column 2 of the step: t = 1,
  // first of its pair, register a1 -> nibble 1 of lane 5's word 1: byte 5 * 16 + 4, high nibble.
  Int4NibbleAt at = Int4DeviceNibble(l, 9, 18);
  EXPECT_EQ(at.byte, 5 * 16 + 4);
  EXPECT_EQ(at.shift, 4);
  // Row 17 = g 1 of row block 1's lower half; column 64 + 27 = tile 1, k-step 1, column 11 of
  // the step: t = 1, second of its pair, register a2 -> nibble 6 of lane 5's word 1 of tile 3.
  at = Int4DeviceNibble(l, 17, 64 + 27);
  EXPECT_EQ(at.byte, (1 * 2 + 1) * 512 + 5 * 16 + 4 + 3);
  EXPECT_EQ(at.shift, 0);
  // Scales: (row block 1, group 3) pair of g = 2, upper row: row 16 + 10.
  EXPECT_EQ(Int4DeviceScaleIndex(l, 26, 3), ((1 * 4 + 3) * 8 + 2) * 2 + 1);
}

TEST(Int4Layout, MapIsABijectionOntoTheTiles) {
  const Int4Layout l = Int4LayoutOf(WeightFormat::Int4(64), 32, 192);
  std::set<int64_t> seen;
  for (int64_t r = 0; r < l.n_pad; ++r) {
    for (int64_t c = 0; c < l.k; ++c) {
      const Int4NibbleAt at = Int4DeviceNibble(l, r, c);
      ASSERT_GE(at.byte, 0);
      ASSERT_LT(at.byte, l.packed_bytes());
      EXPECT_TRUE(seen.insert(at.byte * 2 + at.shift / 4).second) << r << "," << c;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), l.packed_bytes() * 2);
}

class Int4RepackTest : public ::testing::TestWithParam<std::tuple<DType, int, DType>> {};

TEST_P(Int4RepackTest, ReadBackEqualsCanonical) {
  const auto [elem, group_arg, scale] = GetParam();
  for (const auto& [n, k] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 128}, {17, 256}, {33, 384}}) {
    const int group = group_arg == 0 ? static_cast<int>(k) : group_arg;
    if (k % group != 0) continue;
    const auto cw = RandomInt4(elem, group, scale, n, k, static_cast<uint64_t>(n * 131 + k));
    std::vector<float> want(static_cast<size_t>(n * k)), got(want.size(), -1.f);
    Int4DequantizeCanonical(cw.format, n, k, cw.view(), want.data());
    Int4Repacked rp;
    ASSERT_EQ(Int4Repack(cw.format, n, k, cw.view(), &rp), nullptr);
    EXPECT_EQ(static_cast<int64_t>(rp.packed.size()), rp.layout.packed_bytes());
    EXPECT_EQ(static_cast<int64_t>(rp.scales.size()), rp.layout.scale_bytes());
    EXPECT_EQ(static_cast<int64_t>(rp.zero_points.size()), rp.layout.zero_point_bytes());
    Int4DequantizeRepacked(rp.layout, rp.packed.data(), rp.scales.data(),
                           rp.zero_points.empty() ? nullptr : rp.zero_points.data(), got.data());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "n " << n << " k " << k << " i " << i;
    // Padding rows dequantize to zero.
    Int4Layout padded = rp.layout;
    padded.n = padded.n_pad;
    std::vector<float> all(static_cast<size_t>(padded.n_pad * k));
    Int4DequantizeRepacked(padded, rp.packed.data(), rp.scales.data(),
                           rp.zero_points.empty() ? nullptr : rp.zero_points.data(), all.data());
    for (int64_t i = n * k; i < padded.n_pad * k; ++i) ASSERT_EQ(all[i], 0.f) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, Int4RepackTest,
    ::testing::Combine(::testing::Values(DType::kI4, DType::kU4), ::testing::Values(32, 64, 128, 0),
                       ::testing::Values(DType::kBF16, DType::kF16, DType::kF32)));

TEST(Int4Layout, RowSlicesReadTheirRowsOfTheWhole) {
  for (DType elem : {DType::kI4, DType::kU4}) {
    const int64_t n = 50, k = 256;
    const auto cw = RandomInt4(elem, 64, DType::kBF16, n, k, 5);
    std::vector<float> want(static_cast<size_t>(n * k));
    Int4DequantizeCanonical(cw.format, n, k, cw.view(), want.data());
    Int4Repacked rp;
    ASSERT_EQ(Int4Repack(cw.format, n, k, cw.view(), &rp), nullptr);
    for (const auto& [row0, rows] : std::vector<std::pair<int64_t, int64_t>>{{0, 16}, {16, 34}}) {
      const Int4RowSlice s = Int4RowsOf(rp.layout, row0, rows);
      std::vector<float> got(static_cast<size_t>(rows * k));
      Int4DequantizeRepacked(
          s.layout, rp.packed.data() + s.packed_offset, rp.scales.data() + s.scale_offset,
          rp.zero_points.empty() ? nullptr : rp.zero_points.data() + s.zero_point_offset,
          got.data());
      for (int64_t i = 0; i < rows * k; ++i) {
        ASSERT_EQ(got[i], want[row0 * k + i]) << "rows " << row0 << "+" << rows << " i " << i;
      }
    }
  }
}

TEST(Int4Repack, ThreadsGiveTheSameBytes) {
  for (const auto& [n, threads] :
       std::vector<std::pair<int64_t, int>>{{50, 3}, {16, 4}, {130, 8}}) {
    const auto cw = RandomInt4(DType::kU4, 64, DType::kBF16, n, 256, 17 + n);
    Int4Repacked one, many;
    ASSERT_EQ(Int4Repack(cw.format, n, 256, cw.view(), &one), nullptr);
    ASSERT_EQ(Int4Repack(cw.format, n, 256, cw.view(), &many, threads), nullptr);
    EXPECT_EQ(one.packed, many.packed) << n << " rows, " << threads << " threads";
    EXPECT_EQ(one.scales, many.scales) << n;
    EXPECT_EQ(one.zero_points, many.zero_points) << n;
  }
}

TEST(Int4Repack, RefusesBadInput) {
  auto cw = RandomInt4(DType::kU4, 32, DType::kBF16, 4, 128, 1);
  cw.zero_points[3] = 16;
  Int4Repacked rp;
  EXPECT_NE(Int4Repack(cw.format, 4, 128, cw.view(), &rp), nullptr);
  EXPECT_TRUE(rp.packed.empty());
  auto ok = RandomInt4(DType::kI4, 32, DType::kBF16, 4, 128, 2);
  EXPECT_NE(Int4Repack(ok.format, 4, 96, ok.view(), &rp), nullptr);
  Int4Canonical missing = ok.view();
  missing.scales = nullptr;
  EXPECT_NE(Int4Repack(ok.format, 4, 128, missing, &rp), nullptr);
}

}  // namespace
}  // namespace gannet::kernels
