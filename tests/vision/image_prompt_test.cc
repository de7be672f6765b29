// Prompt expansion and image block ids against HF's Gemma4Processor.
#include <vector>

#include "gtest/gtest.h"
#include "lib/vision/image_prompt.h"
#include "tests/vision/image_golden.h"

namespace gannet::vision {
namespace {

using testing::Golden;

std::vector<int32_t> Ints(const Json& array) {
  std::vector<int32_t> out;
  for (const Json& v : array.AsArray()) out.push_back(static_cast<int32_t>(v.AsInt()));
  return out;
}

ImageTokenIds GoldenIds() {
  const Json& ids = *Golden().Find("token_ids");
  return {static_cast<int32_t>(ids.Find("boi")->AsInt()),
          static_cast<int32_t>(ids.Find("image")->AsInt()),
          static_cast<int32_t>(ids.Find("eoi")->AsInt())};
}

// HF's block ids from mm_token_type_ids (modeling_gemma4.get_block_sequence_ids_for_mask):
// each contiguous run of image tokens is one block, numbered from 0; everything else -1.
std::vector<int32_t> HfBlockIds(const std::vector<int32_t>& types) {
  std::vector<int32_t> out(types.size(), -1);
  int32_t block = -1;
  for (size_t i = 0; i < types.size(); ++i) {
    const bool vision = types[i] == 1 || types[i] == 2;
    if (vision && (i == 0 || !(types[i - 1] == 1 || types[i - 1] == 2))) ++block;
    if (vision) out[i] = block;
  }
  return out;
}

TEST(ImagePrompt, ExpansionMatchesHf) {
  const ImageTokenIds ids = GoldenIds();
  for (const Json& e : Golden().Find("expansion")->AsArray()) {
    SCOPED_TRACE(e.Find("tokens")->AsInt());
    const std::vector<int32_t> prompt = Ints(*e.Find("prompt_ids"));
    std::vector<int> soft;
    for (int32_t n : Ints(*e.Find("num_soft_tokens"))) soft.push_back(n);
    auto expanded = ExpandImagePlaceholders(prompt, soft, ids);
    ASSERT_TRUE(expanded.ok()) << expanded.status();
    EXPECT_EQ(expanded->tokens, Ints(*e.Find("input_ids")));
    EXPECT_EQ(expanded->image_block_ids, HfBlockIds(Ints(*e.Find("mm_token_type_ids"))));
  }
}

TEST(ImagePrompt, OneImageSequence) {
  const ImageTokenIds ids{10, 11, 12};
  EXPECT_EQ(ImageTokenSequence(3, ids), (std::vector<int32_t>{10, 11, 11, 11, 12}));
  auto e = ExpandImagePlaceholders(std::vector<int32_t>{1, 11, 2, 11}, std::vector<int>{2, 1}, ids);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->tokens, (std::vector<int32_t>{1, 10, 11, 11, 12, 2, 10, 11, 12}));
  EXPECT_EQ(e->image_block_ids, (std::vector<int32_t>{-1, -1, 0, 0, -1, -1, -1, 1, -1}));
}

TEST(ImagePrompt, Refusals) {
  const ImageTokenIds ids{10, 11, 12};
  const std::vector<int32_t> prompt = {1, 11, 2};
  EXPECT_FALSE(ExpandImagePlaceholders(prompt, std::vector<int>{}, ids).ok());
  EXPECT_FALSE(ExpandImagePlaceholders(prompt, std::vector<int>{4, 4}, ids).ok());
  EXPECT_FALSE(ExpandImagePlaceholders(prompt, std::vector<int>{0}, ids).ok());
  EXPECT_FALSE(
      ExpandImagePlaceholders(std::vector<int32_t>{10, 11}, std::vector<int>{1}, ids).ok());
  EXPECT_FALSE(
      ExpandImagePlaceholders(prompt, std::vector<int>{1}, ImageTokenIds{10, 10, 12}).ok());
  EXPECT_FALSE(ExpandImagePlaceholders(prompt, std::vector<int>{1}, ImageTokenIds{}).ok());
  auto none = ExpandImagePlaceholders(std::vector<int32_t>{1, 2}, std::vector<int>{}, ids);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->image_block_ids, (std::vector<int32_t>{-1, -1}));
}

}  // namespace
}  // namespace gannet::vision
