// What `gannet info` shows about a checkpoint folder, read from config.json and the safetensors
// headers only (no tensor data is touched), or about a "dummy:<variant>" model (its real geometry,
// bf16 weights that the engine would generate).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/model/config.h"

namespace gannet::engine {

struct ModelInfo {
  std::string model_type;
  std::string variant;
  std::string dtypes;
  int64_t num_parameters = 0;
  int64_t weight_bytes = 0;
  int64_t skipped_tower_bytes = 0;
  int32_t num_shards = 0;
  bool has_tokenizer = false;
  int32_t num_layers = 0, num_sliding_layers = 0, num_full_layers = 0, num_kv_shared_layers = 0;
  int64_t hidden_size = 0, vocab_size = 0, max_position_embeddings = 0;
  int32_t sliding_window = 0, num_attention_heads = 0, num_kv_heads = 0, num_full_kv_heads = 0;
  int32_t head_dim = 0, full_head_dim = 0, num_experts = 0, top_k_experts = 0;
  int64_t kv_bytes_per_token[2] = {0, 0};  // sliding, full (bf16)
  bool has_vision = false;                 // config.json has a vision_config
  int32_t image_token_id = -1;             // the image placeholder token (<|image|>)
  // How the weights are stored (model/weight_summary.h).
  std::string weight_format, kept_plain;
  int64_t bytes_attention = 0, bytes_mlp = 0, bytes_experts = 0, bytes_embeddings = 0,
          bytes_other = 0;
};

absl::StatusOr<ModelInfo> ReadModelInfo(const std::string& model_dir);

}  // namespace gannet::engine
