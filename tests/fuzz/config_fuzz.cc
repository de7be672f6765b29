// Fuzz target: config.json and gannet_model_info (lib/model/config.h, weights.h, variants.h,
// lib/engine/model_info.h through the C ABI), i.e. everything `gannet info` computes from a
// checkpoint's config.
//
// Input: the text of a config.json (seeds: the tiny configs of tests/data/tiny, their text-only
// and wrapped forms, per_layer_config, one config at every upper bound, broken variations;
// dict/config.dict holds the field names). An input that starts with "dummy:" is a model name
// instead, and goes to gannet_model_info as such (the "dummy:<variant>" synthetic models: the
// variant lookup, the real-size configs).
//
//  1. ParseModelConfigText; when it parses, the derived geometry every consumer relies on: per
//     layer head dim, KV heads, KV donor, intermediate size; CountParameters; ExpectedWeights;
//     and, for targets, runner::KvLayersOf and kv::KvBytesPerToken (what model_info.cc does).
//  2. gannet_model_info on a folder holding the input as config.json and a model.safetensors made
//     for it: the header lists ExpectedWeights (BF16, I64 index tensors), the data buffer is a
//     sparse file of zeros, when the weights fit in 1 GiB. So the whole `info` path runs:
//     LoadModelConfig, Checkpoint::Open, BindWeights, the C struct copy-out.
//
// Expected: statuses only. Properties checked: ExpectedWeights names are unique; a config that
// parses, with the checkpoint its own ExpectedWeights describe, passes gannet_model_info, and the
// info agrees with (1).
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gannet/gannet.h"
#include "lib/common/json.h"
#include "lib/kv/kv_layout.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"
#include "lib/runner/kv_storage.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace gannet;

constexpr uint64_t kMaxSyntheticWeightBytes = uint64_t{1} << 30;

struct Derived {
  int64_t num_parameters = 0;
  int64_t kv_bytes_per_token[2] = {0, 0};
};

Derived CheckDerived(const model::ModelConfig& config) {
  const model::TextConfig& c = config.text;
  Derived d;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    (void)c.LayerHeadDim(l);
    (void)c.LayerNumKvHeads(l);
    (void)c.LayerKEqV(l);
    (void)c.LayerIntermediateSize(l);
    if (c.IsKvShared(l)) {
      const int donor = c.KvDonor(l);
      if (donor >= c.num_hidden_layers || (donor >= 0 && c.IsKvShared(donor))) {
        fuzz::Fail("KV donor out of range or itself shared");
      }
    }
  }
  if (c.NumLayersOfType(model::LayerType::kSliding) + c.NumLayersOfType(model::LayerType::kFull) !=
      c.num_hidden_layers) {
    fuzz::Fail("layer types do not add up");
  }
  (void)c.FullNumKvHeads();
  (void)model::VariantName(config.variant);
  (void)model::EmbeddingScale(c.hidden_size);
  std::set<std::string> names;
  for (const model::WeightSpec& s : model::ExpectedWeights(config)) {
    if (!names.insert(s.name).second) fuzz::Fail("ExpectedWeights names a tensor twice", s.name);
  }
  d.num_parameters = model::CountParameters(config);
  if (config.kind == model::ModelKind::kTarget) {
    const std::vector<kv::KvLayerGeometry> layers = runner::KvLayersOf(c);
    const kv::PerGroup<int64_t> per_token = kv::KvBytesPerToken(layers, /*dtype_bytes=*/2);
    (void)kv::KvGroupsPresent(layers);
    d.kv_bytes_per_token[0] = per_token[0];
    d.kv_bytes_per_token[1] = per_token[1];
  }
  return d;
}

// The safetensors bytes (length, header; no data) of a checkpoint holding exactly
// ExpectedWeights(config), and the data size in *data_bytes; false when over the cap.
bool SyntheticCheckpointHeader(const model::ModelConfig& config, std::string* out,
                               uint64_t* data_bytes) {
  Json header = Json::MakeObject();
  uint64_t offset = 0;
  for (const model::WeightSpec& s : model::ExpectedWeights(config)) {
    uint64_t n = s.is_index ? 8 : 2;
    Json shape = Json::MakeArray();
    for (int64_t d : s.shape) {
      if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
      shape.Push(Json::Int(d));
    }
    if (__builtin_add_overflow(offset, n, &offset) || offset > kMaxSyntheticWeightBytes)
      return false;
    Json entry = Json::MakeObject();
    entry.Set("dtype", Json::String(s.is_index ? "I64" : "BF16"));
    entry.Set("shape", std::move(shape));
    Json offsets = Json::MakeArray();
    offsets.Push(Json::Int(static_cast<int64_t>(offset - n)));
    offsets.Push(Json::Int(static_cast<int64_t>(offset)));
    entry.Set("data_offsets", std::move(offsets));
    header.Set(s.name, std::move(entry));
  }
  const std::string text = header.Dump();
  out->clear();
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((text.size() >> (8 * i)) & 0xFF));
  *out += text;
  *data_bytes = offset;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const std::string dir = [] {
    std::string d = fuzz::ScratchDir() + "/model";
    std::filesystem::create_directories(d);
    return d;
  }();

  if (text.substr(0, 6) == "dummy:") {
    // A model name: no NUL inside (a C string), and short (variant names are).
    std::string name(text.substr(0, 64));
    name = name.c_str();
    gannet_model_info_t info = GANNET_MODEL_INFO_INIT;
    if (gannet_model_info(name.c_str(), &info) == GANNET_OK && info.num_parameters <= 0) {
      fuzz::Fail("dummy model without parameters", name);
    }
    return 0;
  }

  auto config = model::ParseModelConfigText(text, "config.json");
  if (!config.ok()) return 0;
  const Derived derived = CheckDerived(*config);

  std::string header;
  uint64_t data_bytes = 0;
  if (!SyntheticCheckpointHeader(*config, &header, &data_bytes)) return 0;
  fuzz::WriteFile(dir + "/config.json", text);
  fuzz::WriteFile(dir + "/model.safetensors", header, header.size() + data_bytes);
  gannet_model_info_t info = GANNET_MODEL_INFO_INIT;
  const gannet_status_t st = gannet_model_info(dir.c_str(), &info);
  if (st != GANNET_OK) {
    fuzz::Fail("gannet_model_info rejects a parsed config with its own expected weights",
               gannet_last_error_message());
  }
  if (info.num_parameters != derived.num_parameters ||
      info.num_layers != config->text.num_hidden_layers ||
      info.kv_bytes_per_token_sliding != derived.kv_bytes_per_token[0] ||
      info.kv_bytes_per_token_full != derived.kv_bytes_per_token[1] ||
      info.weight_bytes != static_cast<int64_t>(data_bytes) || info.num_shards != 1 ||
      info.has_tokenizer != 0) {
    fuzz::Fail("gannet_model_info disagrees with the parsed config");
  }
  return 0;
}
