// The one KV layout value: validation in MakeKvLayout, the padding page, int64 array sizes past
// 2^31 elements, and the int32 slot range.
#include "lib/kv/kv_layout.h"

#include <vector>

#include "gtest/gtest.h"

namespace gannet::kv {
namespace {

// E2B: 35 layers, (4 sliding, 1 full) x 7, one KV head, layers 15..34 read the KV of the last
// earlier layer of their kind (13 sliding, 14 full).
std::vector<KvLayerGeometry> E2BLayers() {
  std::vector<KvLayerGeometry> layers;
  for (int i = 0; i < 35; ++i) {
    const bool full = i % 5 == 4;
    layers.push_back({full ? KvGroup::kFull : KvGroup::kSliding, 1, full ? 512 : 256,
                      i < 15 ? -1 : (full ? 14 : 13)});
  }
  return layers;
}

TEST(KvLayoutTest, ArraysPast2To31ElementsAreSizedIn64Bits) {
  // The E2B full pool of an H200 (the crash of issue 9): ~10.6M pages of 16 tokens.
  const int32_t full_pages = 10'600'000;
  auto layout = MakeKvLayout(E2BLayers(), 16, 512, 2, {2000, full_pages});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->storage_pages(KvGroup::kFull), full_pages + 1);
  EXPECT_EQ(layout->padding_page(KvGroup::kFull), full_pages);
  // Layer 4 (full): (10.6M + 1) pages x 1 head x 16 tokens x 512 dims = 86,835,208,192 elements.
  EXPECT_EQ(layout->ArrayElements(4), int64_t{full_pages + 1} * 16 * 512);
  EXPECT_GT(layout->ArrayElements(4), int64_t{1} << 31);
  EXPECT_EQ(layout->ArrayBytes(4), 2 * layout->ArrayElements(4));
  // Shared layer 34 reads layer 14's arrays.
  EXPECT_EQ(layout->ArrayElements(34), layout->ArrayElements(14));
  // 12 sliding + 3 full layers own KV, K and V each.
  EXPECT_EQ(layout->TotalBytes(), 2 * (12 * layout->ArrayBytes(0) + 3 * layout->ArrayBytes(4)));
  EXPECT_EQ(layout->bytes_per_token(KvGroup::kSliding), 12 * 2 * 256 * 2);
  EXPECT_EQ(layout->bytes_per_token(KvGroup::kFull), 3 * 2 * 512 * 2);
}

// FP8 KV: one byte per element plus one f32 scale per (token, head) row of K and of V.
TEST(KvLayoutTest, Fp8LayoutsCountElementsAndScales) {
  auto layout = MakeKvLayout(E2BLayers(), 16, 512, 1, {100, 200}, KvQuant::kFp8E4M3);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->quant, KvQuant::kFp8E4M3);
  EXPECT_EQ(layout->ArrayBytes(0), int64_t{101} * 16 * 256);
  EXPECT_EQ(layout->ScaleElements(0), int64_t{101} * 16);
  EXPECT_EQ(layout->ScaleElements(4), int64_t{201} * 16);
  EXPECT_EQ(layout->ScaleElements(34), layout->ScaleElements(14));
  EXPECT_EQ(layout->bytes_per_token(KvGroup::kSliding), 12 * 2 * (256 + 4));
  EXPECT_EQ(layout->bytes_per_token(KvGroup::kFull), 3 * 2 * (512 + 4));
  EXPECT_EQ(layout->TotalBytes(), 2 * (12 * (layout->ArrayBytes(0) + 4 * layout->ScaleElements(0)) +
                                       3 * (layout->ArrayBytes(4) + 4 * layout->ScaleElements(4))));
  // bf16 layouts have no scales.
  auto bf16 = MakeKvLayout(E2BLayers(), 16, 512, 2, {100, 200});
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(bf16->ScaleElements(0), 0);
  // FP8 means 1-byte elements, and 1-byte elements mean FP8.
  EXPECT_FALSE(MakeKvLayout(E2BLayers(), 16, 512, 2, {100, 200}, KvQuant::kFp8E4M3).ok());
  EXPECT_FALSE(MakeKvLayout(E2BLayers(), 16, 512, 1, {100, 200}).ok());
  EXPECT_FALSE(MakeKvLayout(E2BLayers(), 16, 512, 1, {100, 200}, static_cast<KvQuant>(7)).ok());
}

