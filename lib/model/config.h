// Gemma-4 model configuration, parsed from a checkpoint folder's config.json.
//
// Three shapes of config.json are accepted (docs/gemma4-model.md §1):
//   model_type "gemma4"            multimodal wrapper; the decoder is under "text_config" and its
//                                  tensors under "model.language_model."
//   model_type "gemma4_text"       text-only; tensors under "model."
//   model_type "gemma4_assistant"  an MTP drafter; its decoder is under "text_config"
// Every field of the text config has HF's default. Parsing validates the config on its own
// (head counts, layer types, KV sharing, MoE fields, ...) and reports the first problem with the
// field's name. Plain value types: copy freely, no thread-safety concerns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/json.h"
#include "lib/quant/compressed_tensors.h"
#include "lib/quant/gptq.h"

namespace gannet::model {

enum class LayerType : uint8_t { kSliding, kFull };
std::string_view LayerTypeName(LayerType t);  // "sliding_attention" / "full_attention"

enum class RopeType : uint8_t { kDefault, kProportional };

struct RopeParams {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;
  double factor = 1.0;  // proportional only: divides every inverse frequency
};

// The decoder ("text_config" / gemma4_text). Field names follow config.json.
struct TextConfig {
  int64_t vocab_size = 262144;
  int64_t hidden_size = 2304;
  int64_t intermediate_size = 9216;
  int num_hidden_layers = 30;
  int num_attention_heads = 8;
  int num_key_value_heads = 4;
  int head_dim = 256;
  int global_head_dim = 512;
  int num_global_key_value_heads = 0;  // 0 = None
  std::string hidden_activation = "gelu_pytorch_tanh";
  int64_t max_position_embeddings = 131072;
  double rms_norm_eps = 1e-6;
  int pad_token_id = 0;
  std::vector<int> eos_token_ids = {1};
  int bos_token_id = 2;
  bool tie_word_embeddings = true;
  RopeParams rope_sliding = {RopeType::kDefault, 10000.0, 1.0, 1.0};
  RopeParams rope_full = {RopeType::kProportional, 1000000.0, 0.25, 1.0};
  bool attention_bias = false;
  int sliding_window = 512;
  std::vector<LayerType> layer_types;
  std::optional<double> final_logit_softcapping;
  std::string use_bidirectional_attention;  // "" (None), "vision" or "all"
  int64_t vocab_size_per_layer_input = 262144;
  int hidden_size_per_layer_input = 256;
  bool attention_k_eq_v = false;
  int num_kv_shared_layers = 0;
  bool enable_moe_block = false;
  bool use_double_wide_mlp = false;
  int num_experts = 0;  // 0 = None
  int top_k_experts = 0;
  int64_t moe_intermediate_size = 0;
  // Tensor-parallel expert sharding (lib/model/tp_shard.h): the experts one rank holds, a
  // contiguous block of rank * local_experts.. (0: every expert; never read from a checkpoint).
  int local_experts = 0;

  // ---- Derived geometry (valid after a successful parse) ----
  LayerType layer_type(int layer) const { return layer_types[layer]; }
  bool is_sliding(int layer) const { return layer_types[layer] == LayerType::kSliding; }
  int LayerHeadDim(int layer) const { return is_sliding(layer) ? head_dim : global_head_dim; }
  // KV heads of a layer: full layers use num_global_key_value_heads only with attention_k_eq_v.
  int LayerNumKvHeads(int layer) const;
  int FullNumKvHeads() const;
  // Full layers of k_eq_v models have no v_proj: V comes from the raw k_proj output.
  bool LayerKEqV(int layer) const { return attention_k_eq_v && !is_sliding(layer); }
  int FirstKvSharedLayer() const { return num_hidden_layers - num_kv_shared_layers; }
  // Experts whose weights a rank holds (all of them unless the experts are sharded).
  int HeldExperts() const { return local_experts > 0 ? local_experts : num_experts; }
  bool IsKvShared(int layer) const { return layer >= FirstKvSharedLayer(); }
  // The layer whose KV a layer reads: itself, or for a shared layer the last non-shared layer of
  // the same type. -1 if there is none (only possible for assistants, which read the target's).
  int KvDonor(int layer) const;
  int64_t LayerIntermediateSize(int layer) const;
  bool has_ple() const { return hidden_size_per_layer_input > 0; }
  int NumLayersOfType(LayerType t) const;
};

// The vision tower ("vision_config" / gemma4_vision, HF's Gemma4VisionConfig). Every field has
// HF's default, so a config.json that writes `{"model_type": "gemma4_vision"}` means the E2B/E4B
// tower (768 wide, 16 layers). docs/vision.md "Vision tower" gives the math these drive.
struct VisionConfig {
  int64_t hidden_size = 768;
  int64_t intermediate_size = 3072;
  int num_hidden_layers = 16;
  int num_attention_heads = 12;
  int num_key_value_heads = 12;
  int head_dim = 64;  // split in two halves: x and y of the 2-D RoPE; a multiple of 4
  std::string hidden_activation = "gelu_pytorch_tanh";
  double rms_norm_eps = 1e-6;
  double rope_theta = 100.0;  // rope_parameters.rope_theta; rope_type "axial" (or "default")
  int pooling_kernel_size = 3;
  int patch_size = 16;
  int64_t position_embedding_size = 10240;  // rows of each of the two position tables
  bool use_clipped_linears = false;         // E2B/E4B: clamp linears' inputs and outputs
  bool standardize = false;                 // 31B/26B-A4B: (x - std_bias) * std_scale

