// compressed-tensors int4 (pack-quantized) checkpoints: the strict quantization_config reader,
// the packing conversions, and the binder's checks of each quantized module's tensors. Every
// error is a typed status whose message names the field or tensor that is wrong.
#include "lib/model/quantized_weights.h"

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/common/file_util.h"
#include "lib/common/json.h"
#include "lib/common/status.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/quantize_checkpoint.h"
#include "lib/model/safetensors.h"
#include "lib/model/weights.h"
#include "lib/quant/compressed_tensors.h"
#include "lib/quant/fp8.h"
#include "lib/quant/int4.h"
#include "lib/quant/modelopt.h"
#include "lib/quant/nvfp4.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

namespace fs = std::filesystem;

constexpr char kGoodConfig[] = R"({
  "quant_method": "compressed-tensors", "format": "pack-quantized",
  "quantization_status": "compressed", "global_compression_ratio": null, "version": "0.20.1",
  "kv_cache_scheme": null, "sparsity_config": {}, "transform_config": null,
  "ignore": ["lm_head", "re:.*vision.*"],
  "config_groups": {"group_0": {"targets": ["Linear"], "format": "pack-quantized",
    "input_activations": null, "output_activations": null,
    "weights": {"num_bits": 4, "type": "int", "symmetric": true, "group_size": 32,
                "strategy": "group", "block_structure": null, "dynamic": false,
                "actorder": null, "scale_dtype": null, "zp_dtype": null,
                "observer": "minmax", "observer_kwargs": {}}}}})";

Json Parse(std::string_view text) {
  auto j = Json::Parse(text);
  EXPECT_TRUE(j.ok()) << j.status();
  return j.ok() ? *j : Json();
}

// kGoodConfig with `edit` applied to its tree.
absl::StatusOr<quant::CtConfig> ParseEdited(const std::function<void(Json&)>& edit) {
  Json q = Parse(kGoodConfig);
  edit(q);
  return quant::ParseCompressedTensorsConfig(q, "cfg");
}

// Replaces quantization_config.config_groups.group_0.weights.<key> with `value` (null: erase by
// setting null).
std::function<void(Json&)> SetWeightField(const std::string& key, Json value) {
  return [key, value](Json& q) {
    Json groups = *q.Find("config_groups");
    Json g0 = *groups.Find("group_0");
    Json w = *g0.Find("weights");
    w.Set(key, value);
    g0.Set("weights", std::move(w));
    groups.Set("group_0", std::move(g0));
    q.Set("config_groups", std::move(groups));
  };
}

std::function<void(Json&)> SetGroupField(const std::string& key, Json value) {
  return [key, value](Json& q) {
    Json groups = *q.Find("config_groups");
    Json g0 = *groups.Find("group_0");
    g0.Set(key, value);
    groups.Set("group_0", std::move(g0));
    q.Set("config_groups", std::move(groups));
  };
}

void ExpectError(const absl::StatusOr<quant::CtConfig>& r, absl::StatusCode code,
                 const std::string& names) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_NE(std::string(r.status().message()).find(names), std::string::npos) << r.status();
}

TEST(CompressedTensorsConfig, ParsesGoogleStyleW4A16) {
  auto r = ParseEdited([](Json&) {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->schemes.size(), 1u);
  EXPECT_EQ(r->schemes[0].group_size, 32);
  EXPECT_TRUE(r->schemes[0].symmetric);
  EXPECT_EQ(r->schemes[0].Format(256, DType::kBF16), WeightFormat::Int4(32, DType::kBF16));
  // Targets by class, ignore by exact name and by regex (matched at the start, like re.match).
  EXPECT_NE(quant::CtSchemeFor(*r, "model.layers.0.mlp.up_proj", "Linear"), nullptr);
  EXPECT_EQ(quant::CtSchemeFor(*r, "lm_head", "Linear"), nullptr);
  EXPECT_EQ(quant::CtSchemeFor(*r, "model.vision_tower.x.q_proj", "Linear"), nullptr);
  EXPECT_EQ(quant::CtSchemeFor(*r, "model.embed_tokens", "Embedding"), nullptr);
  EXPECT_TRUE(quant::CtNameMatches("model.layers.1.mlp", "re:model\\.layers\\.[0-9]+"));
  EXPECT_FALSE(quant::CtNameMatches("x.model.layers.1", "re:model"));
}

TEST(CompressedTensorsConfig, AsymmetricAndPerChannel) {
  auto r = ParseEdited([](Json& q) {
    SetWeightField("symmetric", Json::Bool(false))(q);
    SetWeightField("strategy", Json::String("channel"))(q);
    SetWeightField("group_size", Json())(q);
  });
  ASSERT_TRUE(r.ok()) << r.status();
  const WeightFormat f = r->schemes[0].Format(96, DType::kF16);
  EXPECT_EQ(f.elem, DType::kU4);
  EXPECT_TRUE(f.zero_point);
  EXPECT_EQ(f.group_size, 96);
  EXPECT_EQ(WeightFormatError(f), nullptr);
}

TEST(CompressedTensorsConfig, AnAbsentStrategyFollowsTheGroupSize) {
  // As compressed-tensors infers it: group_size > 0 group, -1 channel, none tensor.
  auto g = ParseEdited([](Json& q) {
    SetWeightField("strategy", Json())(q);
    SetWeightField("group_size", Json::Int(128))(q);
  });
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->schemes[0].group_size, 128);
  auto c = ParseEdited([](Json& q) {
    SetWeightField("strategy", Json())(q);
    SetWeightField("group_size", Json::Int(-1))(q);
  });
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->schemes[0].per_channel);
  ExpectError(ParseEdited([](Json& q) {
                SetWeightField("strategy", Json())(q);
                SetWeightField("group_size", Json())(q);
              }),
              absl::StatusCode::kUnimplemented, "weights.strategy: 'tensor'");
}

