// Decoding against PIL (via HF's convert_to_rgb) and every malformed-input error kind.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/vision/image_decode.h"
#include "lib/vision/image_error.h"
#include "tests/vision/image_golden.h"

namespace gannet::vision {
namespace {

using testing::DecodeFileOrDie;
using testing::Golden;
using testing::ImagesDir;
using testing::MaxAbsDiff;
using testing::ReadBytes;

std::optional<ImageErrorKind> KindOf(std::span<const uint8_t> bytes,
                                     const DecodeLimits& limits = {}) {
  auto image = DecodeImage(bytes, limits);
  EXPECT_FALSE(image.ok());
  return image.ok() ? std::nullopt : GetImageErrorKind(image.status());
}

// Every input but the two largest has PIL's RGB conversion stored whole; the decode must equal
// it exactly (those two are covered by their resize goldens).
TEST(ImageDecode, MatchesPilConversion) {
  int checked = 0;
  for (const Json& c : Golden().Find("cases")->AsArray()) {
    const std::string name = c.Find("case")->AsString();
    if (name == "photo_640x480" || name == "shrink_900x700" || c.Find("tokens")->AsInt() != 70) {
      continue;
    }
    SCOPED_TRACE(name);
    RgbImage ours = DecodeFileOrDie(ImagesDir() + "/" + c.Find("file")->AsString());
    RgbImage pil = DecodeFileOrDie(ImagesDir() + "/golden/decoded_" + name + ".png");
    EXPECT_EQ(ours.width, c.Find("width")->AsInt());
    EXPECT_EQ(ours.height, c.Find("height")->AsInt());
    EXPECT_EQ(MaxAbsDiff(ours, pil), 0);
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

// More JPEG and PNG kinds (progressive, 4:2:2, 4:4:4, 1-bit, tRNS colour and grey value,
// Adam7-interlaced), decode only: exactly the processor's RGB.
TEST(ImageDecode, MoreKindsMatchHf) {
  int checked = 0;
  for (const Json& f : Golden().Find("decode_only")->AsArray()) {
    const std::string file = f.AsString();
    SCOPED_TRACE(file);
    RgbImage ours = DecodeFileOrDie(ImagesDir() + "/" + file);
    RgbImage hf =
        DecodeFileOrDie(ImagesDir() + "/golden/decoded_" + file.substr(0, file.find('.')) + ".png");
    EXPECT_EQ(MaxAbsDiff(ours, hf), 0);
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

// A progressive JPEG whose last scan is repeated past the scan limit (1000): refused as
// corrupt, where libjpeg alone would run every scan over the whole image.
TEST(ImageDecode, JpegScanLimit) {
  std::vector<uint8_t> jpeg = ReadBytes(ImagesDir() + "/progressive_44x36.jpg");
  ASSERT_TRUE(DecodeImage(jpeg).ok());
  ASSERT_GE(jpeg.size(), 4u);
  size_t last_sos = 0;
  for (size_t i = 0; i + 1 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xda) last_sos = i;
  }
  ASSERT_GT(last_sos, 0u);
  const size_t eoi = jpeg.size() - 2;
  ASSERT_EQ(jpeg[eoi], 0xff);
  ASSERT_EQ(jpeg[eoi + 1], 0xd9);
  const std::vector<uint8_t> scan(jpeg.begin() + last_sos, jpeg.begin() + eoi);
  std::vector<uint8_t> many(jpeg.begin(), jpeg.begin() + eoi);
  for (int i = 0; i < 1000; ++i) many.insert(many.end(), scan.begin(), scan.end());
  many.insert(many.end(), {0xff, 0xd9});
  EXPECT_EQ(KindOf(many), ImageErrorKind::kCorrupt);
}

TEST(ImageDecode, CmykJpegIsUnsupported) {
  auto image = DecodeImage(ReadBytes(ImagesDir() + "/cmyk_16x16.jpg"));
  EXPECT_EQ(GetImageErrorKind(image.status()), ImageErrorKind::kUnsupported);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(ImageDecode, SniffsFormats) {
  EXPECT_EQ(*SniffImageFormat(ReadBytes(ImagesDir() + "/rgb_37x91.png")), ImageFormat::kPng);
  EXPECT_EQ(*SniffImageFormat(ReadBytes(ImagesDir() + "/grey_45x60.jpg")), ImageFormat::kJpeg);
  EXPECT_EQ(*SniffImageFormat(ReadBytes(ImagesDir() + "/lossy_120x80.webp")), ImageFormat::kWebp);
}

TEST(ImageDecode, EmptyAndUnknown) {
  EXPECT_EQ(KindOf({}), ImageErrorKind::kEmpty);
  std::vector<uint8_t> random(4096);
  std::mt19937 rng(59);
  for (uint8_t& b : random) b = static_cast<uint8_t>(rng());
  random[0] = 0x42;  // not 0x89 / 0xff / 'R'
  EXPECT_EQ(KindOf(random), ImageErrorKind::kUnknownFormat);
  const std::string text = "GIF89a this is not a supported image";
  EXPECT_EQ(KindOf({reinterpret_cast<const uint8_t*>(text.data()), text.size()}),
            ImageErrorKind::kUnknownFormat);
  auto status = DecodeImage(random).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

// A signature followed by garbage: the codec's own error, as kCorrupt.
TEST(ImageDecode, GarbageAfterSignature) {
  std::mt19937 rng(7);
  for (std::vector<uint8_t> head :
       {std::vector<uint8_t>{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'},
        std::vector<uint8_t>{0xff, 0xd8, 0xff},
        std::vector<uint8_t>{'R', 'I', 'F', 'F', 0, 1, 0, 0, 'W', 'E', 'B', 'P'}}) {
    std::vector<uint8_t> bytes = head;
    for (int i = 0; i < 2000; ++i) bytes.push_back(static_cast<uint8_t>(rng()));
    auto kind = KindOf(bytes);
    EXPECT_TRUE(kind == ImageErrorKind::kCorrupt || kind == ImageErrorKind::kTruncated)
        << (kind ? ImageErrorKindName(*kind) : "none");
  }
}

// Every prefix of a valid file is refused, as truncated (the header or the pixel data ends
// early) -- never decoded with invented pixels, never a crash.
TEST(ImageDecode, TruncatedFilesAreTruncated) {
  for (const char* file : {"rgb_37x91.png", "palette_50x30.png", "photo_640x480.jpg",
                           "grey_45x60.jpg", "lossy_120x80.webp", "alpha_40x30.webp"}) {
    SCOPED_TRACE(file);
    const std::vector<uint8_t> bytes = ReadBytes(ImagesDir() + "/" + file);
    ASSERT_TRUE(DecodeImage(bytes).ok());
    // PNG needs its IEND-less tail: a cut after the last IDAT still decodes (PIL too), so cuts
    // stop short of the final 16 bytes (IEND and the last CRC).
    for (size_t cut :
         {size_t{12}, size_t{40}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 17}) {
      SCOPED_TRACE(cut);
      auto kind = KindOf(std::span(bytes).first(cut));
      EXPECT_EQ(kind, ImageErrorKind::kTruncated) << (kind ? ImageErrorKindName(*kind) : "none");
    }
  }
}

uint32_t Crc32(const uint8_t* p, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}

void PutBe32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

// A PNG chunk with a valid CRC.
void AppendChunk(std::vector<uint8_t>& png, const char* type, const std::vector<uint8_t>& data) {
  PutBe32(png, static_cast<uint32_t>(data.size()));
  std::vector<uint8_t> body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  png.insert(png.end(), body.begin(), body.end());
  PutBe32(png, Crc32(body.data(), body.size()));
}

std::vector<uint8_t> PngWithHeader(uint32_t width, uint32_t height) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  PutBe32(ihdr, width);
  PutBe32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, no interlace
  AppendChunk(png, "IHDR", ihdr);
  AppendChunk(png, "IDAT", {0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01});
  AppendChunk(png, "IEND", {});
  return png;
}

TEST(ImageDecode, HugeDimensionsRefusedBeforeAllocating) {
  // 50000 x 50000 RGB would be 7.5 GB: refused from the header alone.
  EXPECT_EQ(KindOf(PngWithHeader(50000, 50000)), ImageErrorKind::kTooLarge);
  EXPECT_EQ(KindOf(PngWithHeader(1u << 14, (1u << 12) + 1)), ImageErrorKind::kTooLarge);
  // JPEG: patch the SOF0 frame size of a real file to 60000 x 60000.
  std::vector<uint8_t> jpeg = ReadBytes(ImagesDir() + "/grey_45x60.jpg");
  bool patched = false;
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && (jpeg[i + 1] == 0xc0 || jpeg[i + 1] == 0xc2)) {
      jpeg[i + 5] = 0xea, jpeg[i + 6] = 0x60, jpeg[i + 7] = 0xea, jpeg[i + 8] = 0x60;
      patched = true;
      break;
    }
  }
  ASSERT_TRUE(patched);
  EXPECT_EQ(KindOf(jpeg), ImageErrorKind::kTooLarge);
  // WebP (its header allows at most 16384 x 16384) through a tighter limit.
  DecodeLimits small;
  small.max_pixels = 1000;
  EXPECT_EQ(KindOf(ReadBytes(ImagesDir() + "/lossy_120x80.webp"), small),
            ImageErrorKind::kTooLarge);
  EXPECT_EQ(KindOf(ReadBytes(ImagesDir() + "/rgb_37x91.png"), small), ImageErrorKind::kTooLarge);
}

TEST(ImageDecode, ByteLimit) {
  DecodeLimits limits;
  limits.max_bytes = 100;
  EXPECT_EQ(KindOf(ReadBytes(ImagesDir() + "/grey_45x60.jpg"), limits), ImageErrorKind::kTooLarge);
}

// A zero width or height is invalid in every format's header: the codec refuses it as corrupt.
TEST(ImageDecode, ZeroSizedHeaders) {
  EXPECT_EQ(KindOf(PngWithHeader(0, 0)), ImageErrorKind::kCorrupt);
  EXPECT_EQ(KindOf(PngWithHeader(0, 10)), ImageErrorKind::kCorrupt);
  std::vector<uint8_t> jpeg = ReadBytes(ImagesDir() + "/grey_45x60.jpg");
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) {
      jpeg[i + 7] = 0, jpeg[i + 8] = 0;  // width 0
      break;
    }
  }
  EXPECT_EQ(KindOf(jpeg), ImageErrorKind::kCorrupt);
}

TEST(ImageDecode, CorruptPngCrc) {
  std::vector<uint8_t> png = ReadBytes(ImagesDir() + "/rgb_37x91.png");
  png[20] ^= 0x01;  // inside IHDR: its CRC no longer matches
  EXPECT_EQ(KindOf(png), ImageErrorKind::kCorrupt);
}

TEST(ImageDecode, RawBuffers) {
  std::vector<uint8_t> rgb(5 * 4 * 3, 7);
  auto image = RgbImageFromRaw(5, 4, rgb);
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->pixels, rgb);
  EXPECT_EQ(GetImageErrorKind(RgbImageFromRaw(0, 0, {}).status()), ImageErrorKind::kEmpty);
  EXPECT_EQ(GetImageErrorKind(RgbImageFromRaw(5, 4, std::span(rgb).first(59)).status()),
            ImageErrorKind::kTruncated);
  rgb.push_back(0);
  EXPECT_EQ(GetImageErrorKind(RgbImageFromRaw(5, 4, rgb).status()), ImageErrorKind::kCorrupt);
  EXPECT_EQ(GetImageErrorKind(RgbImageFromRaw(1 << 14, 1 << 14, rgb).status()),
            ImageErrorKind::kTooLarge);
  EXPECT_EQ(GetImageErrorKind(RgbImageFromRaw(-3, 4, rgb).status()), ImageErrorKind::kEmpty);
}

TEST(ImageError, PayloadSurvivesAnnotate) {
  absl::Status s = ImageError(ImageErrorKind::kTruncated, "cut at {}", 10);
  EXPECT_EQ(GetImageErrorKind(Annotate(s, "request 3")), ImageErrorKind::kTruncated);
  EXPECT_EQ(GetImageErrorKind(absl::InvalidArgumentError("x")), std::nullopt);
  EXPECT_EQ(ImageError(ImageErrorKind::kUnsupported, "cmyk").code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace gannet::vision