  int64_t patch_dim() const { return int64_t{3} * patch_size * patch_size; }  // 768 for 16
};

enum class ModelKind : uint8_t { kTarget, kAssistant };

// The Gemma-4 family member a config looks like, for reporting only: the forward pass is driven
// by the config's features, never by this name.
enum class Variant : uint8_t { kDense31B, kMoe26BA4B, kE4B, kE2B, kAssistant };
std::string_view VariantName(Variant v);

struct ModelConfig {
  ModelKind kind = ModelKind::kTarget;
  std::string model_type;          // as written in config.json
  std::string text_tensor_prefix;  // "model.language_model." or "model."
  TextConfig text;
  Variant variant = Variant::kDense31B;

  // Multimodal wrapper token ids (defaults when absent).
  int boi_token_id = 255999;
  int eoi_token_id = 258882;
  int image_token_id = 258880;
  int video_token_id = 258884;
  int boa_token_id = 256000;
  int eoa_token_id = 258883;
  int audio_token_id = 258881;
  bool has_vision_config = false;
  bool has_audio_config = false;
  // Parsed and validated when has_vision_config (a gemma4 wrapper with a non-null vision_config).
  std::optional<VisionConfig> vision;

  // Assistant (gemma4_assistant) fields.
  int64_t backbone_hidden_size = 1536;
  bool use_ordered_embeddings = false;
  int num_centroids = 2048;
  int centroid_intermediate_top_k = 32;

  // The end-of-generation ids: the wrapper's eos list if present, else the text config's.
  std::vector<int> eos_token_ids;

  // quantization_config.quant_method ("compressed-tensors" for a compression_config, "modelopt"
  // also for an hf_quant_config.json, "unknown" when the object names none); "" without one.
  // Quantized weights are refused when they are bound (model_format.h), except the
  // compressed-tensors schemes gannet runs, parsed strictly (lib/quant/compressed_tensors.h) into
  // `compressed_tensors` and bound by weights.h, and ModelOpt's NVFP4, read into the same form
  // (lib/quant/modelopt.h).
  std::string quantization_method;
  std::optional<quant::CtConfig> compressed_tensors;
  // quant_method "gptq" or "awq": parsed strictly (lib/quant/gptq.h, awq.h), bound by
  // gptq_weights.h.
  std::optional<quant::GptqConfig> gptq;
};

// What a config.json may hold, checked before anything is sized from it (a layer count of
// 2^31 must fail at once, not after allocating per-layer tables).
inline constexpr int64_t kMaxConfigJsonBytes = int64_t{4} << 20;
inline constexpr int64_t kMaxConfigJsonValues = 200'000;
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxHeadDim = 4096;
inline constexpr int64_t kMaxHidden = int64_t{1} << 17;
inline constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;
inline constexpr int64_t kMaxPositions = int64_t{1} << 24;
inline constexpr int64_t kMaxExperts = 4096;
inline constexpr int64_t kMaxEosIds = 64;

// Parses and validates. `source` names the file in error messages.
absl::StatusOr<ModelConfig> ParseModelConfig(const Json& root, std::string_view source);
absl::StatusOr<ModelConfig> ParseModelConfigText(std::string_view json_text,
                                                 std::string_view source);
// Reads model_dir/config.json; a GGUF file or another file given as model_dir is an error that
// names it (CheckModelPath, model_format.h).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

// Whether the image token ids (boi, image soft token, eoi) can serve images: all three distinct
// and inside the text vocabulary, with a vision config present. Not checked at parse: text-only
// checkpoints may keep HF's defaults (255999, ...) with a smaller vocabulary; whoever turns images
// on calls this first. InvalidArgument naming the id, FailedPrecondition without a vision config.
absl::Status CheckImageTokenIds(const ModelConfig& config);

// bf16(sqrt(hidden)) as HF applies it to bf16 embedding weights (docs/gemma4-model.md §2.2).
float EmbeddingScale(int64_t hidden_size);

}  // namespace gannet::model
