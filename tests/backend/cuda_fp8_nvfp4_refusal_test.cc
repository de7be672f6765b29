// Until FP8 and NVFP4 kernels land, the CUDA backend refuses those weights when they are loaded,
// with UNIMPLEMENTED naming the tensor and its format: never a silent misread of FP8 or packed
// FP4 bytes as bf16. Runs on the GPU machine (LABELS gpu:
// `ctest --test-dir build/dev -R cuda_fp8_nvfp4_refusal_test`).
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/quantize_checkpoint.h"
#include "lib/model/weights.h"
#include "tests/backend/cuda_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

TEST(CudaQuantRefusal, LoadWeightRefusesFp8AndNvfp4ByName) {
  if (!testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  auto be = backend::CudaBackend::Create(0);
  ASSERT_TRUE(be.ok()) << be.status();
  // (spec, what the error names: WeightFormatName's spelling)
  const std::pair<const char*, const char*> cases[] = {
      {"fp8-channel", "fp8 channel (bf16 scales), A8 token"},
      {"fp8-block", "fp8 128x128 (bf16 scales), A8 g128"},
      {"nvfp4", "nvfp4 g16 (fp8 scales, global)"}};
  for (const auto& [spec, name] : cases) {
    const std::string dir =
        std::filesystem::path(::testing::TempDir()) / (std::string("gannet_cuda_") + spec);
    std::filesystem::remove_all(dir);
    auto options = model::ParseWeightDtype(spec);
    ASSERT_TRUE(options.ok()) << options.status();
    ASSERT_TRUE(model::QuantizeCheckpoint(testing::TinyModelDir("trained"), dir, *options).ok());
    auto config = model::LoadModelConfig(dir);
    ASSERT_TRUE(config.ok()) << config.status();
    auto ckpt = model::Checkpoint::Open(dir);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    auto w = model::BindWeights(*config, **ckpt);
    ASSERT_TRUE(w.ok()) << w.status();
    const model::WeightView& down = w->layers[0].down_proj;
    ASSERT_TRUE(down.quantized()) << spec;
    const model::WeightView* parts[] = {&down};
    auto t = (*be)->LoadWeight(parts);
    ASSERT_FALSE(t.ok()) << spec;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << t.status();
    EXPECT_NE(std::string(t.status().message()).find(down.name), std::string::npos) << t.status();
    EXPECT_NE(std::string(t.status().message()).find(name), std::string::npos) << t.status();
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace gannet
