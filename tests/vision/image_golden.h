// Test helpers: the committed reference dumps of tests/data/images (image_golden.json, written
// by tools/golden/image_preprocess_golden.py from HF transformers' Gemma-4 processor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/common/json.h"
#include "lib/vision/image.h"

namespace gannet::vision::testing {

std::string ImagesDir();  // $GANNET_TEST_DATA/images
std::vector<uint8_t> ReadBytes(const std::string& path);
const Json& Golden();  // image_golden.json, parsed once
RgbImage DecodeFileOrDie(const std::string& path);

// Largest |a - b| over two equal-sized images; -1 when the sizes differ.
int MaxAbsDiff(const RgbImage& a, const RgbImage& b);

}  // namespace gannet::vision::testing