TEST(CompressedTensorsConfig, EveryMeaningfulFieldIsChecked) {
  using C = absl::StatusCode;
  // A group's format must be the checkpoint's (unless that is mixed-precision).
  ExpectError(ParseEdited([](Json& q) { q.Set("format", Json::String("float-quantized")); }),
              C::kInvalidArgument, "quantization_config.format is 'float-quantized'");
  ExpectError(ParseEdited([](Json& q) { q.Set("format", Json::String("marlin-24")); }),
              C::kUnimplemented, "quantization_config.format");
  ExpectError(ParseEdited([](Json& q) { q.Set("quant_method", Json::String("gptq")); }),
              C::kUnimplemented, "quant_method");
  ExpectError(ParseEdited([](Json& q) { q.Set("quantization_status", Json::String("frozen")); }),
              C::kInvalidArgument, "quantization_status");
  ExpectError(ParseEdited([](Json& q) { q.Set("new_field", Json::Int(1)); }), C::kUnimplemented,
              "quantization_config.new_field: unknown field");
  ExpectError(ParseEdited([](Json& q) {
                q.Set("kv_cache_scheme", Json::MakeObject().Set("x", Json::Int(1)));
              }),
              C::kUnimplemented, "kv_cache_scheme");
  ExpectError(ParseEdited([](Json& q) { q.Set("config_groups", Json::MakeObject()); }),
              C::kInvalidArgument, "config_groups");
  ExpectError(
      ParseEdited([](Json& q) { q.Set("ignore", Json::MakeArray({Json::String("re:([")})); }),
      C::kInvalidArgument, "quantization_config.ignore");
  ExpectError(ParseEdited([](Json& q) {
                q.Set("ignore", Json::MakeArray({Json::String("re:" + std::string(100, '(') + "a" +
                                                              std::string(100, ')'))}));
              }),
              C::kInvalidArgument, "nested 100 deep");
  ExpectError(ParseEdited(SetWeightField("num_bits", Json::Int(8))), C::kUnimplemented,
              "config_groups.group_0.weights.num_bits");
  // 4-bit float weights are NVFP4, which needs strategy tensor_group with groups of 16.
  ExpectError(ParseEdited(SetWeightField("type", Json::String("float"))), C::kUnimplemented,
              "weights.strategy: 'group' is not supported for FP4");
  ExpectError(ParseEdited(SetWeightField("type", Json::String("mxint"))), C::kUnimplemented,
              "weights.type");
  ExpectError(ParseEdited(SetWeightField("group_size", Json::Int(16))), C::kUnimplemented,
              "weights.group_size: 16");
  ExpectError(ParseEdited(SetWeightField("strategy", Json::String("tensor"))), C::kUnimplemented,
              "weights.strategy");
  ExpectError(ParseEdited(SetWeightField("strategy", Json::String("rows"))), C::kInvalidArgument,
              "weights.strategy");
  ExpectError(ParseEdited(SetWeightField("actorder", Json::String("group"))), C::kUnimplemented,
              "weights.actorder");
  ExpectError(ParseEdited(SetWeightField("dynamic", Json::Bool(true))), C::kUnimplemented,
              "weights.dynamic");
  ExpectError(ParseEdited(SetWeightField("block_structure", Json::MakeArray({Json::Int(128)}))),
              C::kUnimplemented, "weights.block_structure");
  ExpectError(ParseEdited(SetWeightField("scale_dtype", Json::String("torch.float8_e4m3fn"))),
              C::kUnimplemented, "weights.scale_dtype");
  ExpectError(ParseEdited(SetWeightField("zero_bits", Json::Int(1))), C::kUnimplemented,
              "weights.zero_bits: unknown field");
  ExpectError(ParseEdited(SetGroupField("input_activations", Parse(R"({"num_bits": 8})"))),
              C::kUnimplemented, "group_0.input_activations");
  ExpectError(ParseEdited(SetGroupField("targets", Json::MakeArray())), C::kInvalidArgument,
              "group_0.targets");
  ExpectError(ParseEdited(SetGroupField("format", Json::String("nvfp4-pack-quantized"))),
              C::kInvalidArgument, "group_0.format");
  ExpectError(ParseEdited(SetGroupField("format", Json::String("mxfp4-pack-quantized"))),
              C::kUnimplemented, "group_0.format");
}

// llm-compressor's FP8_DYNAMIC preset as compressed-tensors serializes it.
constexpr char kFp8DynamicConfig[] = R"({
  "quant_method": "compressed-tensors", "format": "float-quantized",
  "quantization_status": "compressed", "global_compression_ratio": null, "version": "0.20.1",
  "kv_cache_scheme": null, "sparsity_config": {}, "transform_config": null,
  "ignore": ["lm_head"],
  "config_groups": {"group_0": {"targets": ["Linear"], "format": "float-quantized",
    "output_activations": null,
    "input_activations": {"num_bits": 8, "type": "float", "symmetric": true, "group_size": null,
                          "strategy": "token", "dynamic": true},
    "weights": {"num_bits": 8, "type": "float", "symmetric": true, "group_size": null,
                "strategy": "channel", "dynamic": false}}}})";

absl::StatusOr<quant::CtConfig> ParseFp8(const std::function<void(Json&)>& edit) {
  Json q = Parse(kFp8DynamicConfig);
  edit(q);
  return quant::ParseCompressedTensorsConfig(q, "cfg");
}

std::function<void(Json&)> SetInputField(const std::string& key, Json value) {
  return [key, value](Json& q) {
    Json groups = *q.Find("config_groups");
    Json g0 = *groups.Find("group_0");
    Json a = *g0.Find("input_activations");
    a.Set(key, value);
    g0.Set("input_activations", std::move(a));
    groups.Set("group_0", std::move(g0));
    q.Set("config_groups", std::move(groups));
  };
}

