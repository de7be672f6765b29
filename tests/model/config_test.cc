#include "lib/model/config.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace gannet::model {
namespace {

// The released 31B config (docs/gemma4-model.md §1.3) in the multimodal wrapper shape.
constexpr char k31B[] = R"({
  "model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"],
  "eos_token_id": [1, 106], "vision_config": {"hidden_size": 1152},
  "text_config": {
    "model_type": "gemma4_text", "hidden_size": 5376, "intermediate_size": 21504,
    "num_hidden_layers": 60, "num_attention_heads": 32, "num_key_value_heads": 16,
    "num_global_key_value_heads": 4, "head_dim": 256, "global_head_dim": 512,
    "attention_k_eq_v": true, "sliding_window": 1024, "max_position_embeddings": 262144,
    "final_logit_softcapping": 30.0, "hidden_size_per_layer_input": 0,
    "use_bidirectional_attention": "vision", "vocab_size": 262144
  }
})";

constexpr char kE2B[] = R"({
  "model_type": "gemma4_text", "hidden_size": 1536, "intermediate_size": 6144,
  "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 1,
  "layer_types": ["sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention",
                  "sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention",
                  "sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention",
                  "sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention",
                  "sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention",
                  "sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention",
                  "sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention"],
  "num_kv_shared_layers": 20, "use_double_wide_mlp": true, "final_logit_softcapping": 30.0
})";

TEST(ConfigTest, Parses31BWrapper) {
  auto m = ParseModelConfigText(k31B, "31b/config.json");
  ASSERT_TRUE(m.ok()) << m.status();
  const TextConfig& t = m->text;
  EXPECT_EQ(m->kind, ModelKind::kTarget);
  EXPECT_EQ(m->variant, Variant::kDense31B);
  EXPECT_EQ(m->text_tensor_prefix, "model.language_model.");
  EXPECT_EQ(t.layer_types.size(), 60u);
  EXPECT_EQ(t.NumLayersOfType(LayerType::kFull), 10);
  EXPECT_TRUE(t.is_sliding(0));
  EXPECT_FALSE(t.is_sliding(5));
  EXPECT_EQ(t.LayerHeadDim(5), 512);
  EXPECT_EQ(t.LayerNumKvHeads(5), 4);
  EXPECT_EQ(t.LayerNumKvHeads(4), 16);
  EXPECT_TRUE(t.LayerKEqV(59));
  EXPECT_FALSE(t.LayerKEqV(58));
  EXPECT_EQ(t.rope_full.type, RopeType::kProportional);
  EXPECT_DOUBLE_EQ(t.rope_full.theta, 1e6);
  EXPECT_DOUBLE_EQ(t.rope_full.partial_rotary_factor, 0.25);
  EXPECT_EQ(*t.final_logit_softcapping, 30.0);
  EXPECT_EQ(m->eos_token_ids, (std::vector<int>{1, 106}));
  EXPECT_TRUE(m->has_vision_config);
  EXPECT_FALSE(m->has_audio_config);
  EXPECT_EQ(EmbeddingScale(t.hidden_size), 73.5f);
}

TEST(ConfigTest, ParsesE2BKvSharingAndDoubleWide) {
  auto m = ParseModelConfigText(kE2B, "e2b/config.json");
  ASSERT_TRUE(m.ok()) << m.status();
  const TextConfig& t = m->text;
  EXPECT_EQ(m->variant, Variant::kE2B);
  EXPECT_EQ(m->text_tensor_prefix, "model.");
  EXPECT_EQ(t.FirstKvSharedLayer(), 15);
  EXPECT_EQ(t.KvDonor(3), 3);
  EXPECT_EQ(t.KvDonor(15), 13);  // shared sliding -> last non-shared sliding
  EXPECT_EQ(t.KvDonor(19), 14);  // shared full -> last non-shared full
  EXPECT_EQ(t.KvDonor(34), 14);
  EXPECT_EQ(t.LayerIntermediateSize(14), 6144);
  EXPECT_EQ(t.LayerIntermediateSize(15), 12288);
  EXPECT_EQ(t.LayerNumKvHeads(4), 1);  // k_eq_v false: full layers keep num_key_value_heads
  EXPECT_EQ(t.hidden_size_per_layer_input, 256);  // default
  EXPECT_EQ(EmbeddingScale(t.hidden_size), 39.25f);
}

TEST(ConfigTest, DefaultLayerPatternForcesLastFull) {
  auto m = ParseModelConfigText(R"({"model_type":"gemma4_text","num_hidden_layers":8})", "c");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->text.layer_types[5], LayerType::kFull);
  EXPECT_EQ(m->text.layer_types[6], LayerType::kSliding);
  EXPECT_EQ(m->text.layer_types[7], LayerType::kFull);
}

TEST(ConfigTest, AcceptsNewerPerLayerConfig) {
  auto m = ParseModelConfigText(R"({"model_type":"gemma4_text","num_hidden_layers":6,
      "num_attention_heads":4,"num_key_value_heads":2,"attention_k_eq_v":true,
      "per_layer_config":{"5":{"head_dim":384,"num_key_value_heads":1}}})",
                                "c");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->text.LayerHeadDim(5), 384);
  EXPECT_EQ(m->text.LayerNumKvHeads(5), 1);
}

