// Target sizes, resized pixels, patch layout and soft-token counts against HF's processor.
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "lib/vision/image_error.h"
#include "lib/vision/image_preprocess.h"
#include "lib/vision/image_resize.h"
#include "tests/vision/image_golden.h"

namespace gannet::vision {
namespace {

using testing::DecodeFileOrDie;
using testing::Golden;
using testing::ImagesDir;
using testing::MaxAbsDiff;

PreprocessOptions Tokens(int64_t n) {
  PreprocessOptions o;
  o.max_soft_tokens = static_cast<int>(n);
  return o;
}

// The dumps come from the project's reference: transformers 5.17 (a later version converts
// alpha differently, docs/vision.md), its default torchvision-backed processor.
TEST(ImagePreprocess, GoldenIsFromTheReference) {
  EXPECT_EQ(Golden().Find("transformers")->AsString(), "5.17.0");
  EXPECT_EQ(Golden().Find("image_processor")->AsString(), "Gemma4ImageProcessor");
}

TEST(ImagePreprocess, TargetSizesMatchHf) {
  int checked = 0;
  for (const Json& row : Golden().Find("target_sizes")->AsArray()) {
    const auto& v = row.AsArray();
    auto size = GemmaTargetSize(static_cast<int>(v[0].AsInt()), static_cast<int>(v[1].AsInt()),
                                Tokens(v[2].AsInt()));
    ASSERT_TRUE(size.ok()) << size.status();
    EXPECT_EQ(size->height, v[3].AsInt()) << row.Dump();
    EXPECT_EQ(size->width, v[4].AsInt()) << row.Dump();
    ++checked;
  }
  EXPECT_EQ(checked, 70);
}

// The resized uint8 image HF patchified, for every stored case: exactly equal. Decoding and
// resizing are integer computations on both sides (PIL/libpng/libjpeg/libwebp decode, PyTorch's
// fixed-point antialiased bicubic), so any difference is a bug rather than rounding noise.
TEST(ImagePreprocess, ResizedImageMatchesHf) {
  int checked = 0;
  for (const Json& c : Golden().Find("cases")->AsArray()) {
    const std::string name = c.Find("case")->AsString();
    const int64_t tokens = c.Find("tokens")->AsInt();
    SCOPED_TRACE(name + " at " + std::to_string(tokens));
    RgbImage input = DecodeFileOrDie(ImagesDir() + "/" + c.Find("file")->AsString());
    auto resized = ResizeForGemma(input, Tokens(tokens));
    ASSERT_TRUE(resized.ok()) << resized.status();
    EXPECT_EQ(resized->height, c.Find("target_height")->AsInt());
    EXPECT_EQ(resized->width, c.Find("target_width")->AsInt());
    RgbImage hf =
        DecodeFileOrDie(ImagesDir() + "/golden/" + name + "_" + std::to_string(tokens) + ".png");
    EXPECT_EQ(MaxAbsDiff(*resized, hf), 0);
    ++checked;
  }
  EXPECT_EQ(checked, 23);
}

TEST(ImagePreprocess, CountsMatchHf) {
  for (const Json& c : Golden().Find("cases")->AsArray()) {
    RgbImage input = DecodeFileOrDie(ImagesDir() + "/" + c.Find("file")->AsString());
    auto patches = PreprocessImage(input, Tokens(c.Find("tokens")->AsInt()));
    ASSERT_TRUE(patches.ok()) << patches.status();
    EXPECT_EQ(patches->max_patches, c.Find("max_patches")->AsInt());
    EXPECT_EQ(patches->num_patches, c.Find("num_patches")->AsInt());
    EXPECT_EQ(patches->num_soft_tokens, c.Find("num_soft_tokens")->AsInt());
    EXPECT_EQ(patches->pixel_values.size(), size_t(patches->max_patches) * 768);
    EXPECT_EQ(patches->position_ids.size(), size_t(patches->max_patches) * 2);
  }
}

// HF's rescale of a uint8 v, for all 256 values, bit for bit.
TEST(ImagePreprocess, RescaleMatchesHf) {
  const auto& table = Golden().Find("rescale_table")->AsArray();
  ASSERT_EQ(table.size(), 256u);
  for (int v = 0; v < 256; ++v) {
    const float want = static_cast<float>(table[v].AsDouble());
    const float got = RescaleU8(static_cast<uint8_t>(v));
    EXPECT_EQ(std::memcmp(&want, &got, sizeof(float)), 0) << v;
  }
}

// The first pixel_values rows (order inside a patch) and all position ids (grid order,
// padding) of one case, exactly; padding pixels are zero.
TEST(ImagePreprocess, LayoutMatchesHf) {
  const Json& layout = *Golden().Find("layout");
  const Json* c = nullptr;
  for (const Json& x : Golden().Find("cases")->AsArray()) {
    if (x.Find("case")->AsString() == layout.Find("case")->AsString() &&
        x.Find("tokens")->AsInt() == layout.Find("tokens")->AsInt()) {
      c = &x;
    }
  }
  ASSERT_NE(c, nullptr);
  RgbImage input = DecodeFileOrDie(ImagesDir() + "/" + c->Find("file")->AsString());
  auto patches = PreprocessImage(input, Tokens(layout.Find("tokens")->AsInt()));
  ASSERT_TRUE(patches.ok()) << patches.status();
  const auto& rows = layout.Find("pixel_values_u8")->AsArray();
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto& row = rows[r].AsArray();
    ASSERT_EQ(row.size(), 768u);
    for (size_t k = 0; k < row.size(); ++k) {
      ASSERT_EQ(patches->pixel_values[r * 768 + k], RescaleU8(uint8_t(row[k].AsInt())))
          << "row " << r << " value " << k;
    }
  }
  const auto& pos = layout.Find("image_position_ids")->AsArray();
  ASSERT_EQ(pos.size(), size_t(patches->max_patches));
  for (size_t i = 0; i < pos.size(); ++i) {
    ASSERT_EQ(patches->position_ids[2 * i], pos[i].AsArray()[0].AsInt()) << i;
    ASSERT_EQ(patches->position_ids[2 * i + 1], pos[i].AsArray()[1].AsInt()) << i;
  }
  for (size_t i = size_t(patches->num_patches) * 768; i < patches->pixel_values.size(); ++i) {
    ASSERT_EQ(patches->pixel_values[i], 0.0f) << i;
  }
}

TEST(ImagePreprocess, RefusesBadOptionsAndImages) {
  RgbImage image{4, 4, std::vector<uint8_t>(48, 1)};
  EXPECT_EQ(PreprocessImage(image, Tokens(100)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GemmaTargetSize(10, 10, Tokens(0)).status().code(), absl::StatusCode::kInvalidArgument);
  RgbImage broken{4, 4, std::vector<uint8_t>(47, 1)};
  EXPECT_EQ(GetImageErrorKind(PreprocessImage(broken).status()), ImageErrorKind::kEmpty);
  EXPECT_EQ(GetImageErrorKind(GemmaTargetSize(0, 10).status()), ImageErrorKind::kEmpty);
}

// Properties HF's rule guarantees for any shape: sides multiples of 48, at most max_patches.
TEST(ImagePreprocess, TargetSizeInvariants) {
  for (int tokens : {70, 140, 280, 560, 1120}) {
    for (int h : {1, 2, 47, 48, 333, 1000, 4096, 65535}) {
      for (int w : {1, 3, 48, 517, 2048, 65535}) {
        auto size = GemmaTargetSize(h, w, Tokens(tokens));
        ASSERT_TRUE(size.ok()) << h << "x" << w << ": " << size.status();
        EXPECT_EQ(size->height % 48, 0);
        EXPECT_EQ(size->width % 48, 0);
        EXPECT_LE((size->height / 16) * (size->width / 16), tokens * 9);
      }
    }
  }
}

// A constant image stays constant through the resize (weights sum to one in fixed point),
// shrinking and enlarging, and an unchanged size is returned as is.
TEST(ImageResize, ConstantImageAndIdentity) {
  RgbImage flat{300, 200, std::vector<uint8_t>(300 * 200 * 3, 173)};
  for (auto [w, h] : {std::pair{48, 96}, std::pair{1000, 20}, std::pair{300, 77}}) {
    RgbImage out = ResizeBicubicAntialias(flat, w, h);
    ASSERT_EQ(out.pixels.size(), size_t(w) * h * 3);
    for (uint8_t v : out.pixels) ASSERT_EQ(v, 173);
  }
  RgbImage same = ResizeBicubicAntialias(flat, 300, 200);
  EXPECT_EQ(same.pixels, flat.pixels);
}

}  // namespace
}  // namespace gannet::vision