TEST(CompressedTensorsConfig, ParsesFp8Schemes) {
  // FP8_DYNAMIC: per-channel weights, activations dynamic per token.
  auto d = ParseFp8([](Json&) {});
  ASSERT_TRUE(d.ok()) << d.status();
  WeightFormat want = WeightFormat::Fp8Channel();
  want.scale = DType::kBF16;
  want.act = ActivationQuant::kDynamicFp8;
  EXPECT_EQ(d->schemes[0].Format(256, DType::kBF16), want);
  EXPECT_EQ(WeightFormatError(want), nullptr);
  // FP8_BLOCK: 128x128 weight blocks, activations dynamic per 128 inputs of a token.
  auto b = ParseFp8([](Json& q) {
    SetWeightField("strategy", Json::String("block"))(q);
    SetWeightField("block_structure", Json::MakeArray({Json::Int(128), Json::Int(128)}))(q);
    SetInputField("strategy", Json::String("group"))(q);
    SetInputField("group_size", Json::Int(128))(q);
  });
  ASSERT_TRUE(b.ok()) << b.status();
  const WeightFormat bf = b->schemes[0].Format(300, DType::kF32);
  EXPECT_EQ(bf.granularity, ScaleGranularity::kBlock);
  EXPECT_EQ(bf.block_rows, 128);
  EXPECT_EQ(bf.group_size, 128);
  EXPECT_EQ(bf.act_group, 128);
  EXPECT_EQ(WeightFormatError(bf), nullptr);
  // Per-tensor weights with a static input scale (the FP8 preset).
  auto t = ParseFp8([](Json& q) {
    SetWeightField("strategy", Json::String("tensor"))(q);
    SetInputField("strategy", Json::String("tensor"))(q);
    SetInputField("dynamic", Json::Bool(false))(q);
  });
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->schemes[0].per_tensor);
  EXPECT_EQ(t->schemes[0].act, ActivationQuant::kStaticFp8);
  // Weight-only (naive-quantized, as compressed-tensors names FP8 without activations).
  auto w = ParseFp8([](Json& q) {
    SetGroupField("input_activations", Json())(q);
    SetGroupField("format", Json::String("naive-quantized"))(q);
    q.Set("format", Json::String("naive-quantized"));
  });
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->schemes[0].act, ActivationQuant::kNone);
  // The writer's config reads back as the same scheme.
  for (const WeightFormat& f : {want, bf}) {
    auto back = quant::ParseCompressedTensorsConfig(
        quant::CtConfigJson(f, false, {"Linear"}, {"lm_head"}), "written");
    ASSERT_TRUE(back.ok()) << back.status();
    WeightFormat g = back->schemes[0].Format(300, f.scale);
    EXPECT_EQ(g, f) << WeightFormatName(g) << " vs " << WeightFormatName(f);
  }
}

TEST(CompressedTensorsConfig, Fp8FieldsAreChecked) {
  using C = absl::StatusCode;
  ExpectError(
      ParseFp8([](Json& q) {
        SetWeightField("strategy", Json::String("block"))(q);
        SetWeightField("block_structure", Json::MakeArray({Json::Int(64), Json::Int(64)}))(q);
      }),
      C::kUnimplemented, "weights.block_structure: [64, 64] is not supported");
  ExpectError(ParseFp8(SetWeightField("strategy", Json::String("block"))), C::kInvalidArgument,
              "weights.block_structure: missing");
  ExpectError(ParseFp8(SetWeightField("strategy", Json::String("rows"))), C::kInvalidArgument,
              "weights.strategy: unknown strategy 'rows'");
  ExpectError(ParseFp8(SetWeightField("strategy", Json::String("group"))), C::kUnimplemented,
              "weights.strategy: 'group' is not supported for FP8");
  ExpectError(ParseFp8(SetWeightField("symmetric", Json::Bool(false))), C::kUnimplemented,
              "weights.symmetric");
  ExpectError(ParseFp8(SetWeightField("dynamic", Json::Bool(true))), C::kUnimplemented,
              "weights.dynamic");
  ExpectError(ParseFp8(SetInputField("strategy", Json::String("tensor"))), C::kUnimplemented,
              "dynamic per-tensor activation scales");
  ExpectError(ParseFp8(SetInputField("num_bits", Json::Int(4))), C::kUnimplemented,
              "group_0.input_activations: 4-bit");
  ExpectError(ParseFp8(SetInputField("strategy", Json::String("channel"))), C::kUnimplemented,
              "activation strategy 'channel'");
  ExpectError(ParseFp8(SetGroupField("output_activations", Parse(R"({"num_bits": 8})"))),
              C::kUnimplemented, "group_0.output_activations");
  ExpectError(ParseFp8([](Json& q) {
                q.Set("format", Json::String("pack-quantized"));
                SetGroupField("format", Json::String("pack-quantized"))(q);
              }),
              C::kUnimplemented, "FP8 weights in format 'pack-quantized'");
}

TEST(Fp8, QuantizeMatchesCompressedTensorsRounding) {
  // Per channel: scale = amax / 448 in the scale type; elements RNE in E4M3 of w / scale.
  std::vector<float> w = {1.0f, -0.5f, 0.25f, 3.0f, 0.f, 0.f, 0.f, 0.f};
  WeightFormat f = WeightFormat::Fp8Channel();
  f.scale = DType::kF32;
  uint8_t q[8];
  float scales[2];
  quant::QuantizeFp8Rows(f, DType::kF32, w.data(), 2, 4, q, scales);
  EXPECT_FLOAT_EQ(scales[0], 3.0f / 448.0f);
  EXPECT_EQ(q[3], 0x7E);                                        // amax maps to 448
  EXPECT_EQ(scales[1], std::numeric_limits<float>::epsilon());  // all-zero row: torch's eps
  EXPECT_EQ(q[4], 0);
  float out[4];
  quant::DequantizeFp8Row(quant::Fp8InMemoryFormat(f), q, scales, 4, out);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], w[i], std::fabs(w[i]) / 16 + 1e-6) << i;
  // Activations: dynamic per token takes the row's amax; static ones the given scale.
  const float x[3] = {2.0f, -1.0f, 0.3f};
  float xq[3];
  quant::FakeQuantizeFp8Activations(ActivationQuant::kDynamicFp8, 0, 0.f, x, 3, xq);
  EXPECT_FLOAT_EQ(xq[0], 2.0f);
  EXPECT_FLOAT_EQ(xq[1], -1.0f);
  const float s = 2.0f / 448.0f;
  EXPECT_FLOAT_EQ(xq[2], Fp8E4M3ToFloat(FloatToFp8E4M3(0.3f / s)) * s);
  quant::FakeQuantizeFp8Activations(ActivationQuant::kStaticFp8, 0, 0.001f, x, 3, xq);
  EXPECT_FLOAT_EQ(xq[0], 0.448f);  // clamped at 448 * scale
  // Per-token groups: each group of 2 has its own scale.
  quant::FakeQuantizeFp8Activations(ActivationQuant::kDynamicFp8, 2, 0.f, x, 3, xq);
  EXPECT_FLOAT_EQ(xq[2], 0.3f * 0 + Fp8E4M3ToFloat(FloatToFp8E4M3(448.0f)) * (0.3f / 448.0f));
}