TEST(ConfigTest, ParsesAssistant) {
  auto m = ParseModelConfigText(R"({"model_type":"gemma4_assistant","backbone_hidden_size":2560,
      "use_ordered_embeddings":true,"num_centroids":2048,"centroid_intermediate_top_k":32,
      "text_config":{"model_type":"gemma4_text","hidden_size":256,"intermediate_size":2048,
        "num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":2,
        "layer_types":["sliding_attention","sliding_attention","sliding_attention","full_attention"],
        "hidden_size_per_layer_input":0,"vocab_size_per_layer_input":0}})",
                                "a");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->kind, ModelKind::kAssistant);
  EXPECT_EQ(m->text.num_kv_shared_layers, 4);
  EXPECT_TRUE(m->text.IsKvShared(0));
  EXPECT_EQ(m->backbone_hidden_size, 2560);
}

struct BadConfig {
  const char* json;
  const char* must_mention;
};

TEST(ConfigTest, InconsistentConfigsAreClearErrors) {
  const BadConfig cases[] = {
      {R"({"model_type":"llama"})", "llama"},
      {R"({"hidden_size":5})", "model_type"},
      {R"({"model_type":"gemma4"})", "text_config"},
      {R"({"model_type":"gemma4_text","hidden_size":"big"})", "hidden_size"},
      {R"({"model_type":"gemma4_text","num_attention_heads":6,"num_key_value_heads":4})",
       "num_key_value_heads"},
      {R"({"model_type":"gemma4_text","sliding_window":0})", "sliding_window"},
      {R"({"model_type":"gemma4_text","num_hidden_layers":2,"layer_types":["sliding_attention","local"]})",
       "unknown layer type"},
      {R"({"model_type":"gemma4_text","num_hidden_layers":3,"layer_types":["full_attention"]})",
       "layer_types"},
      {R"({"model_type":"gemma4_text","num_hidden_layers":4,"num_kv_shared_layers":5})",
       "num_kv_shared_layers"},
      {R"({"model_type":"gemma4_text","num_hidden_layers":4,"num_kv_shared_layers":3,
          "layer_types":["sliding_attention","full_attention","full_attention","full_attention"]})",
       "KV-shared"},
      {R"({"model_type":"gemma4_text","enable_moe_block":true,"num_experts":8})", "top_k_experts"},
      {R"({"model_type":"gemma4_text","enable_moe_block":true,"num_experts":8,"top_k_experts":9,
          "moe_intermediate_size":4})",
       "top_k_experts"},
      {R"({"model_type":"gemma4_text","hidden_activation":"silu"})", "hidden_activation"},
      {R"({"model_type":"gemma4_text","rope_parameters":{"full_attention":{"rope_type":"yarn"}}})",
       "rope_type"},
      {R"({"model_type":"gemma4_text","head_dim":255})", "even"},
      {R"({"model_type":"gemma4_text","attention_k_eq_v":true,"num_global_key_value_heads":3})",
       "num_global_key_value_heads"},
      {R"({"model_type":"gemma4_text","eos_token_id":[1, 999999]})", "eos_token_id"},
      {R"({"model_type":"gemma4_assistant","text_config":{"num_hidden_layers":4,
          "num_kv_shared_layers":2,"hidden_size_per_layer_input":0,"vocab_size_per_layer_input":0}})",
       "KV-shared"},
      {R"({"model_type":"gemma4_text", "hidden_size": 12,})", "JSON line 1"},
  };
  for (const BadConfig& c : cases) {
    auto m = ParseModelConfigText(c.json, "bad/config.json");
    ASSERT_FALSE(m.ok()) << "accepted: " << c.json;
    std::string msg(m.status().message());
    EXPECT_NE(msg.find(c.must_mention), std::string::npos)
        << "message '" << msg << "' does not mention '" << c.must_mention << "'";
    EXPECT_NE(msg.find("bad/config.json"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace gannet::model

namespace gannet::model {
namespace {

std::string With(std::string json, const std::string& key, const std::string& value) {
  const std::string anchor = "\"model_type\": \"gemma4_text\"";
  return json.replace(json.find(anchor), anchor.size(), anchor + ", \"" + key + "\": " + value);
}

// Bounded input: counts and sizes are checked before anything is sized from them, fast.
TEST(ConfigBoundsTest, HugeCountsFailAtOnceNamingTheField) {
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"num_hidden_layers", "2147483647"},
                                                        {"num_attention_heads", "100000"},
                                                        {"vocab_size", "2000000000"},
                                                        {"num_experts", "1000000"},
                                                        {"max_position_embeddings", "9000000000"},
                                                        {"head_dim", "65536"},
                                                        {"hidden_size", "10000000"}}) {
    std::string json = kE2B;
    const std::string anchor = "\"num_hidden_layers\": 35, ";
    if (key != "num_hidden_layers") {
      json = With(json, key, value);
    } else {
      json.replace(json.find(anchor), anchor.size(), "\"num_hidden_layers\": " + value + ", ");
    }
    const absl::Status st = ParseModelConfigText(json, "config.json").status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_NE(st.message().find(key), std::string::npos) << st;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(ConfigBoundsTest, EosListsAndPerLayerKeysAreRangeChecked) {
  std::string many = "[";
  for (int i = 0; i < 100; ++i) many += (i ? ",1" : "1");
  many += "]";
  EXPECT_NE(ParseModelConfigText(With(kE2B, "eos_token_id", many), "c")
                .status()
                .message()
                .find("eos_token_id"),
            std::string::npos);
  EXPECT_FALSE(ParseModelConfigText(With(kE2B, "eos_token_id", "[1, 999999]"), "c").ok());
  for (const char* key : {"\"4abc\"", "\"99999999999999\"", "\"-1\"", "\"\""}) {
    const absl::Status st =
        ParseModelConfigText(
            With(kE2B, "per_layer_config", std::string("{") + key + ": {\"head_dim\": 512}}"), "c")
            .status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << key << " " << st;
  }
}

// An eos id past an int is out of range, not truncated into the vocabulary (2^32 + 1 -> 1); a
// gemma4 wrapper's own list is checked like text_config's.
TEST(ConfigBoundsTest, EosIdsFitAnIntAndTheWrappersListIsChecked) {
  for (const char* eos : {"4294967297", "[1, 4294967297]", "[-4294967295]"}) {
    const absl::Status st = ParseModelConfigText(With(kE2B, "eos_token_id", eos), "c").status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << eos;
    EXPECT_NE(st.message().find("out of range"), std::string::npos) << st;
  }
  std::string wrapper = k31B;
  const std::string eos = "\"eos_token_id\": [1, 106]";
  ASSERT_NE(wrapper.find(eos), std::string::npos);
  for (const char* bad : {"[1, 999999999]", "[1, -5]"}) {
    std::string json = wrapper;
    json.replace(json.find(eos), eos.size(), std::string("\"eos_token_id\": ") + bad);
    const absl::Status st = ParseModelConfigText(json, "c").status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("outside vocab_size"), std::string::npos) << st;
  }
  std::string many = "[";
  for (int i = 0; i < 100; ++i) many += (i ? ",1" : "1");
  std::string json = wrapper;
  json.replace(json.find(eos), eos.size(), "\"eos_token_id\": " + many + "]");
  EXPECT_NE(ParseModelConfigText(json, "c").status().message().find("at most"), std::string::npos);
}

// per_layer_config's overrides are bounded like the fields they replace, and full layers keep one
// head_dim.
TEST(ConfigBoundsTest, PerLayerOverridesAreBoundedAndAgree) {
  const absl::Status huge =
      ParseModelConfigText(With(kE2B, "per_layer_config", R"({"4": {"head_dim": 1000000}})"), "c")
          .status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument) << huge;
  EXPECT_NE(huge.message().find("global_head_dim"), std::string::npos) << huge;
  const absl::Status differ =
      ParseModelConfigText(
          With(kE2B, "per_layer_config", R"({"4": {"head_dim": 512}, "9": {"head_dim": 256}})"),
          "c")
          .status();
  EXPECT_EQ(differ.code(), absl::StatusCode::kUnimplemented) << differ;
  EXPECT_NE(differ.message().find("different head_dim"), std::string::npos) << differ;
  EXPECT_TRUE(ParseModelConfigText(With(kE2B, "per_layer_config",
                                        R"({"4": {"head_dim": 512}, "9": {"head_dim": 512}})"),
                                   "c")
                  .ok());
}

// An assistant's backbone_hidden_size is bounded (2 x it sizes a weight; past 2^62 that
// overflowed).
TEST(ConfigBoundsTest, AssistantBackboneHiddenSizeIsBounded) {
  const absl::Status st =
      ParseModelConfigText(
          R"({"model_type":"gemma4_assistant","backbone_hidden_size":4611686018427387905,
      "text_config":{"model_type":"gemma4_text","hidden_size":256,"intermediate_size":2048,
        "num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":2,
        "layer_types":["sliding_attention","sliding_attention","sliding_attention","full_attention"],
        "hidden_size_per_layer_input":0,"vocab_size_per_layer_input":0}})",
          "a")
          .status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("backbone_hidden_size"), std::string::npos) << st;
}

TEST(ConfigBoundsTest, OversizedDocumentsAreRefusedBeforeParsing) {
  std::string big = kE2B;
  big.insert(big.size() - 1, ", \"pad\": \"" + std::string(kMaxConfigJsonBytes, 'x') + "\"");
  const absl::Status st = ParseModelConfigText(big, "config.json").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("more than a config.json may have"), std::string::npos) << st;
  // Many small values: the parser's node budget refuses them before allocating.
  std::string values = "[";
  for (int i = 0; i < 300000; ++i) values += i ? ",0" : "0";
  values += "]";
  EXPECT_EQ(ParseModelConfigText(With(kE2B, "junk", values), "c").status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace gannet::model