// Single-store K=V (31B's full layers: 4 heads of 512): one array per layer, half the bytes, with
// and without FP8; a reader must agree with its source on the flag.
TEST(KvLayoutTest, SingleStoreKEqVLayersKeepOneArray) {
  std::vector<KvLayerGeometry> layers;
  for (int i = 0; i < 12; ++i) {
    const bool full = i % 6 == 5;
    layers.push_back(
        {full ? KvGroup::kFull : KvGroup::kSliding, full ? 4 : 16, full ? 512 : 256, -1, full});
  }
  for (KvQuant quant : {KvQuant::kNone, KvQuant::kFp8E4M3}) {
    const int32_t bytes = KvElementBytes(quant, 2);
    auto layout = MakeKvLayout(layers, 16, 1024, bytes, {100, 200}, quant);
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_EQ(layout->bytes_per_token(KvGroup::kFull), 2 * 4 * KvRowBytes(512, bytes, quant));
    EXPECT_EQ(layout->bytes_per_token(KvGroup::kSliding),
              10 * 2 * 16 * KvRowBytes(256, bytes, quant));
    const int64_t full_array = layout->ArrayBytes(5) + layout->ScaleElements(5) * kKvScaleBytes;
    const int64_t sliding_array = layout->ArrayBytes(0) + layout->ScaleElements(0) * kKvScaleBytes;
    EXPECT_EQ(layout->TotalBytes(), 2 * full_array + 10 * 2 * sliding_array);
  }
  layers.push_back({KvGroup::kFull, 4, 512, 5, false});  // reads a single-store layer as two arrays
  auto bad = MakeKvLayout(layers, 16, 1024, 2, {100, 200});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layer 12 reads the KV of layer 5"), std::string::npos)
      << bad.status();
  layers.back().k_from_v = true;
  EXPECT_TRUE(MakeKvLayout(layers, 16, 1024, 2, {100, 200}).ok());
}

TEST(KvLayoutTest, PoolsStayWithinInt32SlotIds) {
  // (pages + 1) x P <= 2^31 - 1: at P = 16 the most managed pages is 134,217,726.
  const int32_t most = static_cast<int32_t>(kMaxPoolTokens / 16 - 1);
  EXPECT_TRUE(MakeKvLayout(E2BLayers(), 16, 512, 2, {10, most}).ok());
  const absl::Status past = MakeKvLayout(E2BLayers(), 16, 512, 2, {10, most + 1}).status();
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(past.message().find("use at most 134217726 pages"), std::string::npos) << past;
}

TEST(KvLayoutTest, RejectsInconsistentLayouts) {
  auto code = [](std::vector<KvLayerGeometry> layers, int32_t page, int32_t window, int32_t bytes,
                 PerGroup<int32_t> pages) {
    return MakeKvLayout(std::move(layers), page, window, bytes, pages).status().code();
  };
  constexpr auto kBad = absl::StatusCode::kInvalidArgument;
  const std::vector<KvLayerGeometry> both = {{KvGroup::kSliding, 2, 256}, {KvGroup::kFull, 1, 512}};
  EXPECT_EQ(code(both, 16, 512, 2, {4, 4}), absl::StatusCode::kOk);
  EXPECT_EQ(code(both, 0, 512, 2, {4, 4}), kBad);                 // page size
  EXPECT_EQ(code(both, kMaxPageSize + 1, 512, 2, {4, 4}), kBad);  // page size
  EXPECT_EQ(code(both, 16, 512, 3, {4, 4}), kBad);                // element size
  EXPECT_EQ(code(both, 16, 0, 2, {4, 4}), kBad);                  // sliding without a window
  EXPECT_EQ(code(both, 16, 512, 2, {0, 4}), kBad);                // a group with layers, no pages
  EXPECT_EQ(code(both, 16, 512, 2, {4, -1}), kBad);
  EXPECT_EQ(code({{KvGroup::kFull, 1, 512}}, 16, 0, 2, {4, 4}), kBad);  // pages, no layers
  EXPECT_EQ(code({{KvGroup::kFull, 1, 512}}, 16, 0, 2, {0, 4}), absl::StatusCode::kOk);
  EXPECT_EQ(code({}, 16, 512, 2, {0, 0}), kBad);                        // no layer owns KV
  EXPECT_EQ(code({{KvGroup::kFull, 0, 512}}, 16, 0, 2, {0, 4}), kBad);  // no heads
  // A shared layer must read an earlier layer of its group that owns KV, of the same geometry.
  EXPECT_EQ(code({{KvGroup::kFull, 1, 512}, {KvGroup::kFull, 1, 512, 0}}, 16, 0, 2, {0, 4}),
            absl::StatusCode::kOk);
  EXPECT_EQ(code({{KvGroup::kFull, 1, 512, 1}, {KvGroup::kFull, 1, 512}}, 16, 0, 2, {0, 4}), kBad);
  EXPECT_EQ(code({{KvGroup::kSliding, 1, 256}, {KvGroup::kFull, 1, 256, 0}}, 16, 8, 2, {4, 0}),
            kBad);
  EXPECT_EQ(code({{KvGroup::kFull, 1, 512}, {KvGroup::kFull, 2, 512, 0}}, 16, 0, 2, {0, 4}), kBad);
}

}  // namespace
}  // namespace gannet::kv
