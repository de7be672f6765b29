// Image blocks of a prompt (lib/common/image_blocks.h): validation, per-token ids, lookup and the
// per-page prefix-cache salts.
#include "lib/common/image_blocks.h"

#include <vector>

#include "gtest/gtest.h"

namespace gannet {
namespace {

TEST(ImageBlocksTest, ChecksRangesOrderAndSeparation) {
  EXPECT_TRUE(CheckImageBlocks({}, 10).ok());
  const std::vector<ImageBlock> ok = {{1, 3, 5}, {4, 10, 6}};
  EXPECT_TRUE(CheckImageBlocks(ok, 10).ok());
  const std::vector<std::vector<ImageBlock>> bad = {
      {{3, 3, 1}},              // empty
      {{-1, 2, 1}},             // before the prompt
      {{8, 11, 1}},             // past its end
      {{4, 6, 1}, {1, 3, 2}},   // out of order
      {{1, 5, 1}, {4, 6, 2}},   // overlapping
      {{1, 4, 1}, {4, 6, 2}}};  // touching: one block for HF
  for (const auto& b : bad) {
    EXPECT_TRUE(absl::IsInvalidArgument(CheckImageBlocks(b, 10))) << b[0].begin << " " << b[0].end;
  }
}

TEST(ImageBlocksTest, IdsAndLookup) {
  const std::vector<ImageBlock> b = {{1, 3, 5}, {5, 7, 6}};
  EXPECT_TRUE(ImageBlockIds({}, 8).empty());
  EXPECT_EQ(ImageBlockIds(b, 8), (std::vector<int32_t>{-1, 0, 0, -1, -1, 1, 1, -1}));
  EXPECT_EQ(ImageBlockAt(b, 0), nullptr);
  EXPECT_EQ(ImageBlockAt(b, 2), &b[0]);
  EXPECT_EQ(ImageBlockAt(b, 3), nullptr);
  EXPECT_EQ(ImageBlockAt(b, 5), &b[1]);
  EXPECT_EQ(ImageBlockAt(b, 7), nullptr);
}

TEST(ImageBlocksTest, PageSaltsFollowContentAndPlace) {
  // Pages of 4: block [2, 9) covers pages 0, 1 and 2; page 3 is text.
  const std::vector<ImageBlock> b = {{2, 9, 42}};
  const std::vector<uint64_t> s = ImagePageSalts(b, 4, 4);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_NE(s[0], 0u);
  EXPECT_NE(s[1], 0u);
  EXPECT_NE(s[2], 0u);
  EXPECT_EQ(s[3], 0u);
  EXPECT_TRUE(ImagePageSalts({}, 4, 4).empty());
  // Other content, or the same content elsewhere in the page, salts differently.
  const std::vector<uint64_t> other = ImagePageSalts(std::vector<ImageBlock>{{2, 9, 43}}, 4, 4);
  const std::vector<uint64_t> moved = ImagePageSalts(std::vector<ImageBlock>{{1, 9, 42}}, 4, 4);
  EXPECT_NE(other[0], s[0]);
  EXPECT_NE(other[2], s[2]);
  EXPECT_NE(moved[0], s[0]);
  EXPECT_EQ(moved[1], s[1]);  // page 1 is all image in both: same extent, same content
  EXPECT_EQ(ImagePageSalts(b, 4, 4), s);
}

}  // namespace
}  // namespace gannet
