// Until the int4 kernels land, the CUDA backend refuses int4 (compressed-tensors W4A16) weights
// when they are loaded, with UNIMPLEMENTED naming the tensor and format: never a silent misread
// of packed bytes as bf16. Runs on the GPU machine (LABELS gpu; tools/gpu/int4_oracle.sh's
// companion: `ctest --test-dir build/dev -R cuda_int4_refusal_test`).
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

TEST(CudaInt4, LoadWeightRefusesQuantizedWeightsByName) {
  if (!testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = std::filesystem::path(::testing::TempDir()) / "gannet_cuda_int4";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(
      model::QuantizeCheckpoint(testing::TinyModelDir("trained"), dir, model::QuantizeOptions{})
          .ok());
  auto config = model::LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  auto ckpt = model::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto w = model::BindWeights(*config, **ckpt);
  ASSERT_TRUE(w.ok()) << w.status();
  auto be = backend::CudaBackend::Create(0);
  ASSERT_TRUE(be.ok()) << be.status();
  const model::WeightView& down = w->layers[0].down_proj;
  ASSERT_TRUE(down.quantized());
  const model::WeightView* parts[] = {&down};
  auto t = (*be)->LoadWeight(parts);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << t.status();
  EXPECT_NE(std::string(t.status().message()).find(down.name), std::string::npos) << t.status();
  EXPECT_NE(std::string(t.status().message()).find("int4 g32"), std::string::npos) << t.status();
  // A plain weight of the same checkpoint still loads.
  const model::WeightView* plain[] = {&w->embed_tokens};
  EXPECT_TRUE((*be)->LoadWeight(plain).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gannet
