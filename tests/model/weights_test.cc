// Binding checkpoints to typed weights: every variant's tiny checkpoint binds; a missing, extra,
// mis-shaped or wrongly typed tensor is an error naming the tensor.
#include "lib/model/weights.h"

#include <set>
#include <string>

#include "fmt/format.h"
#include <cmath>

#include "gtest/gtest.h"
#include "lib/common/file_util.h"
#include "lib/model/quantized_weights.h"
#include "lib/model/safetensors.h"
#include "lib/model/synthetic.h"
#include "lib/model/variants.h"
#include "lib/quant/int4.h"
#include "tests/testing/tiny_models.h"

namespace gannet::model {
namespace {

TEST(WeightsTest, EveryTinyCheckpointBinds) {
  for (const std::string& v : KnownVariantNames()) {
    const std::string dir = gannet::testing::TinyModelDir(v);
    auto config = LoadModelConfig(dir);
    ASSERT_TRUE(config.ok()) << v << ": " << config.status();
    auto ckpt = Checkpoint::Open(dir);
    ASSERT_TRUE(ckpt.ok()) << v << ": " << ckpt.status();
    auto w = BindWeights(*config, **ckpt);
    ASSERT_TRUE(w.ok()) << v << ": " << w.status();
    EXPECT_EQ(w->layers.size(), static_cast<size_t>(config->text.num_hidden_layers));
    const TextConfig& c = config->text;
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      const LayerWeights& lw = w->layers[l];
      EXPECT_EQ(lw.k_proj.present(), !c.IsKvShared(l)) << v << " layer " << l;
      EXPECT_EQ(lw.v_proj.present(), !c.IsKvShared(l) && !c.LayerKEqV(l)) << v << " layer " << l;
      EXPECT_EQ(lw.per_layer_input_gate.present(), c.has_ple());
      EXPECT_EQ(lw.experts_gate_up.present(), c.enable_moe_block);
      EXPECT_EQ(lw.gate_proj.dim(0), c.LayerIntermediateSize(l));
    }
    if (config->kind == ModelKind::kAssistant) {
      EXPECT_TRUE(w->pre_projection.present());
      EXPECT_EQ(w->centroids.present(), config->use_ordered_embeddings);
    }
  }
}

TEST(WeightsTest, TowersAreSkippedAndCounted) {
  auto ckpt = Checkpoint::Open(gannet::testing::TinyModelDir("e4b"));
  ASSERT_TRUE(ckpt.ok());
  EXPECT_GT((*ckpt)->skipped_tensors(), 0);
  EXPECT_GT((*ckpt)->skipped_bytes(), 0u);
  for (const std::string& n : (*ckpt)->Names()) EXPECT_FALSE(Checkpoint::IsTowerTensor(n)) << n;
}

TEST(WeightsTest, RealSizeParameterCounts) {
  // docs/gemma4-model.md §1.3: 31B ~30.7 B, 26B-A4B ~25.2 B, E4B-assistant ~78.5 M.
  auto count = [](const char* v) {
    auto c = ParseModelConfig(*VariantConfig(v, VariantSize::kReal), v);
    EXPECT_TRUE(c.ok()) << c.status();
    return static_cast<double>(CountParameters(*c));
  };
  EXPECT_NEAR(count("31b") / 1e9, 30.7, 0.3);
  EXPECT_NEAR(count("26b-a4b") / 1e9, 25.2, 0.3);
  EXPECT_NEAR(count("e4b-assistant") / 1e6, 78.5, 1.0);
}

// "dummy:<variant>" names a variant's real geometry; anything else is an error naming the input.
// What a decode step must read: everything for dense 31B; for 26B-A4B the dense parts and 8 of
// 128 experts per layer at batch 1, tending to all experts with the batch; for E4B everything but
// the per-layer-input table, of which one row per token.
TEST(WeightsTest, DecodeStepWeightBytes) {
  auto full_bytes = [](const ModelConfig& c) { return 2.0 * CountParameters(c); };
  auto dense = DummyModelConfig("dummy:31b");
  ASSERT_TRUE(dense.ok());
  EXPECT_DOUBLE_EQ(DecodeStepWeightBytes(*dense, 1), full_bytes(*dense));
  EXPECT_DOUBLE_EQ(DecodeStepWeightBytes(*dense, 64), full_bytes(*dense));

  auto moe = DummyModelConfig("dummy:26b-a4b");
  ASSERT_TRUE(moe.ok());
  const TextConfig& t = moe->text;
  const double expert_bytes = 2.0 * t.num_hidden_layers * t.num_experts * 3.0 *
                              static_cast<double>(t.moe_intermediate_size) * t.hidden_size;
  const double rest = full_bytes(*moe) - expert_bytes;
  EXPECT_NEAR(DecodeStepWeightBytes(*moe, 1), rest + expert_bytes * 8 / 128, 1.0);
  const double p16 = 1 - std::pow(1 - 8.0 / 128, 16);
  EXPECT_NEAR(DecodeStepWeightBytes(*moe, 16), rest + expert_bytes * p16, 1.0);
  EXPECT_LT(DecodeStepWeightBytes(*moe, 1), DecodeStepWeightBytes(*moe, 2));
  EXPECT_NEAR(DecodeStepWeightBytes(*moe, 4096), full_bytes(*moe), 1.0);

  auto ple = DummyModelConfig("dummy:e4b");
  ASSERT_TRUE(ple.ok());
  const TextConfig& e = ple->text;
  const double table = 2.0 * static_cast<double>(e.vocab_size_per_layer_input) *
                       e.num_hidden_layers * e.hidden_size_per_layer_input;
  const double row = table / static_cast<double>(e.vocab_size_per_layer_input);
  EXPECT_NEAR(DecodeStepWeightBytes(*ple, 1), full_bytes(*ple) - table + row, 1.0);
  EXPECT_NEAR(DecodeStepWeightBytes(*ple, 3), full_bytes(*ple) - table + 3 * row, 1.0);
}

// Quantization at load (weight_dtype): the linear matrices become int4 views (not the embedding,
// LM head, router or experts), a step's bytes count them at half a byte plus a bf16 scale per 32
// elements, and a synthetic view's canonical bytes are its bf16 values quantized as
// `gannet quantize` does; an already quantized view is refused.
TEST(WeightsTest, QuantizeAtLoad) {
  auto c = DummyModelConfig("dummy:31b");
  ASSERT_TRUE(c.ok());
  ModelWeights w = SyntheticWeights(*c, 3);
  const WeightFormat g32 = WeightFormat::Int4(32, DType::kBF16);
  ASSERT_TRUE(QuantizeAtLoad(&w, g32).ok());
  const LayerWeights& l = w.layers[0];
  for (const WeightView* v :
       {&l.q_proj, &l.k_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
    EXPECT_TRUE(v->quantize_at_load()) << v->name;
    EXPECT_EQ(v->format, g32) << v->name;
  }
  EXPECT_FALSE(w.embed_tokens.quantized());
  EXPECT_FALSE(l.input_layernorm.quantized());
  double linear = 0;
  for (const LayerWeights& x : w.layers) {
    for (const WeightView* v :
         {&x.q_proj, &x.k_proj, &x.v_proj, &x.o_proj, &x.gate_proj, &x.up_proj, &x.down_proj}) {
      if (v->present()) linear += static_cast<double>(v->numel());
    }
  }
  // Each int4 element saves 2 - (0.5 + 2 / 32) bytes against bf16.
  EXPECT_NEAR(DecodeStepWeightBytes(*c, w, 1), DecodeStepWeightBytes(*c, 1) - linear * 1.4375, 1e3);
  EXPECT_FALSE(QuantizeAtLoad(&w, WeightFormat::Fp8Channel()).ok());

  // The canonical bytes of a small synthetic int4 view.
  WeightView v{"m.weight", DType::kBF16, {3, 64}, nullptr};
  v.synthetic = true;
  v.seed = 9;
  v.format = g32;
  std::vector<uint16_t> bf16(3 * 64);
  FillSyntheticBf16(v.name, v.init, 64, v.seed, 0, 3 * 64, bf16.data());
  std::vector<float> f32(bf16.size());
  for (size_t i = 0; i < bf16.size(); ++i) f32[i] = Bf16ToFloat(bf16[i]);
  std::vector<uint8_t> want_packed(3 * 32), want_scales(3 * 2 * 2), packed(3 * 32), scales(12);
  quant::QuantizeInt4Rows(g32, f32.data(), 3, 64, want_packed.data(), want_scales.data(), nullptr);
  ASSERT_TRUE(WriteCanonicalInt4(v, packed.data(), scales.data(), nullptr).ok());
  EXPECT_EQ(packed, want_packed);
  EXPECT_EQ(scales, want_scales);
}

TEST(WeightsTest, DummyModelConfigs) {
  EXPECT_TRUE(IsDummyModel("dummy:31b"));
  EXPECT_FALSE(IsDummyModel("31b"));
  EXPECT_FALSE(IsDummyModel("/models/dummy:31b"));
  auto c = DummyModelConfig("dummy:31b");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->text.num_hidden_layers, 60);
  EXPECT_EQ(c->text.vocab_size, 262144);
  auto unknown = DummyModelConfig("dummy:nope");
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("nope"), std::string::npos) << unknown.status();
  auto plain = DummyModelConfig("31b");
  EXPECT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("'31b'"), std::string::npos) << plain.status();
}

class BrokenCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gannet_w_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    config_json_ = *VariantConfig("e2b", VariantSize::kTiny);
    config_ = *ParseModelConfig(config_json_, "e2b");
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Writes the expected tensors, letting `edit` change the list first.
  std::string BindError(const std::function<void(std::vector<TensorToWrite>*)>& edit) {
    std::vector<TensorToWrite> tensors;
    for (const WeightSpec& s : ExpectedWeights(config_)) {
      int64_t n = 1;
      for (int64_t d : s.shape) n *= d;
      tensors.push_back({s.name, DType::kBF16, s.shape, std::string(n * 2, '\0')});
    }
    edit(&tensors);
    EXPECT_TRUE(WriteSafetensors(dir_ + "/model.safetensors", tensors).ok());
    auto ckpt = Checkpoint::Open(dir_);
    EXPECT_TRUE(ckpt.ok()) << ckpt.status();
    if (!ckpt.ok()) return "";
    auto w = BindWeights(config_, **ckpt);
    EXPECT_FALSE(w.ok());
    return w.ok() ? "" : std::string(w.status().message());
  }

  std::string dir_;
  Json config_json_;
  ModelConfig config_;
};

TEST_F(BrokenCheckpointTest, MissingTensor) {
  std::string msg = BindError([](auto* t) { t->erase(t->begin() + 5); });
  EXPECT_NE(msg.find("missing tensor 'model.layers.0."), std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, ExtraTensor) {
  std::string msg = BindError([](auto* t) {
    t->push_back({"model.layers.0.self_attn.bias", DType::kBF16, {4}, std::string(8, '\0')});
  });
  EXPECT_NE(msg.find("unexpected tensor 'model.layers.0.self_attn.bias'"), std::string::npos)
      << msg;
}

TEST_F(BrokenCheckpointTest, MisShapedTensor) {
  std::string msg = BindError([](auto* t) {
    for (auto& x : *t) {
      if (x.name == "model.layers.2.mlp.down_proj.weight") {
        x.shape = {x.shape[1], x.shape[0]};
      }
    }
  });
  EXPECT_NE(msg.find("'model.layers.2.mlp.down_proj.weight' has shape [96, 24]"), std::string::npos)
      << msg;
}

TEST_F(BrokenCheckpointTest, UnsupportedDtype) {
  std::string msg = BindError([](auto* t) {
    (*t)[0].dtype = DType::kF8E4M3;
    (*t)[0].bytes.resize((*t)[0].bytes.size() / 2);
  });
  EXPECT_NE(msg.find("dtype F8_E4M3"), std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, SharedLayerKvTensorsAreIgnored) {
  // HF drops k/v projections of KV-shared layers on load; a checkpoint carrying them still binds.
  std::vector<TensorToWrite> tensors;
  for (const WeightSpec& s : ExpectedWeights(config_)) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    tensors.push_back({s.name, DType::kBF16, s.shape, std::string(n * 2, '\0')});
  }
  const int shared = config_.text.FirstKvSharedLayer();
  tensors.push_back({fmt::format("model.layers.{}.self_attn.k_proj.weight", shared),
                     DType::kBF16,
                     {256, 24},
                     std::string(256 * 24 * 2, '\0')});
  ASSERT_TRUE(WriteSafetensors(dir_ + "/model.safetensors", tensors).ok());
  auto ckpt = Checkpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_TRUE(BindWeights(config_, **ckpt).ok());
}

TEST(SyntheticTest, TinyCheckpointsRegenerateBitForBit) {
  // The committed checkpoints are exactly what the generator writes today.
  char tmpl[] = "/tmp/gannet_syn_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  for (const char* v : {"e2b", "26b-a4b-assistant"}) {
    Json config = *VariantConfig(v, VariantSize::kTiny);
    SyntheticOptions o;  // as gannet-make-tiny writes them
    o.tower_tensors = config.Find("vision_config") != nullptr;
    ASSERT_TRUE(WriteSyntheticCheckpoint(config, dir, o).ok());
    auto fresh = ReadFileToString(dir + "/model.safetensors", int64_t{1} << 30, "test data");
    auto committed = ReadFileToString(gannet::testing::TinyModelDir(v) + "/model.safetensors",
                                      int64_t{1} << 30, "test data");
    ASSERT_TRUE(fresh.ok() && committed.ok());
    EXPECT_TRUE(*fresh == *committed) << v;
  }
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace gannet::model
