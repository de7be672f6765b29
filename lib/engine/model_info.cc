#include "lib/engine/model_info.h"

#include <set>
#include <vector>

#include "lib/common/file_util.h"
#include "lib/common/status.h"
#include "lib/kv/kv_layout.h"
#include "lib/runner/kv_storage.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/variants.h"
#include "lib/model/weight_summary.h"
#include "lib/model/weights.h"
#include "lib/tokenizer/tokenizer.h"

namespace gannet::engine {
namespace {

void AddSummary(const model::ModelWeights& weights, ModelInfo* info) {
  const model::WeightSummary s = model::SummarizeWeights(weights);
  info->weight_format = s.format;
  info->kept_plain = s.kept_plain;
  info->bytes_attention = s.attention;
  info->bytes_mlp = s.mlp;
  info->bytes_experts = s.experts;
  info->bytes_embeddings = s.embeddings;
  info->bytes_other = s.other;
}

}  // namespace

absl::StatusOr<ModelInfo> ReadModelInfo(const std::string& dir) {
  ModelInfo info;
  model::ModelConfig config;
  const bool dummy = model::IsDummyModel(dir);
  if (dummy) {
    // The engine's synthetic-weight models: bf16 weights it generates, no files.
    GANNET_ASSIGN_OR_RETURN(config, model::DummyModelConfig(dir));
    info.dtypes = "BF16";
    AddSummary(model::SyntheticWeights(config, 0), &info);
  } else {
    GANNET_ASSIGN_OR_RETURN(config, model::LoadModelConfig(dir));
    GANNET_ASSIGN_OR_RETURN(auto ckpt, model::Checkpoint::Open(dir, {.read_data = false}));
    // Binding validates names and shapes, so `info` reports a broken checkpoint as broken.
    GANNET_ASSIGN_OR_RETURN(model::ModelWeights weights, model::BindWeights(config, *ckpt));
    AddSummary(weights, &info);
    std::set<std::string> dtypes;
    for (const std::string& name : ckpt->Names()) {
      dtypes.insert(std::string(DTypeName(ckpt->Find(name)->info->dtype)));
    }
    for (const std::string& d : dtypes) info.dtypes += (info.dtypes.empty() ? "" : ",") + d;
    info.weight_bytes = static_cast<int64_t>(ckpt->total_bytes());
    info.skipped_tower_bytes = static_cast<int64_t>(ckpt->skipped_bytes());
    info.num_shards = static_cast<int32_t>(ckpt->num_shards());
    info.has_tokenizer = FileExists(dir + "/tokenizer.json");
    if (info.has_tokenizer) {
      // Validated like everything else `info` reports: a broken tokenizer is reported as broken.
      GANNET_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::FromFile(dir + "/tokenizer.json"));
      if (tok->vocab_size() > config.text.vocab_size) {
        return InvalidArgumentError(
            "{}/tokenizer.json has {} tokens but the model's vocab_size is {}", dir,
            tok->vocab_size(), config.text.vocab_size);
      }
    }
  }
  const model::TextConfig& c = config.text;
  info.num_parameters = model::CountParameters(config);
  if (dummy) info.weight_bytes = 2 * info.num_parameters;
  info.model_type = config.model_type;
  info.variant = model::ModelLabel(config);
  info.num_layers = c.num_hidden_layers;
  info.num_sliding_layers = c.NumLayersOfType(model::LayerType::kSliding);
  info.num_full_layers = c.NumLayersOfType(model::LayerType::kFull);
  info.num_kv_shared_layers = c.num_kv_shared_layers;
  info.hidden_size = c.hidden_size;
  info.has_vision = config.vision.has_value();
  info.image_token_id = config.image_token_id;
  info.vocab_size = c.vocab_size;
  info.max_position_embeddings = c.max_position_embeddings;
  info.sliding_window = c.sliding_window;
  info.num_attention_heads = c.num_attention_heads;
  info.num_kv_heads = c.num_key_value_heads;
  info.num_full_kv_heads = c.FullNumKvHeads();
  info.head_dim = c.head_dim;
  info.full_head_dim = c.global_head_dim;
  info.num_experts = c.enable_moe_block ? c.num_experts : 0;
  info.top_k_experts = c.enable_moe_block ? c.top_k_experts : 0;
  if (config.kind == model::ModelKind::kTarget) {
    kv::PerGroup<int64_t> per_token = kv::KvBytesPerToken(runner::KvLayersOf(c), /*dtype_bytes=*/2);
    info.kv_bytes_per_token[0] = per_token[0];
    info.kv_bytes_per_token[1] = per_token[1];
  }
  return info;
}

}  // namespace gannet::engine
