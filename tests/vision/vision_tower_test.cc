// The vision tower on the CPU backend against HF transformers' dumps of the tiny multimodal
// checkpoints (tools/golden/make_multimodal_tiny.py): the patch embedding, every encoder layer's
// output, the pooled, standardized and projected features, for two images of 6x9 and 12x3 patches
// padded to 630 (70 soft tokens), encoded as one batch. Error = max |ours - HF| / max |HF| per
// tensor, bound 1e-3.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/safetensors.h"
#include "lib/vision/vision_tower.h"
#include "lib/vision/vision_weights.h"
#include "tests/testing/tiny_models.h"

namespace gannet::vision {
namespace {

constexpr int kMaxPatches = 630;  // 70 soft tokens x 3^2
constexpr int kPatchDim = 768;
constexpr double kTolerance = 1e-3;

// One image in the hand-off layout, padded to kMaxPatches.
struct HostImage {
  std::vector<float> pixels;
  std::vector<int32_t> positions;
  int real = 0;
  ImagePatches view() const { return {pixels, positions}; }
};

std::vector<float> ReadF32(const model::SafetensorsFile& f, const std::string& name) {
  const model::TensorInfo* t = f.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::vector<float> out(static_cast<size_t>(t->numel()));
  ElementsToF32(f.Data(*t), t->dtype, t->numel(), out.data());
  return out;
}

// The two images of mm-vision-input.safetensors: u8 / 255 pixels, row-major (x, y) positions.
std::vector<HostImage> LoadImages() {
  auto f =
      model::SafetensorsFile::Open(testing::TestDataDir() + "/golden/mm-vision-input.safetensors");
  EXPECT_TRUE(f.ok()) << f.status();
  const model::TensorInfo* px = (*f)->Find("pixels_u8");
  const model::TensorInfo* grid = (*f)->Find("grid");
  EXPECT_TRUE(px != nullptr && grid != nullptr);
  const uint8_t* u8 = (*f)->Data(*px);
  std::vector<int32_t> g(4);
  std::memcpy(g.data(), (*f)->Data(*grid), sizeof(int32_t) * 4);
  std::vector<HostImage> images;
  int64_t row = 0;
  for (int i = 0; i < 2; ++i) {
    const int rows = g[2 * i], cols = g[2 * i + 1];
    HostImage im;
    im.real = rows * cols;
    im.pixels.assign(static_cast<size_t>(kMaxPatches) * kPatchDim, 0.0f);
    im.positions.assign(static_cast<size_t>(kMaxPatches) * 2, -1);
    for (int p = 0; p < im.real; ++p, ++row) {
      for (int e = 0; e < kPatchDim; ++e) {
        im.pixels[p * kPatchDim + e] = static_cast<float>(u8[row * kPatchDim + e]) / 255.0f;
      }
      im.positions[2 * p] = p % cols;
      im.positions[2 * p + 1] = p / cols;
    }
    images.push_back(std::move(im));
  }
  return images;
}

double RelError(const float* ours, const std::vector<float>& ref) {
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(ours[i]) - ref[i]));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

class VisionTowerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string dir = testing::TinyModelDir(GetParam());
    auto config = model::LoadModelConfig(dir);
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
    auto ckpt = model::Checkpoint::Open(dir, {.vision_only = true});
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    checkpoint_ = *std::move(ckpt);
    auto weights = BindVisionWeights(config_, *checkpoint_);
    ASSERT_TRUE(weights.ok()) << weights.status();
    backend_ = std::make_unique<backend::CpuBackend>();
    auto tower = VisionTower::Create(backend_.get(), config_, *weights);
    ASSERT_TRUE(tower.ok()) << tower.status();
    tower_ = *std::move(tower);
    images_ = LoadImages();
  }

  model::ModelConfig config_;
  std::unique_ptr<model::Checkpoint> checkpoint_;
  std::unique_ptr<backend::CpuBackend> backend_;
  std::unique_ptr<VisionTower> tower_;
  std::vector<HostImage> images_;
};