// llm-compressor's NVFP4 preset (W4A4) as compressed-tensors serializes it.
constexpr char kNvfp4Config[] = R"({
  "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
  "quantization_status": "compressed", "global_compression_ratio": null, "version": "0.20.1",
  "kv_cache_scheme": null, "sparsity_config": {}, "transform_config": null,
  "ignore": ["lm_head"],
  "config_groups": {"group_0": {"targets": ["Linear"], "format": "nvfp4-pack-quantized",
    "output_activations": null,
    "input_activations": {"num_bits": 4, "type": "float", "symmetric": true, "group_size": 16,
                          "strategy": "tensor_group", "dynamic": "local",
                          "observer": "static_minmax", "scale_dtype": "torch.float8_e4m3fn"},
    "weights": {"num_bits": 4, "type": "float", "symmetric": true, "group_size": 16,
                "strategy": "tensor_group", "dynamic": false,
                "scale_dtype": "torch.float8_e4m3fn"}}}})";

absl::StatusOr<quant::CtConfig> ParseNvfp4(const std::function<void(Json&)>& edit) {
  Json q = Parse(kNvfp4Config);
  edit(q);
  return quant::ParseCompressedTensorsConfig(q, "cfg");
}

TEST(CompressedTensorsConfig, ParsesNvfp4) {
  auto a = ParseNvfp4([](Json&) {});
  ASSERT_TRUE(a.ok()) << a.status();
  WeightFormat want = WeightFormat::Nvfp4();
  want.act = ActivationQuant::kDynamicNvfp4;
  want.act_group = 16;
  EXPECT_EQ(a->schemes[0].Format(64, DType::kF8E4M3), want) << WeightFormatName(want);
  EXPECT_EQ(WeightFormatError(want), nullptr);
  auto w = ParseNvfp4(SetGroupField("input_activations", Json()));  // NVFP4A16
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->schemes[0].Format(64, DType::kF8E4M3), WeightFormat::Nvfp4());
  auto back = quant::ParseCompressedTensorsConfig(
      quant::CtConfigJson(WeightFormat::Nvfp4(), false, {"Linear"}, {}), "written");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->schemes[0].Format(64, DType::kF8E4M3), WeightFormat::Nvfp4());
  using C = absl::StatusCode;
  ExpectError(ParseNvfp4(SetWeightField("group_size", Json::Int(32))), C::kUnimplemented,
              "weights.group_size: 32");
  ExpectError(ParseNvfp4(SetWeightField("strategy", Json::String("group"))), C::kUnimplemented,
              "weights.strategy: 'group'");
  ExpectError(ParseNvfp4(SetInputField("dynamic", Json::Bool(true))), C::kUnimplemented,
              "input_activations.dynamic");
  ExpectError(ParseNvfp4(SetWeightField("scale_dtype", Json::String("torch.uint8"))),
              C::kUnimplemented, "weights.scale_dtype");
  ExpectError(ParseNvfp4(SetInputField("num_bits", Json::Int(8))), C::kUnimplemented,
              "only FP4 activations");
  ExpectError(ParseNvfp4([](Json& q) {
                q.Set("format", Json::String("pack-quantized"));
                SetGroupField("format", Json::String("pack-quantized"))(q);
              }),
              C::kUnimplemented, "NVFP4 weights in format 'pack-quantized'");
}

TEST(ModeloptConfig, ParsesNvfp4AndMixedPrecision) {
  // hf_quant_config.json as ModelOpt exports it.
  auto a = quant::ParseModeloptConfig(Parse(R"({"producer": {"name": "modelopt", "version": "0.29"},
      "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": null, "group_size": 16,
                       "exclude_modules": ["lm_head", "*router*"]}})"),
                                      "hf_quant_config.json");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->schemes.size(), 1u);
  EXPECT_TRUE(a->schemes[0].modelopt);
  WeightFormat want = WeightFormat::Nvfp4();
  want.act = ActivationQuant::kDynamicNvfp4;  // ModelOpt's NVFP4 is W4A4
  want.act_group = 16;
  EXPECT_EQ(a->schemes[0].Format(64, DType::kF8E4M3), want);
  EXPECT_NE(quant::CtSchemeFor(*a, "model.layers.0.mlp.down_proj", "Linear"), nullptr);
  EXPECT_EQ(quant::CtSchemeFor(*a, "lm_head", "Linear"), nullptr);
  EXPECT_EQ(quant::CtSchemeFor(*a, "model.layers.3.router.proj", "Linear"), nullptr);
  // config.json's flat form.
  auto b = quant::ParseModeloptConfig(
      Parse(R"({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
               "ignore": ["lm_head"]})"),
      "config.json");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(quant::CtSchemeFor(*b, "lm_head", "Linear"), nullptr);
  // MIXED_PRECISION: only the layers it names, by exact name.
  auto m = quant::ParseModeloptConfig(
      Parse(R"({"quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": null,
               "quantized_layers": {"model.layers.0.mlp.down_proj": {"quant_algo": "NVFP4",
                                                                      "group_size": 16}}}})"),
      "hf");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_NE(quant::CtSchemeFor(*m, "model.layers.0.mlp.down_proj", "Linear"), nullptr);
  EXPECT_EQ(quant::CtSchemeFor(*m, "model.layers.0.mlp.up_proj", "Linear"), nullptr);
}

