#include "tests/vision/image_golden.h"

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "gtest/gtest.h"
#include "lib/vision/image_decode.h"

namespace gannet::vision::testing {

std::string ImagesDir() {
  const char* dir = std::getenv("GANNET_TEST_DATA");
  return std::string(dir != nullptr ? dir : "tests/data") + "/images";
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

const Json& Golden() {
  static const Json* golden = [] {
    std::vector<uint8_t> bytes = ReadBytes(ImagesDir() + "/image_golden.json");
    auto parsed =
        Json::Parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                    int64_t{1} << 22);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return new Json(parsed.ok() ? *std::move(parsed) : Json());
  }();
  return *golden;
}

RgbImage DecodeFileOrDie(const std::string& path) {
  std::vector<uint8_t> bytes = ReadBytes(path);
  auto image = DecodeImage(bytes);
  EXPECT_TRUE(image.ok()) << path << ": " << image.status();
  return image.ok() ? *std::move(image) : RgbImage{};
}

int MaxAbsDiff(const RgbImage& a, const RgbImage& b) {
  if (a.width != b.width || a.height != b.height || a.pixels.size() != b.pixels.size()) return -1;
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    worst = std::max(worst, std::abs(int{a.pixels[i]} - int{b.pixels[i]}));
  }
  return worst;
}

}  // namespace gannet::vision::testing