TEST_P(VisionTowerTest, MatchesHfLayerByLayer) {
  auto golden = model::SafetensorsFile::Open(testing::TestDataDir() + "/golden/" + GetParam() +
                                             "-vision.safetensors");
  ASSERT_TRUE(golden.ok()) << golden.status();
  const ImagePatches views[] = {images_[0].view(), images_[1].view()};
  VisionTrace trace;
  auto out = tower_->Encode(views, &trace);
  ASSERT_TRUE(out.ok()) << out.status();
  const int64_t h = config_.vision->hidden_size, ht = config_.text.hidden_size;
  ASSERT_EQ(out->tokens_per_image, (std::vector<int>{6, 4}));
  ASSERT_EQ(out->soft_tokens.size(), static_cast<size_t>(10 * ht));

  double worst = 0;
  auto check = [&](const std::string& name, const float* ours, size_t n) {
    std::vector<float> ref = ReadF32(**golden, name);
    ASSERT_EQ(ref.size(), n) << name;
    const double err = RelError(ours, ref);
    worst = std::max(worst, err);
    std::printf("%s %-22s max|diff|/max|ref| = %.2e\n", GetParam().c_str(), name.c_str(), err);
    EXPECT_LT(err, kTolerance) << name;
  };
  int64_t row = 0, soft = 0;
  for (int i = 0; i < 2; ++i) {
    const std::string img = "img" + std::to_string(i) + ".";
    const int64_t n = images_[i].real, m = out->tokens_per_image[i];
    check(img + "embed", trace.embed.data() + row * h, n * h);
    for (size_t l = 0; l < trace.layers.size(); ++l) {
      check(img + "layer" + std::to_string(l), trace.layers[l].data() + row * h, n * h);
    }
    check(img + "pooled", trace.pooled.data() + soft * h, m * h);
    check(img + "standardized", trace.standardized.data() + soft * h, m * h);
    check(img + "projected", out->soft_tokens.data() + soft * ht, m * ht);
    row += n;
    soft += m;
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
}

// Segments keep images apart: each image alone gives the rows it gives in the batch.
TEST_P(VisionTowerTest, BatchEqualsImagesOneByOne) {
  const ImagePatches both[] = {images_[0].view(), images_[1].view()};
  auto batch = tower_->Encode(both);
  ASSERT_TRUE(batch.ok()) << batch.status();
  std::vector<float> alone;
  for (const HostImage& im : images_) {
    const ImagePatches one[] = {im.view()};
    auto out = tower_->Encode(one);
    ASSERT_TRUE(out.ok()) << out.status();
    alone.insert(alone.end(), out->soft_tokens.begin(), out->soft_tokens.end());
  }
  ASSERT_EQ(alone.size(), batch->soft_tokens.size());
  EXPECT_LT(RelError(alone.data(), batch->soft_tokens), 1e-6);
}

// Padding rows never reach the output: other padding contents or a different max_patches give
// the same soft tokens.
TEST_P(VisionTowerTest, PaddingDoesNotLeak) {
  const ImagePatches one[] = {images_[1].view()};
  auto base = tower_->Encode(one);
  ASSERT_TRUE(base.ok()) << base.status();
  HostImage noisy = images_[1];
  for (size_t e = static_cast<size_t>(noisy.real) * kPatchDim; e < noisy.pixels.size(); ++e) {
    noisy.pixels[e] = 0.7f;
  }
  noisy.pixels.resize(static_cast<size_t>(noisy.real + 9) * kPatchDim);
  noisy.positions.resize(static_cast<size_t>(noisy.real + 9) * 2);
  const ImagePatches shorter[] = {noisy.view()};
  auto out = tower_->Encode(shorter);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->soft_tokens.size(), base->soft_tokens.size());
  EXPECT_LT(RelError(out->soft_tokens.data(), base->soft_tokens), 1e-6);
}

TEST_P(VisionTowerTest, MalformedImagesAreRejected) {
  auto expect_invalid = [&](const HostImage& im, const char* what) {
    const ImagePatches v[] = {im.view()};
    auto out = tower_->Encode(v);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << what;
  };
  EXPECT_EQ(tower_->Encode({}).status().code(), absl::StatusCode::kInvalidArgument);
  HostImage im = images_[0];
  im.positions[2 * 3] = 16;  // the position table has 16 rows
  expect_invalid(im, "x past the position table");
  im = images_[0];
  im.positions[2 * 3 + 1] = -1;  // only y is padding
  expect_invalid(im, "half a padding position");
  im = images_[0];
  im.pixels.pop_back();
  expect_invalid(im, "pixel count");
  im = images_[0];
  im.pixels[5] = NAN;
  expect_invalid(im, "NaN pixel");
  im = images_[0];
  std::fill(im.positions.begin(), im.positions.end(), -1);
  expect_invalid(im, "all padding");
  im = images_[0];
  im.pixels.resize(static_cast<size_t>(629) * kPatchDim);
  im.positions.resize(629 * 2);
  expect_invalid(im, "max_patches not a multiple of 9");
  im = images_[0];  // 9 patches allow one soft token; this image needs six cells
  im.pixels.resize(static_cast<size_t>(9) * kPatchDim);
  im.positions.resize(9 * 2);
  im.positions[2 * 8] = 6;
  im.positions[2 * 8 + 1] = 3;
  expect_invalid(im, "a cell past max_patches / 9");
}

INSTANTIATE_TEST_SUITE_P(Tiny, VisionTowerTest, ::testing::Values("mm-31b", "mm-e4b"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace gannet::vision