TEST(ModeloptConfig, EveryFieldIsChecked) {
  auto err = [](const char* text, absl::StatusCode code, const std::string& names) {
    ExpectError(quant::ParseModeloptConfig(Parse(text), "hf"), code, names);
  };
  using C = absl::StatusCode;
  err(R"({"quantization": {"quant_algo": "FP8"}})", C::kUnimplemented, "quant_algo: 'FP8'");
  err(R"({"quantization": {"quant_algo": "NVFP4", "group_size": 32}})", C::kUnimplemented,
      "group_size: 32");
  err(R"({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}})",
      C::kUnimplemented, "kv_cache_quant_algo");
  err(R"({"quantization": {"quant_algo": "NVFP4", "awq_block_size": 64}})", C::kUnimplemented,
      "awq_block_size: unknown field");
  err(R"({"quantization": {"quant_algo": "MIXED_PRECISION",
          "quantized_layers": {"model.layers.0.mlp.up_proj": {"quant_algo": "FP8"}}}})",
      C::kUnimplemented, "quantized_layers.model.layers.0.mlp.up_proj.quant_algo: 'FP8'");
  err(R"({"quantization": {"quant_algo": "MIXED_PRECISION"}})", C::kInvalidArgument,
      "quantized_layers: missing");
  err(R"({"quant_method": "gptq"})", C::kInvalidArgument, "quant_method");
  err(R"({"quantization": {"quant_algo": "NVFP4", "exclude_modules": ["*a*a*a*a*a*a*a*a*a*"]}})",
      C::kInvalidArgument, "with 10 wildcards");
}

TEST(Nvfp4, E2M1RoundsToNearestEvenAndDequantizes) {
  // Ties go to the even magnitude: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2,
  // 3.5 -> 4, 5 -> 4; past 5 -> 6, and saturation at 6.
  const float in[] = {0.25f, 0.26f, 0.75f, 1.25f, 1.3f, 1.75f, 2.5f, 2.6f, 3.5f, 5.0f, 5.1f, 9.0f};
  const float out[] = {0.f, 0.5f, 1.f, 1.f, 1.5f, 2.f, 2.f, 3.f, 4.f, 4.f, 6.f, 6.f};
  for (size_t i = 0; i < std::size(in); ++i) {
    EXPECT_EQ(quant::Fp4E2M1ToFloat(quant::FloatToFp4E2M1(in[i])), out[i]) << in[i];
    EXPECT_EQ(quant::Fp4E2M1ToFloat(quant::FloatToFp4E2M1(-in[i])), -out[i]) << in[i];
  }
  // Quantize then dequantize a row: within half a step of its group's scale.
  std::vector<float> w(32);
  for (int i = 0; i < 32; ++i) w[i] = std::sin(0.7f * i) * (i < 16 ? 0.01f : 2.0f);
  uint8_t packed[16], scales[2];
  const float global = quant::QuantizeNvfp4Rows(DType::kF32, w.data(), 1, 32, packed, scales);
  float amax = 0.f;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  EXPECT_FLOAT_EQ(global, 448.0f * 6.0f / amax);  // the largest group scale is FP8's largest
  EXPECT_EQ(scales[1], 0x7E);
  float back[32];
  quant::DequantizeNvfp4Row(packed, scales, global, 32, back);
  for (int i = 0; i < 32; ++i) {
    const float step = Fp8E4M3ToFloat(scales[i / 16]) / global;
    EXPECT_LE(std::fabs(back[i] - w[i]), step + 1e-3f * std::fabs(w[i])) << i;
  }
}

TEST(Int4Packing, CompressedTensorsWordsAreOffsetBinaryLowNibbleFirst) {
  // Row of 8 values -8..7 in steps: compressed-tensors stores q + 8 at bits 4*i of the word.
  const int8_t q[8] = {-8, -1, 0, 1, 7, 3, -5, 2};
  uint32_t word = 0;
  for (int i = 0; i < 8; ++i) word |= static_cast<uint32_t>(q[i] + 8) << (4 * i);
  uint8_t canon[4];
  quant::CtWordsToCanonical(reinterpret_cast<const uint8_t*>(&word), 1, 1, 8, true, canon);
  for (int i = 0; i < 8; ++i) {
    const int nib = (canon[i / 2] >> (4 * (i % 2))) & 0xF;
    EXPECT_EQ((nib ^ 8) - 8, q[i]) << i;  // two's complement
  }
  uint32_t back = 0;
  quant::CanonicalToCtWords(canon, 1, 8, true, 1, reinterpret_cast<uint8_t*>(&back));
  EXPECT_EQ(back, word);
  // Dequantized with one bf16 scale per 8 (a group of 8 for the test).
  WeightFormat f = WeightFormat::Int4(8, DType::kF32);
  const float scale = 0.5f;
  float out[8];
  quant::DequantizeInt4Row(f, canon, &scale, nullptr, 8, out);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], q[i] * 0.5f);
}

TEST(Int4Packing, ZeroPointsArePackedAlongRows) {
  // 10 rows x 2 groups: word (r/8, g) holds zp(r, g) at bits 4*(r%8).
  std::vector<uint8_t> zp(20);
  for (int i = 0; i < 20; ++i) zp[i] = static_cast<uint8_t>((i * 7) % 16);
  std::vector<uint32_t> words(2 * 2);
  quant::CanonicalZeroPointsToCt(zp.data(), 10, 2, reinterpret_cast<uint8_t*>(words.data()));
  EXPECT_EQ((words[0 * 2 + 1] >> (4 * 3)) & 0xF, zp[3 * 2 + 1]);
  EXPECT_EQ((words[1 * 2 + 0] >> (4 * 1)) & 0xF, zp[9 * 2 + 0]);
  std::vector<uint8_t> back(20);
  quant::CtZeroPointsToCanonical(reinterpret_cast<const uint8_t*>(words.data()), 10, 2,
                                 back.data());
  EXPECT_EQ(back, zp);
}

TEST(Int4Packing, QuantizeMatchesCompressedTensorsRounding) {
  // Symmetric: scale = amax / 7.5, q = round-half-even(w / scale) clamped to [-8, 7].
  std::vector<float> w(32);
  for (int i = 0; i < 32; ++i) w[i] = (i - 16) * 0.25f;  // amax 4 -> scale 8/15
  WeightFormat f = WeightFormat::Int4(32, DType::kF32);
  uint8_t packed[16];
  float scale = 0;
  quant::QuantizeInt4Rows(f, w.data(), 1, 32, packed, &scale, nullptr);
  EXPECT_FLOAT_EQ(scale, 4.0f / 7.5f);
  float out[32];
  quant::DequantizeInt4Row(f, packed, &scale, nullptr, 32, out);
  for (int i = 0; i < 32; ++i) {
    const float q = std::min(7.0f, std::max(-8.0f, std::nearbyint(w[i] / scale)));
    EXPECT_EQ(out[i], q * scale) << i;
    EXPECT_LE(std::fabs(out[i] - w[i]), scale * 0.5f + 1e-6f) << i;
  }
  // Asymmetric over [min(w, 0), max(w, 0)]: the zero point puts 0 on the grid.
  f.elem = DType::kU4;
  f.zero_point = true;
  for (int i = 0; i < 32; ++i) w[i] = 0.1f + i * 0.05f;
  uint8_t zero = 0;
  quant::QuantizeInt4Rows(f, w.data(), 1, 32, packed, &scale, &zero);
  quant::DequantizeInt4Row(f, packed, &scale, &zero, 32, out);
  for (int i = 0; i < 32; ++i) EXPECT_LE(std::fabs(out[i] - w[i]), scale * 0.5f + 1e-6f) << i;
}

