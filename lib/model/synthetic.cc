#include "lib/model/synthetic.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "lib/common/file_util.h"
#include "lib/common/hash.h"
#include "lib/common/status.h"
#include "lib/model/safetensors.h"

namespace gannet::model {
namespace {

uint64_t Fnv1a(std::string_view s) { return Fnv1a64(s); }
uint64_t SplitMix(uint64_t x) { return SplitMix64(x); }

// A standard normal sample that depends only on (key, index).
float Normal(uint64_t key, int64_t index) {
  uint64_t a = SplitMix(key ^ (static_cast<uint64_t>(index) * 2 + 1));
  uint64_t b = SplitMix(a ^ 0x5851f42d4c957f2dull);
  double u1 = (static_cast<double>(a >> 11) + 0.5) / 9007199254740992.0;
  double u2 = static_cast<double>(b >> 11) / 9007199254740992.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

float Uniform(uint64_t key, int64_t index) {
  return static_cast<float>((SplitMix(key ^ (static_cast<uint64_t>(index) * 2 + 1)) >> 11) /
                            9007199254740992.0);
}

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

}  // namespace

uint64_t SyntheticKey(uint64_t seed, std::string_view name) { return SplitMix(seed ^ Fnv1a(name)); }

void FillSyntheticBf16(std::string_view name, WeightInit init, int64_t fan_in, uint64_t seed,
                       int64_t offset, int64_t count, uint16_t* out) {
  const uint64_t key = SyntheticKey(seed, name);
  const float mat_scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t idx = offset + i;
    float v = 0;
    switch (init) {
      case WeightInit::kMatrix:
        v = Normal(key, idx) * mat_scale;
        break;
      case WeightInit::kEmbedding:
        v = Normal(key, idx) * 2.0f * mat_scale;
        break;
      case WeightInit::kNorm:
        v = 1.0f + 0.25f * Normal(key, idx);
        break;
      case WeightInit::kQkNorm:
        v = (1.0f + 0.25f * Normal(key, idx)) / std::sqrt(std::sqrt(static_cast<float>(fan_in)));
        break;
      case WeightInit::kLayerScalar:
        v = 0.6f + 0.4f * Uniform(key, idx);
        break;
      case WeightInit::kPositiveScale:
        v = 0.5f + Uniform(key, idx);
        break;
      case WeightInit::kPermutation:
        v = 0;
        break;  // index tensors are written separately
    }
    out[i] = FloatToBf16(v);
  }
}

std::vector<int64_t> SyntheticPermutation(uint64_t seed, std::string_view name, int64_t n) {
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  const uint64_t key = SplitMix(seed ^ Fnv1a(name));
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(SplitMix(key + i) % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

absl::Status WriteSyntheticCheckpoint(const Json& config_json, const std::string& dir,
                                      const SyntheticOptions& options) {
  GANNET_ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfig(config_json, dir + "/config.json"));
  std::vector<TensorToWrite> tensors;
  for (const WeightSpec& spec : ExpectedWeights(config)) {
    TensorToWrite t;
    t.name = spec.name;
    t.shape = spec.shape;
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    if (spec.is_index) {
      // A seeded permutation of [0, n): token_ordering lists each centroid's vocabulary ids.
      std::vector<int64_t> perm = SyntheticPermutation(options.seed, spec.name, n);
      t.dtype = DType::kI64;
      t.bytes = Bytes(perm.data(), perm.size() * 8);
    } else {
      std::vector<uint16_t> data(n);
      FillSyntheticBf16(spec.name, spec.init, spec.shape.back(), options.seed, 0, n, data.data());
      t.dtype = DType::kBF16;
      t.bytes = Bytes(data.data(), data.size() * 2);
    }
    tensors.push_back(std::move(t));
  }
  if (options.tower_tensors) {
    // Small stand-ins for the vision/audio towers of the multimodal checkpoints, with real-style
    // names, so tests see text-only loading skip them.
    std::vector<std::pair<std::string, std::vector<int64_t>>> towers = {
        {"model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight", {64, 64}},
        {"model.vision_tower.patch_embedder.input_proj.weight", {64, 48}},
        {"model.embed_vision.embedding_projection.weight", {config.text.hidden_size, 64}},
    };
    if (config.has_audio_config) {
      towers.push_back(
          {"model.audio_tower.layers.0.feed_forward1.ffw_layer_1.linear.weight", {64, 32}});
      towers.push_back(
          {"model.embed_audio.embedding_projection.weight", {config.text.hidden_size, 32}});
    }
    for (auto& [name, shape] : towers) {
      TensorToWrite t{name, DType::kBF16, shape, {}};
      std::vector<uint16_t> data(shape[0] * shape[1]);
      FillSyntheticBf16(name, WeightInit::kMatrix, shape[1], options.seed, 0,
                        static_cast<int64_t>(data.size()), data.data());
      t.bytes = Bytes(data.data(), data.size() * 2);
      tensors.push_back(std::move(t));
    }
  }
  GANNET_RETURN_IF_ERROR(WriteStringToFile(dir + "/config.json", config_json.Dump() + "\n"));
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"generator", "gannet make-tiny"}};
  if (options.num_shards <= 1) return WriteSafetensors(dir + "/model.safetensors", tensors, meta);

  // Split into shards of roughly equal bytes, in order, and write the index.
  uint64_t total = 0;
  for (const auto& t : tensors) total += t.bytes.size();
  const uint64_t per_shard = (total + options.num_shards - 1) / options.num_shards;
  Json weight_map = Json::MakeObject();
  size_t i = 0;
  for (int s = 0; s < options.num_shards; ++s) {
    std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, options.num_shards);
    std::vector<TensorToWrite> part;
    uint64_t bytes = 0;
    while (i < tensors.size() && (bytes < per_shard || s + 1 == options.num_shards)) {
      bytes += tensors[i].bytes.size();
      weight_map.Set(tensors[i].name, Json::String(file));
      part.push_back(std::move(tensors[i]));
      ++i;
    }
    GANNET_RETURN_IF_ERROR(WriteSafetensors(dir + "/" + file, part, meta));
  }
  Json index = Json::MakeObject();
  Json m = Json::MakeObject();
  m.Set("total_size", Json::Int(static_cast<int64_t>(total)));
  index.Set("metadata", std::move(m));
  index.Set("weight_map", std::move(weight_map));
  return WriteStringToFile(dir + "/model.safetensors.index.json", index.Dump() + "\n");
}

}  // namespace gannet::model
