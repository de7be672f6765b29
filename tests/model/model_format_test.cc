// What a user may give instead of a bf16 Hugging Face checkpoint folder is named, with what to do
// (model_format.h): a GGUF file or folder, a single safetensors file, a quantized checkpoint
// (AWQ/GPTQ tensors), and a quantization_config the bf16 tensors contradict. Also the label of a
// checkpoint whose geometry is no released model's.
#include "lib/model/model_format.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "lib/model/synthetic.h"
#include "lib/model/variants.h"
#include "lib/model/weights.h"

namespace gannet::model {
namespace {

namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("gannet_model_format_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

bool Contains(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

TEST(ModelFormatTest, AGgufFileIsNamedAsLlamaCppsFormat) {
  const std::string dir = FreshDir("gguf_file");
  const std::string gguf = dir + "/gemma-4-e4b-it-Q4_K_M.gguf";
  WriteFile(gguf, std::string("GGUF\x03\0\0\0", 8));
  const absl::Status s = LoadModelConfig(gguf).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(Contains(s, "GGUF file, llama.cpp's format")) << s;
  EXPECT_TRUE(Contains(s, "config.json, *.safetensors")) << s;
  EXPECT_FALSE(Contains(s, "Not a directory")) << s;
  // Recognised by its magic too, whatever the file is called.
  const std::string renamed = dir + "/model.bin";
  WriteFile(renamed, std::string("GGUF\x03\0\0\0", 8));
  EXPECT_TRUE(Contains(LoadModelConfig(renamed).status(), "GGUF"))
      << LoadModelConfig(renamed).status();
}

TEST(ModelFormatTest, AFolderOfGgufFilesIsNamedToo) {
  const std::string dir = FreshDir("gguf_dir");
  WriteFile(dir + "/model-Q8_0.gguf", std::string("GGUF\x03\0\0\0", 8));
  const absl::Status s = LoadModelConfig(dir).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(Contains(s, "model-Q8_0.gguf")) << s;
  EXPECT_TRUE(Contains(s, "llama.cpp")) << s;
}

TEST(ModelFormatTest, ASafetensorsFileAsksForItsFolder) {
  const std::string dir = FreshDir("st_file");
  WriteFile(dir + "/model.safetensors", "x");
  const absl::Status s = LoadModelConfig(dir + "/model.safetensors").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(Contains(s, "give " + dir)) << s;
  WriteFile(dir + "/notes.txt", "x");
  const absl::Status other = LoadModelConfig(dir + "/notes.txt").status();
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument) << other;
  EXPECT_TRUE(Contains(other, "not a checkpoint folder")) << other;
}

Json TinyConfig(const std::string& quant_method) {
  auto json = VariantConfig("31b", VariantSize::kTiny);
  EXPECT_TRUE(json.ok()) << json.status();
  if (!quant_method.empty()) {
    Json q = Json::MakeObject();
    q.Set("quant_method", Json::String(quant_method));
    q.Set("bits", Json::Int(4));
    q.Set("group_size", Json::Int(128));
    json->Set("quantization_config", std::move(q));
  }
  return *json;
}

absl::Status Bind(const std::string& dir) {
  auto config = LoadModelConfig(dir);
  if (!config.ok()) return config.status();
  auto ckpt = Checkpoint::Open(dir);
  if (!ckpt.ok()) return ckpt.status();
  return BindWeights(*config, **ckpt).status();
}

TEST(ModelFormatTest, AnAwqCheckpointIsNamedNotAMissingTensor) {
  // AWQ tensors without the quantization_config that says how to read them: named as such.
  const std::string dir = FreshDir("awq");
  WriteFile(dir + "/config.json", TinyConfig("").Dump());
  const std::string p = "model.layers.0.self_attn.q_proj.";
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors",
                               {{p + "qweight", DType::kI32, {4, 4}, std::string(64, '\0')},
                                {p + "qzeros", DType::kI32, {1, 4}, std::string(16, '\0')},
                                {p + "scales", DType::kF16, {1, 32}, std::string(64, '\0')}})
                  .ok());
  const absl::Status s = Bind(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(Contains(s, "GPTQ or AWQ")) << s;
  EXPECT_TRUE(Contains(s, "with their quantization_config")) << s;
  EXPECT_FALSE(Contains(s, "missing tensor")) << s;
  // With it, the checkpoint is bound module by module (tests/model/gptq_test.cc).
}

TEST(ModelFormatTest, Fp8WeightsAreNamed) {
  const std::string dir = FreshDir("fp8");
  WriteFile(dir + "/config.json", TinyConfig("").Dump());
  ASSERT_TRUE(
      WriteSafetensors(
          dir + "/model.safetensors",
          {{"model.layers.0.mlp.down_proj.weight", DType::kF8E4M3, {4, 4}, std::string(16, '\0')}})
          .ok());
  const absl::Status s = Bind(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(Contains(s, "F8_E4M3")) << s;
}

TEST(ModelFormatTest, ModelOptNvfp4WithoutItsConfigIsNamed) {
  const std::string dir = FreshDir("modelopt");
  WriteFile(dir + "/config.json", TinyConfig("").Dump());
  const std::string p = "model.layers.0.mlp.down_proj.";
  const float one = 1.0f;
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors",
                               {{p + "weight", DType::kU8, {4, 8}, std::string(32, '\0')},
                                {p + "weight_scale", DType::kF8E4M3, {4, 1}, std::string(4, '\0')},
                                {p + "weight_scale_2",
                                 DType::kF32,
                                 {},
                                 std::string(reinterpret_cast<const char*>(&one), 4)}})
                  .ok());
  const absl::Status s = Bind(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(Contains(s, "ModelOpt NVFP4")) << s;
  EXPECT_TRUE(Contains(s, "hf_quant_config.json")) << s;
}

TEST(ModelFormatTest, AQuantizationConfigOnBf16WeightsIsAMismatch) {
  const std::string dir = FreshDir("mismatch");
  ASSERT_TRUE(WriteSyntheticCheckpoint(TinyConfig("gptq"), dir, SyntheticOptions()).ok());
  const absl::Status s = Bind(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(Contains(s, "quant_method 'gptq'")) << s;
  EXPECT_TRUE(Contains(s, "plain BF16")) << s;
  EXPECT_TRUE(Contains(s, "remove quantization_config")) << s;
  // The same checkpoint without it loads.
  const std::string plain = FreshDir("plain");
  ASSERT_TRUE(WriteSyntheticCheckpoint(TinyConfig(""), plain, SyntheticOptions()).ok());
  EXPECT_TRUE(Bind(plain).ok()) << Bind(plain);
}

TEST(ModelFormatTest, CustomGeometriesAreNotLabelledAsAReleasedModel) {
  auto tiny = ParseModelConfig(TinyConfig(""), "tiny");
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  const std::string label = ModelLabel(*tiny);
  EXPECT_EQ(label.find("31b"), std::string::npos) << label;
  EXPECT_EQ(label.rfind("gemma4 custom (8 layers, hidden 48, ", 0), 0u) << label;
  EXPECT_NE(label.find("; dense)"), std::string::npos) << label;
  for (const char* v : {"31b", "26b-a4b", "e4b", "e2b"}) {
    auto real = DummyModelConfig(std::string("dummy:") + v);
    ASSERT_TRUE(real.ok()) << real.status();
    EXPECT_EQ(ModelLabel(*real), VariantName(real->variant)) << v;
  }
}

}  // namespace
}  // namespace gannet::model