// A quantized copy of a tiny checkpoint, edited tensor by tensor, then bound.
class QuantizedBinding : public ::testing::Test {
 protected:
  void SetUp() override { Quantize("int4-g32"); }
  void Quantize(const char* spec) {
    char tmpl[] = "/tmp/gannet_qbind_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto o = model::ParseWeightDtype(spec);
    ASSERT_TRUE(o.ok()) << o.status();
    auto r = model::QuantizeCheckpoint(testing::TinyModelDir("e4b"), dir_ + "/q", *o);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_GT(r->quantized_modules, 0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Rewrites q/model.safetensors with `edit` applied to its tensors, then binds.
  absl::Status EditAndBind(
      const std::function<void(std::map<std::string, model::TensorToWrite>&)>& edit) {
    const std::string path = dir_ + "/q/model.safetensors";
    std::map<std::string, model::TensorToWrite> tensors;
    {
      auto f = model::SafetensorsFile::Open(path);
      if (!f.ok()) return f.status();
      for (const model::TensorInfo& t : (*f)->tensors()) {
        tensors[t.name] = {t.name, t.dtype, t.shape,
                           std::string(reinterpret_cast<const char*>((*f)->Data(t)), t.nbytes())};
      }
    }
    edit(tensors);
    std::vector<model::TensorToWrite> out;
    for (auto& [name, t] : tensors) out.push_back(t);
    if (auto st = model::WriteSafetensors(path, out); !st.ok()) return st;
    return Bind();
  }
  absl::Status Bind() {
    auto config = model::LoadModelConfig(dir_ + "/q");
    if (!config.ok()) return config.status();
    auto ckpt = model::Checkpoint::Open(dir_ + "/q");
    if (!ckpt.ok()) return ckpt.status();
    auto w = model::BindWeights(*config, **ckpt);
    return w.status();
  }
  // Rewrites config.json's text: the first `from` becomes `to`.
  void EditConfig(const std::string& from, const std::string& to) {
    auto text = ReadFileToString(dir_ + "/q/config.json", 1 << 20, "config");
    ASSERT_TRUE(text.ok());
    std::string s = *text;
    const size_t at = s.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    s.replace(at, from.size(), to);
    ASSERT_TRUE(WriteStringToFile(dir_ + "/q/config.json", s).ok());
  }

  std::string dir_;
  const std::string m_ = "model.language_model.layers.0.mlp.down_proj";
};

void ExpectStatus(const absl::Status& st, absl::StatusCode code, const std::string& names) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), code) << st;
  EXPECT_NE(std::string(st.message()).find(names), std::string::npos) << st;
}

