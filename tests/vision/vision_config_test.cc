// vision_config parsing (HF's Gemma4VisionConfig defaults, typed errors), the image token ids,
// and binding the tower's weights: a vision-only checkpoint holds the tower and nothing else, a
// text-only load of a multimodal checkpoint is unchanged.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/common/file_util.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/variants.h"
#include "lib/model/weights.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/vision/vision_weights.h"
#include "tests/testing/tiny_models.h"

namespace gannet::vision {
namespace {

using model::ModelConfig;

// The tiny 31B config with its vision_config replaced by `vision` (a JSON value).
std::string WithVision(const std::string& vision) {
  auto text = ReadFileToString(testing::TinyModelDir("31b") + "/config.json", 1 << 20, "config");
  EXPECT_TRUE(text.ok());
  const std::string key = R"("vision_config":{"model_type":"gemma4_vision"})";
  std::string s = *text;
  const size_t at = s.find(key);
  EXPECT_NE(at, std::string::npos);
  return s.replace(at, key.size(), R"("vision_config":)" + vision);
}

absl::StatusOr<ModelConfig> Parse(const std::string& vision) {
  return model::ParseModelConfigText(WithVision(vision), "config.json");
}

TEST(VisionConfigTest, AbsentFieldsTakeHfDefaults) {
  auto m = Parse(R"({"model_type":"gemma4_vision"})");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->vision.has_value());
  const model::VisionConfig& v = *m->vision;
  // transformers' Gemma4VisionConfig() (the E2B/E4B tower).
  EXPECT_EQ(v.hidden_size, 768);
  EXPECT_EQ(v.intermediate_size, 3072);
  EXPECT_EQ(v.num_hidden_layers, 16);
  EXPECT_EQ(v.num_attention_heads, 12);
  EXPECT_EQ(v.num_key_value_heads, 12);
  EXPECT_EQ(v.head_dim, 64);
  EXPECT_EQ(v.hidden_activation, "gelu_pytorch_tanh");
  EXPECT_DOUBLE_EQ(v.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(v.rope_theta, 100.0);
  EXPECT_EQ(v.pooling_kernel_size, 3);
  EXPECT_EQ(v.patch_size, 16);
  EXPECT_EQ(v.patch_dim(), 768);
  EXPECT_EQ(v.position_embedding_size, 10240);
  EXPECT_FALSE(v.use_clipped_linears);
  EXPECT_FALSE(v.standardize);
}

TEST(VisionConfigTest, ReadsTheMultimodalTinyConfigs) {
  auto dense = model::LoadModelConfig(testing::TinyModelDir("mm-31b"));
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_TRUE(dense->vision.has_value());
  EXPECT_EQ(dense->vision->hidden_size, 32);
  EXPECT_EQ(dense->vision->num_hidden_layers, 2);
  EXPECT_EQ(dense->vision->head_dim, 16);
  EXPECT_EQ(dense->vision->position_embedding_size, 16);
  EXPECT_TRUE(dense->vision->standardize);
  EXPECT_FALSE(dense->vision->use_clipped_linears);
  EXPECT_EQ(dense->boi_token_id, 6);
  EXPECT_EQ(dense->image_token_id, 7);
  EXPECT_EQ(dense->eoi_token_id, 8);
  EXPECT_TRUE(model::CheckImageTokenIds(*dense).ok());
  auto eseries = model::LoadModelConfig(testing::TinyModelDir("mm-e4b"));
  ASSERT_TRUE(eseries.ok()) << eseries.status();
  EXPECT_TRUE(eseries->vision->use_clipped_linears);
  EXPECT_FALSE(eseries->vision->standardize);
  EXPECT_FALSE(eseries->has_audio_config);
  EXPECT_TRUE(eseries->text.has_ple());
}

// The tiny multimodal tokenizers spell the config's image ids as HF's processor writes them.
TEST(VisionConfigTest, TinyTokenizerHasTheImageTokens) {
  for (const char* variant : {"mm-31b", "mm-e4b"}) {
    const std::string dir = testing::TinyModelDir(variant);
    auto config = model::LoadModelConfig(dir);
    ASSERT_TRUE(config.ok()) << config.status();
    auto tok = tokenizer::Tokenizer::FromFile(dir + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_EQ((*tok)->TokenToId("<|image>"), config->boi_token_id);
    EXPECT_EQ((*tok)->TokenToId("<|image|>"), config->image_token_id);
    EXPECT_EQ((*tok)->TokenToId("<image|>"), config->eoi_token_id);
    EXPECT_TRUE((*tok)->IsSpecial(config->image_token_id));
    EXPECT_EQ((*tok)->Encode("<|image><|image|><|image|><image|>"),
              (std::vector<int32_t>{config->boi_token_id, config->image_token_id,
                                    config->image_token_id, config->eoi_token_id}));
  }
}

// dummy:<variant> configs carry the released towers' geometry.
TEST(VisionConfigTest, RealVariantsHaveTheReleasedTowers) {
  for (const char* v : {"31b", "26b-a4b", "e4b", "e2b"}) {
    auto json = model::VariantConfig(v, model::VariantSize::kReal);
    ASSERT_TRUE(json.ok()) << json.status();
    auto m = model::ParseModelConfig(*json, v);
    ASSERT_TRUE(m.ok()) << v << ": " << m.status();
    ASSERT_TRUE(m->vision.has_value()) << v;
    const bool e_series = m->text.has_ple();
    EXPECT_EQ(m->vision->hidden_size, e_series ? 768 : 1152) << v;
    EXPECT_EQ(m->vision->num_hidden_layers, e_series ? 16 : 27) << v;
    EXPECT_EQ(m->vision->head_dim, e_series ? 64 : 72) << v;
    EXPECT_EQ(m->vision->intermediate_size, e_series ? 3072 : 4304) << v;
    EXPECT_EQ(m->vision->use_clipped_linears, e_series) << v;
    EXPECT_EQ(m->vision->standardize, !e_series) << v;
  }
}

TEST(VisionConfigTest, RopeThetaFromEitherPlace) {
  auto nested = Parse(R"({"rope_parameters":{"rope_type":"axial","rope_theta":50.0}})");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_DOUBLE_EQ(nested->vision->rope_theta, 50.0);
  // HF reads rope_type "default" as the vision config's default type, axial.
  auto named_default = Parse(R"({"rope_parameters":{"rope_type":"default","rope_theta":60.0}})");
  ASSERT_TRUE(named_default.ok()) << named_default.status();
  EXPECT_DOUBLE_EQ(named_default->vision->rope_theta, 60.0);
  auto flat = Parse(R"({"rope_theta":25.0})");
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_DOUBLE_EQ(flat->vision->rope_theta, 25.0);
}

TEST(VisionConfigTest, ImageTokenIdsMustFitTheVocabulary) {
  // The tiny 31B keeps HF's default ids (255999, ...) with a 512-token vocabulary: text still
  // loads, but it cannot take images.
  auto m = model::LoadModelConfig(testing::TinyModelDir("31b"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(model::CheckImageTokenIds(*m).code(), absl::StatusCode::kInvalidArgument);
  m->boi_token_id = m->image_token_id = 7;
  m->eoi_token_id = 8;
  EXPECT_EQ(model::CheckImageTokenIds(*m).code(), absl::StatusCode::kInvalidArgument);
  m->vision.reset();
  EXPECT_EQ(model::CheckImageTokenIds(*m).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(VisionConfigTest, NullVisionConfigMeansNoTower) {
  auto m = Parse("null");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->has_vision_config);
  EXPECT_FALSE(m->vision.has_value());
}

TEST(VisionConfigTest, BadValuesAreTypedErrors) {
  const struct {
    const char* vision;
    absl::StatusCode code;
  } cases[] = {
      {R"(5)", absl::StatusCode::kInvalidArgument},
      {R"({"hidden_size":"wide"})", absl::StatusCode::kInvalidArgument},
      {R"({"hidden_size":0})", absl::StatusCode::kInvalidArgument},
      {R"({"num_hidden_layers":-1})", absl::StatusCode::kInvalidArgument},
      {R"({"num_hidden_layers":100000})", absl::StatusCode::kInvalidArgument},
      {R"({"head_dim":18})", absl::StatusCode::kInvalidArgument},
      {R"({"num_attention_heads":12,"num_key_value_heads":5})", absl::StatusCode::kInvalidArgument},
      {R"({"rms_norm_eps":0})", absl::StatusCode::kInvalidArgument},
      {R"({"rope_parameters":{"rope_theta":-1}})", absl::StatusCode::kInvalidArgument},
      {R"({"position_embedding_size":0})", absl::StatusCode::kInvalidArgument},
      {R"({"pooling_kernel_size":0})", absl::StatusCode::kInvalidArgument},
      {R"({"standardize":"yes"})", absl::StatusCode::kInvalidArgument},
      {R"({"rope_parameters":{"rope_type":"proportional"}})", absl::StatusCode::kUnimplemented},
      {R"({"hidden_activation":"relu"})", absl::StatusCode::kUnimplemented},
      {R"({"attention_bias":true})", absl::StatusCode::kUnimplemented},
      {R"({"model_type":"siglip_vision_model"})", absl::StatusCode::kUnimplemented},
  };
  for (const auto& c : cases) {
    auto m = Parse(c.vision);
    EXPECT_EQ(m.status().code(), c.code) << c.vision << ": " << m.status();
    if (!m.ok()) {
      EXPECT_NE(std::string(m.status().message()).find("vision_config"), std::string::npos)
          << m.status();
    }
  }
}

TEST(VisionWeightsTest, VisionOnlyCheckpointHoldsTheTowerAlone) {
  auto config = model::LoadModelConfig(testing::TinyModelDir("mm-e4b"));
  ASSERT_TRUE(config.ok()) << config.status();
  auto ckpt = model::Checkpoint::Open(testing::TinyModelDir("mm-e4b"), {.vision_only = true});
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_GT((*ckpt)->skipped_tensors(), 0);
  for (const std::string& name : (*ckpt)->Names()) {
    EXPECT_TRUE(model::Checkpoint::IsVisionTensor(name)) << name;
  }
  auto w = BindVisionWeights(*config, **ckpt);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->layers.size(), 2u);
  // The clip bounds the golden script wrote: about -2..-3 / 2..3 in, +-0.15..0.25 out.
  const ClipBounds& b = w->layers[1].down_proj.clip;
  EXPECT_LT(b.in_min, -1.9f);
  EXPECT_GT(b.in_max, 1.9f);
  EXPECT_GT(b.out_max, 0.14f);
  EXPECT_LT(b.out_max, 0.26f);
}

TEST(VisionWeightsTest, TextOnlyLoadOfAMultimodalCheckpointIsUnchanged) {
  for (const char* variant : {"mm-31b", "mm-e4b"}) {
    auto loaded = testing::LoadModelFolder(testing::TinyModelDir(variant));
    ASSERT_TRUE(loaded.ok()) << variant << ": " << loaded.status();
    EXPECT_GT((*loaded)->checkpoint->skipped_tensors(), 0) << variant;
    for (const std::string& name : (*loaded)->checkpoint->Names()) {
      EXPECT_FALSE(model::Checkpoint::IsTowerTensor(name)) << variant << ": " << name;
    }
    // The text model runs (the image tokens are plain ids to it).
    backend::CpuBackend cpu;
    const std::vector<int32_t> ids = {2, 6, 7, 7, 8, 10, 11};
    auto logits = testing::PrefillLogits(**loaded, &cpu, ids);
    ASSERT_TRUE(logits.ok()) << variant << ": " << logits.status();
    ASSERT_EQ(logits->size(), ids.size() * 512);
    for (float v : *logits) ASSERT_TRUE(std::isfinite(v)) << variant;
  }
}

TEST(VisionWeightsTest, MismatchesAreTypedErrors) {
  auto config = model::LoadModelConfig(testing::TinyModelDir("mm-31b"));
  ASSERT_TRUE(config.ok()) << config.status();
  auto ckpt = model::Checkpoint::Open(testing::TinyModelDir("mm-31b"), {.vision_only = true});
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ASSERT_TRUE(BindVisionWeights(*config, **ckpt).ok());

  ModelConfig clipped = *config;  // the dense checkpoint has no clip buffers
  clipped.vision->use_clipped_linears = true;
  EXPECT_EQ(BindVisionWeights(clipped, **ckpt).status().code(), absl::StatusCode::kNotFound);

  ModelConfig wider = *config;
  wider.vision->intermediate_size = 128;
  EXPECT_EQ(BindVisionWeights(wider, **ckpt).status().code(), absl::StatusCode::kInvalidArgument);

  ModelConfig fewer = *config;  // layer 1's tensors are then unexpected
  fewer.vision->num_hidden_layers = 1;
  EXPECT_EQ(BindVisionWeights(fewer, **ckpt).status().code(), absl::StatusCode::kInvalidArgument);

  ModelConfig plain = *config;  // std_bias / std_scale are then unexpected
  plain.vision->standardize = false;
  EXPECT_EQ(BindVisionWeights(plain, **ckpt).status().code(), absl::StatusCode::kInvalidArgument);

  ModelConfig none = *config;
  none.vision.reset();
  EXPECT_EQ(BindVisionWeights(none, **ckpt).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gannet::vision