TEST_F(QuantizedBinding, BindsAsWritten) {
  auto config = model::LoadModelConfig(dir_ + "/q");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->compressed_tensors.has_value());
  auto ckpt = model::Checkpoint::Open(dir_ + "/q");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto w = model::BindWeights(*config, **ckpt);
  ASSERT_TRUE(w.ok()) << w.status();
  const model::WeightView& down = w->layers[0].down_proj;
  EXPECT_TRUE(down.quantized());
  EXPECT_EQ(down.format, WeightFormat::Int4(32, DType::kBF16));
  EXPECT_EQ(down.shape, (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(down.nbytes(), 32u * 128 / 2);
  EXPECT_EQ(down.scale_bytes(), 32u * 4 * 2);
  EXPECT_FALSE(w->embed_tokens.quantized());                    // an Embedding, not a Linear
  EXPECT_FALSE(w->layers[0].per_layer_projection.quantized());  // width 16: in `ignore`
}

TEST_F(QuantizedBinding, MissingScaleIsNamed) {
  ExpectStatus(EditAndBind([&](auto& t) { t.erase(m_ + ".weight_scale"); }),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_scale' is missing");
}

TEST_F(QuantizedBinding, MissingPackedIsNamed) {
  ExpectStatus(EditAndBind([&](auto& t) { t.erase(m_ + ".weight_packed"); }),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_packed' is missing");
}

TEST_F(QuantizedBinding, BadPackedShapeIsNamed) {
  ExpectStatus(EditAndBind([&](auto& t) {
                 auto& p = t[m_ + ".weight_packed"];
                 p.shape = {16, 32};  // same bytes, wrong shape
               }),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_packed' is I32 [16, 32]");
}

TEST_F(QuantizedBinding, BadScaleShapeAndDtypeAreNamed) {
  ExpectStatus(EditAndBind([&](auto& t) {
                 t[m_ + ".weight_scale"].shape = {64, 2};
               }),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_scale' has shape [64, 2]");
}

TEST_F(QuantizedBinding, ScaleDtypeIsChecked) {
  ExpectStatus(EditAndBind([&](auto& t) {
                 auto& s = t[m_ + ".weight_scale"];
                 s.dtype = DType::kI16;
               }),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_scale' has dtype I16");
}

TEST_F(QuantizedBinding, ZeroPointInASymmetricSchemeIsRefused) {
  ExpectStatus(EditAndBind([&](auto& t) {
                 t[m_ + ".weight_zero_point"] = {
                     m_ + ".weight_zero_point", DType::kI32, {4, 4}, std::string(64, '\0')};
               }),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_zero_point' in a symmetric");
}

TEST_F(QuantizedBinding, PlainWeightOfATargetedModuleIsRefused) {
  ExpectStatus(EditAndBind([&](auto& t) {
                 for (const char* s : {".weight_packed", ".weight_scale", ".weight_shape"})
                   t.erase(m_ + s);
                 t[m_ + ".weight"] = {
                     m_ + ".weight", DType::kBF16, {32, 128}, std::string(32 * 128 * 2, '\0')};
               }),
               absl::StatusCode::kInvalidArgument, "module '" + m_ + "' is quantized by");
}

TEST_F(QuantizedBinding, QuantizedTensorOfAnIgnoredModuleIsRefused) {
  // lm_head-like: the PLE projection of layer 0 is in `ignore` (width 16), so packed tensors
  // for it contradict the config.
  const std::string p = "model.language_model.layers.0.per_layer_projection";
  ExpectStatus(EditAndBind([&](auto& t) {
                 t[p + ".weight_packed"] = {
                     p + ".weight_packed", DType::kI32, {32, 2}, std::string(32 * 2 * 4, '\0')};
               }),
               absl::StatusCode::kInvalidArgument, p + ".weight_packed' is quantized, but");
}

TEST_F(QuantizedBinding, WeightShapeValuesAreCheckedWhenRead) {
  ASSERT_TRUE(EditAndBind([&](auto& t) {
                const int64_t wrong[2] = {32, 96};
                t[m_ + ".weight_shape"].bytes =
                    std::string(reinterpret_cast<const char*>(wrong), 16);
              }).ok());
  auto config = model::LoadModelConfig(dir_ + "/q");
  auto ckpt = model::Checkpoint::Open(dir_ + "/q");
  ASSERT_TRUE(config.ok() && ckpt.ok());
  auto w = model::BindWeights(*config, **ckpt);
  ASSERT_TRUE(w.ok()) << w.status();
  const model::WeightView& v = w->layers[0].down_proj;
  std::vector<uint8_t> packed(v.nbytes()), scales(v.scale_bytes());
  ExpectStatus(model::WriteCanonicalInt4(v, packed.data(), scales.data(), nullptr),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_shape' is [32, 96]");
}

TEST_F(QuantizedBinding, UnknownSchemeInConfigIsRefusedAtConfigRead) {
  auto text = ReadFileToString(dir_ + "/q/config.json", 1 << 20, "config");
  ASSERT_TRUE(text.ok());
  std::string s = *text;
  const size_t at = s.find("\"num_bits\":4");
  ASSERT_NE(at, std::string::npos);
  s.replace(at, 12, "\"num_bits\":3");
  ASSERT_TRUE(WriteStringToFile(dir_ + "/q/config.json", s).ok());
  ExpectStatus(Bind(), absl::StatusCode::kUnimplemented, "weights.num_bits: 3");
}

// The same checks for FP8 (float-quantized) modules: `.weight` F8_E4M3, `.weight_scale`, and
// `.input_scale` exactly with static activations.
class Fp8Binding : public QuantizedBinding {
 protected:
  void SetUp() override { Quantize("fp8-channel"); }
  absl::StatusOr<model::ModelWeights> BindKeep() {
    GANNET_ASSIGN_OR_RETURN(config_, model::LoadModelConfig(dir_ + "/q"));
    GANNET_ASSIGN_OR_RETURN(ckpt_, model::Checkpoint::Open(dir_ + "/q"));
    return model::BindWeights(config_, *ckpt_);
  }
  model::ModelConfig config_;
  std::unique_ptr<model::Checkpoint> ckpt_;
};

TEST_F(Fp8Binding, BindsAsWritten) {
  auto w = BindKeep();
  ASSERT_TRUE(w.ok()) << w.status();
  const model::WeightView& down = w->layers[0].down_proj;
  WeightFormat want = WeightFormat::Fp8Channel();
  want.scale = DType::kBF16;
  want.act = ActivationQuant::kDynamicFp8;
  EXPECT_EQ(down.format, want) << WeightFormatName(down.format);
  EXPECT_EQ(down.dtype, DType::kF8E4M3);
  EXPECT_EQ(down.nbytes(), 32u * 128);
  EXPECT_EQ(down.scale_bytes(), 32u * 2);
  // FP8 has no width constraint: the PLE projection (width 16) is quantized too.
  EXPECT_TRUE(w->layers[0].per_layer_projection.quantized());
  std::vector<uint8_t> elems(down.nbytes());
  std::vector<float> scales(32);
  ASSERT_TRUE(model::WriteCanonicalFp8(down, elems.data(), scales.data(), nullptr).ok());
  for (float sc : scales) EXPECT_GT(sc, 0.f);
}

TEST_F(Fp8Binding, MissingAndMisShapedScalesAreNamed) {
  ExpectStatus(EditAndBind([&](auto& t) {
                 t[m_ + ".weight_scale"].shape = {16, 2};
               }),
               absl::StatusCode::kInvalidArgument,
               m_ + ".weight_scale' has shape [16, 2], expected [32, 1]");
  ExpectStatus(EditAndBind([&](auto& t) { t.erase(m_ + ".weight_scale"); }),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_scale' is missing");
}

TEST_F(Fp8Binding, WrongWeightDtypeIsNamed) {
  ExpectStatus(EditAndBind([&](auto& t) {
                 t[m_ + ".weight"] = {
                     m_ + ".weight", DType::kBF16, {32, 128}, std::string(32 * 128 * 2, '\0')};
               }),
               absl::StatusCode::kInvalidArgument,
               m_ + ".weight' is BF16 [32, 128], expected F8_E4M3 [32, 128]");
}

TEST_F(Fp8Binding, WrongScaleDtypeIsNamed) {
  ExpectStatus(EditAndBind([&](auto& t) { t[m_ + ".weight_scale"].dtype = DType::kI16; }),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_scale' has dtype I16");
}

TEST_F(Fp8Binding, InputScaleGoesWithStaticActivationsOnly) {
  // Dynamic activations: an input_scale contradicts the config.
  ExpectStatus(EditAndBind([&](auto& t) {
                 const float one = 1.0f;
                 t[m_ + ".input_scale"] = {m_ + ".input_scale",
                                           DType::kF32,
                                           {1},
                                           std::string(reinterpret_cast<const char*>(&one), 4)};
               }),
               absl::StatusCode::kInvalidArgument, m_ + ".input_scale' but");
  // Static activations: every module needs one.
  EditConfig("\"strategy\":\"token\"", "\"strategy\":\"tensor\"");
  EditConfig("\"dynamic\":true", "\"dynamic\":false");
  ExpectStatus(Bind(), absl::StatusCode::kInvalidArgument, ".input_scale' is missing");
}

TEST_F(Fp8Binding, NonFiniteScaleAndNanElementAreDataLoss) {
  ASSERT_TRUE(EditAndBind([&](auto& t) {
                auto& s = t[m_ + ".weight_scale"].bytes;
                const uint16_t inf = 0x7F80;  // bf16 +inf
                std::memcpy(s.data() + 2 * 5, &inf, 2);
              }).ok());
  auto w = BindKeep();
  ASSERT_TRUE(w.ok()) << w.status();
  const model::WeightView& v = w->layers[0].down_proj;
  std::vector<uint8_t> elems(v.nbytes());
  std::vector<float> scales(32);
  ExpectStatus(model::WriteCanonicalFp8(v, elems.data(), scales.data(), nullptr),
               absl::StatusCode::kDataLoss, m_ + ".weight_scale' element 5 is inf");
  ASSERT_TRUE(EditAndBind([&](auto& t) {
                const uint16_t one = 0x3F80;  // bf16 1.0
                std::memcpy(t[m_ + ".weight_scale"].bytes.data() + 2 * 5, &one, 2);
                t[m_ + ".weight"].bytes[7] = static_cast<char>(0x7F);
              }).ok());
  w = BindKeep();
  ASSERT_TRUE(w.ok()) << w.status();
  ExpectStatus(
      model::WriteCanonicalFp8(w->layers[0].down_proj, elems.data(), scales.data(), nullptr),
      absl::StatusCode::kDataLoss, m_ + ".weight' element 7 is NaN");
}

TEST_F(Fp8Binding, Int4TensorsInAnFp8ModuleAreRefused) {
  ExpectStatus(EditAndBind([&](auto& t) {
                 t[m_ + ".weight_packed"] = {
                     m_ + ".weight_packed", DType::kI32, {32, 16}, std::string(32 * 16 * 4, '\0')};
               }),
               absl::StatusCode::kInvalidArgument, "holds an int4 '" + m_ + ".weight_packed'");
}

// NVFP4 (nvfp4-pack-quantized) modules: weight_packed U8, weight_scale F8_E4M3 per 16,
// weight_global_scale, and input_global_scale exactly with FP4 activations.
class Nvfp4Binding : public QuantizedBinding {
 protected:
  void SetUp() override { Quantize("nvfp4"); }
};

TEST_F(Nvfp4Binding, BindsAsWritten) {
  auto config = model::LoadModelConfig(dir_ + "/q");
  ASSERT_TRUE(config.ok()) << config.status();
  auto ckpt = model::Checkpoint::Open(dir_ + "/q");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto w = model::BindWeights(*config, **ckpt);
  ASSERT_TRUE(w.ok()) << w.status();
  const model::WeightView& down = w->layers[0].down_proj;
  EXPECT_EQ(down.format, WeightFormat::Nvfp4()) << WeightFormatName(down.format);
  EXPECT_EQ(down.nbytes(), 32u * 128 / 2);
  EXPECT_EQ(down.scale_bytes(), 32u * 128 / 16 + 4);
  EXPECT_TRUE(w->layers[0].per_layer_projection.quantized());  // width 16: one group
  std::vector<uint8_t> packed(down.nbytes()), scales(32 * 8);
  std::vector<float> globals(32);
  ASSERT_TRUE(
      model::WriteCanonicalNvfp4(down, packed.data(), scales.data(), globals.data(), nullptr).ok());
  EXPECT_GT(globals[0], 0.f);
}

TEST_F(Nvfp4Binding, TensorsAreChecked) {
  ExpectStatus(EditAndBind([&](auto& t) {
                 t[m_ + ".weight_scale"].shape = {64, 4};
               }),
               absl::StatusCode::kInvalidArgument,
               m_ + ".weight_scale' is F8_E4M3 [64, 4], expected F8_E4M3 [32, 8]");
}

TEST_F(Nvfp4Binding, PackedDtypeIsChecked) {
  ExpectStatus(EditAndBind([&](auto& t) { t[m_ + ".weight_packed"].dtype = DType::kI8; }),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_packed' is I8 [32, 64]");
}

TEST_F(Nvfp4Binding, MissingGlobalScaleIsNamed) {
  ExpectStatus(EditAndBind([&](auto& t) { t.erase(m_ + ".weight_global_scale"); }),
               absl::StatusCode::kInvalidArgument, m_ + ".weight_global_scale' is missing");
}

TEST_F(Nvfp4Binding, InputGlobalScaleGoesWithFp4ActivationsOnly) {
  ExpectStatus(EditAndBind([&](auto& t) {
                 const float one = 1.0f;
                 t[m_ + ".input_global_scale"] = {
                     m_ + ".input_global_scale",
                     DType::kF32,
                     {1},
                     std::string(reinterpret_cast<const char*>(&one), 4)};
               }),
               absl::StatusCode::kInvalidArgument, m_ + ".input_global_scale' but");
}

TEST_F(Nvfp4Binding, BadGlobalScaleIsDataLoss) {
  ASSERT_TRUE(EditAndBind([&](auto& t) {
                const float zero = 0.0f;
                t[m_ + ".weight_global_scale"].bytes =
                    std::string(reinterpret_cast<const char*>(&zero), 4);
              }).ok());
  auto config = model::LoadModelConfig(dir_ + "/q");
  auto ckpt = model::Checkpoint::Open(dir_ + "/q");
  ASSERT_TRUE(config.ok() && ckpt.ok());
  auto w = model::BindWeights(*config, **ckpt);
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<uint8_t> packed(32 * 64), scales(32 * 8);
  std::vector<float> globals(32);
  ExpectStatus(model::WriteCanonicalNvfp4(w->layers[0].down_proj, packed.data(), scales.data(),
                                          globals.data(), nullptr),
               absl::StatusCode::kDataLoss, m_ + ".weight_global_scale' is 0");
}

}  // namespace
}  // namespace gannet
