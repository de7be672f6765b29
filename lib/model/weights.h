// Typed views of a Gemma-4 checkpoint's tensors, per variant.
//
// ExpectedWeights(config) is the single description of what a checkpoint must contain: every
// tensor name, shape and kind for the config's variant (target or assistant). The binder checks a
// checkpoint against it; the tiny-checkpoint writer and the dummy (synthetic) loader generate
// exactly it; `gannet info` counts parameters from it. Views point into memory owned by someone
// else (the Checkpoint, which reads its tensors into memory, or a synthetic buffer) and must not
// outlive it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/dtype.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"

namespace gannet::model {

// How synthetic generators should fill a tensor (the real values are learned).
enum class WeightInit : uint8_t {
  kMatrix,         // random, scaled by 1/sqrt(fan_in)
  kEmbedding,      // random, unit scale
  kNorm,           // around 1
  kQkNorm,         // around head_dim^-1/4: with attention scale 1.0, trained q/k norms keep the
                   // attention logits O(1); plain ~1 weights make them ~sqrt(head_dim) and the
                   // model so ill-conditioned that fp32 rounding alone moves logits by 1e-3
  kLayerScalar,    // around 1, a little smaller
  kPositiveScale,  // positive, around 1 (router scales)
  kPermutation,    // a permutation of [0, n) (token_ordering)
};

// One checkpoint module a weight is gathered from, when the weight is not one plain tensor: a
// compressed-tensors int4 module (weight_packed words, weight_scale, weight_zero_point), or one
// expert's plain 2-D matrix of a per-expert MoE checkpoint. Its rows follow the previous piece's.
struct WeightPiece {
  std::string module;  // the checkpoint's module name, for errors
  int64_t rows = 0;
  DType dtype = DType::kBF16;  // plain pieces: the tensor's type
  const void* data = nullptr;  // plain: [rows, k]; int4: weight_packed int32 [rows, words_per_row]
  int64_t words_per_row = 0;
  const void* scales = nullptr;        // int4: weight_scale [rows, k / group] of format.scale
  const void* zero_points = nullptr;   // int4 asymmetric: int32 [ceil(rows / 8), k / group]
  const void* weight_shape = nullptr;  // int4: weight_shape [2] of weight_shape_dtype (I64/I32)
  DType weight_shape_dtype = DType::kI64;
  // How `data` and `zero_points` are packed: compressed-tensors' words (above), or a GPTQ / AWQ
  // module (gptq_weights.h): data = qweight, zero_points = qzeros, scales = scales [G, rows].
  enum class Packing : uint8_t { kCompressedTensors, kGptqV1, kGptqV2, kAwq };
  Packing packing = Packing::kCompressedTensors;
  const void* g_idx = nullptr;  // GPTQ: int32 [k], or null
  const void* bias = nullptr;   // GPTQ / AWQ: an optional [rows] bias of bias_dtype (must be 0)
  DType bias_dtype = DType::kF16;
  // FP8: `data` is the F8_E4M3 weight [rows, k]; `scales` weight_scale ([rows, 1] channel, one
  // value tensor, [ceil(rows/128), ceil(k/128)] blocks) of format.scale; input_scale (static
  // activations only) one value of input_scale_dtype.
  const void* input_scale = nullptr;
  DType input_scale_dtype = DType::kF32;
  // NVFP4: `data` is weight_packed (U8 [rows, k/2]), `scales` weight_scale (F8_E4M3 [rows, k/16]),
  // global_scale weight_global_scale (one f32) and input_scale input_global_scale (W4A4 only).
  // (ModelOpt's NVFP4: `data` is `weight`, global_scale weight_scale_2 and input_scale
  // input_scale, both multiplying where compressed-tensors' divide.)
  const void* global_scale = nullptr;
  DType global_scale_dtype = DType::kF32;
  bool global_multiplies = false;
};

// A weight in host memory, or a synthetic one: no data, generated on demand (by the backend, on
// its own device) from (seed, name, init) -- the "dummy" load format for real-size geometries.
struct WeightView {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  bool synthetic = false;
  uint64_t seed = 0;                      // synthetic only
  WeightInit init = WeightInit::kMatrix;  // synthetic only
  // A weight gathered from checkpoint modules (quantized_weights.h): `data` is null and the
  // backend's LoadWeight assembles the pieces. A quantized view's `format` is the checkpoint's
  // format (int4: the canonical form it becomes, lib/quant/int4.h; FP8: lib/quant/fp8.h), `dtype`
  // its element type (kI4 / kU4 / kF8E4M3).
  WeightFormat format = {};
  std::vector<WeightPiece> pieces = {};

  bool present() const { return data != nullptr || synthetic || !pieces.empty(); }
  bool quantized() const { return format.quantized(); }
  int64_t numel() const;
  // Bytes of the elements as the view holds them (packed int4: half a byte each), then of a
  // quantized view's scales and zero points in their canonical form, and what the view takes
  // once loaded: the elements in its format (a view quantized at load, dtype != format.elem,
  // holds dense values a backend quantizes: QuantizeAtLoad) plus the scales.
  uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * DTypeBits(dtype) / 8; }
  uint64_t scale_bytes() const;
  uint64_t stored_bytes() const {
    const DType e = format.quantized() ? format.elem : dtype;
    return static_cast<uint64_t>(numel()) * DTypeBits(e) / 8 + scale_bytes();
  }
  // Dense values (synthetic, or the checkpoint's bf16/f16/f32) that LoadWeight quantizes into
  // `format` (round to nearest, as `gannet quantize`).
  bool quantize_at_load() const { return format.quantized() && dtype != format.elem; }
  int64_t dim(int i) const { return shape[i]; }
};

// Weights of one decoder layer. Absent views (data == nullptr) are tensors the layer does not
// have: k/v/k_norm on KV-shared layers, v_proj on k_eq_v full layers, PLE and MoE tensors on
// variants without them.
struct LayerWeights {
  int index = 0;
  WeightView input_layernorm, post_attention_layernorm;              // [H]
  WeightView pre_feedforward_layernorm, post_feedforward_layernorm;  // [H]
  WeightView q_proj;                                                 // [n_q * d, H]
  WeightView q_norm;                                                 // [d]
  WeightView k_proj;                                                 // [n_kv * d, H]
  WeightView v_proj;                                                 // [n_kv * d, H]
  WeightView k_norm;                                                 // [d]
  WeightView o_proj;                                                 // [H, n_q * d]
  WeightView gate_proj, up_proj;                                     // [I, H]
  WeightView down_proj;                                              // [H, I]
  WeightView layer_scalar;                                           // [1]
  // PLE (E2B/E4B)
  WeightView per_layer_input_gate;       // [P, H]
  WeightView per_layer_projection;       // [H, P]
  WeightView post_per_layer_input_norm;  // [H]
  // MoE (26B-A4B)
  WeightView router_proj;              // [E, H]
  WeightView router_scale;             // [H]
  WeightView router_per_expert_scale;  // [E]
  WeightView experts_gate_up;          // [E, 2 * I_moe, H]  rows [0, I) gate, [I, 2I) up
  WeightView experts_down;             // [E, H, I_moe]
  WeightView pre_feedforward_layernorm_2, post_feedforward_layernorm_1;
  WeightView post_feedforward_layernorm_2;  // [H]
};

struct ModelWeights {
  WeightView embed_tokens;  // [V, H]; also the LM head when tied
  WeightView lm_head;       // [V, H] only when tie_word_embeddings is false
  WeightView final_norm;    // [H]
  // PLE globals
  WeightView embed_tokens_per_layer;      // [V_ple, N * P]
  WeightView per_layer_model_projection;  // [N * P, H]
  WeightView per_layer_projection_norm;   // [P]
  // Assistant (MTP drafter) extras
  WeightView pre_projection;   // [H_d, 2 * H_b]
  WeightView post_projection;  // [H_b, H_d]
  WeightView centroids;        // [C, H_d]
  WeightView token_ordering;   // [V] int64
  std::vector<LayerWeights> layers;

  // The LM head matrix: lm_head when untied, else embed_tokens.
  const WeightView& lm_head_matrix() const { return lm_head.present() ? lm_head : embed_tokens; }
};

struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  WeightInit init = WeightInit::kMatrix;
  bool is_index = false;  // integer tensor (token_ordering), else floating point
  int layer = -1;         // -1 for globals
  WeightView LayerWeights::*layer_slot = nullptr;
  WeightView ModelWeights::*global_slot = nullptr;
};

// Every tensor the config's checkpoint must hold, in a stable order.
std::vector<WeightSpec> ExpectedWeights(const ModelConfig& config);

// Names a checkpoint may carry that are not bound (ignored, never an error): the tied lm_head and
// the k/v tensors of KV-shared layers, which HF drops on load.
bool IsIgnorableExtraTensor(const ModelConfig& config, std::string_view name);

// Binds every expected tensor of the checkpoint, checking presence, shape and dtype. A missing,
// extra, mis-shaped or wrongly typed tensor is an error naming the tensor.
absl::StatusOr<ModelWeights> BindWeights(const ModelConfig& config, const Checkpoint& checkpoint);

// Synthetic weights for every expected tensor of the config (bf16 matrices and vectors, int64
// index tensors): nothing is read or allocated until a backend loads them.
ModelWeights SyntheticWeights(const ModelConfig& config, uint64_t seed);

// Every view of `w` (globals, then each layer's), present or not.
std::vector<const WeightView*> AllViews(const ModelWeights& w);

// Sum of elements over ExpectedWeights (the parameter count, tied head counted once).
int64_t CountParameters(const ModelConfig& config);
// Bytes of the tensors `weights` holds (present views, their own dtypes): a tensor-parallel
// rank's shard as much as a whole model.
int64_t ViewBytes(const ModelWeights& weights);

// Bytes of weights a decode step of `batch` tokens must read (bf16 tensors, int64 index tensors):
// every tensor in full except the per-layer-input table (the PLE of E2B/E4B: `batch` gathered
// rows), an untied input embedding (`batch` rows) and the experts (the expected number of distinct
// experts `batch` tokens route to, E * (1 - (1 - k/E)^batch) per layer, which assumes independent
// uniform routing: exact for random weights, an upper bound for a trained router's skew). The
// fraction of copy bandwidth a step reaches is measured against this, not against every weight.
double DecodeStepWeightBytes(const ModelConfig& config, int batch);
// The same for the tensors `weights` holds, each in its own storage (int4 views: half a byte an
// element plus their scales).
double DecodeStepWeightBytes(const ModelConfig& config, const ModelWeights& weights, int batch);

// Quantization at load (the engine's weight_dtype, the decode bench's --weight-dtype): marks the
// dense linear matrices of `weights` (q/k/v/o, gate/up/down, the PLE gate and projection; not the
// embeddings, LM head, router, PLE model projection or the 3-D experts, which `gannet quantize`
// leaves too) whose K the format's group divides as `format` (int4 only; group 0 = per
// channel; the scales in each matrix's own type, format.scale ignored). Their values stay where
// they are; LoadWeight quantizes them (WriteCanonicalInt4) as the offline `gannet quantize` would,
// so both give the same bytes. An already quantized checkpoint is an InvalidArgument naming a
// tensor. The CUDA backend fills synthetic views faster by repeating their first 16 rows
// (cuda_int4.cc: for speed measurements, not outputs).
absl::Status QuantizeAtLoad(ModelWeights* weights, const WeightFormat& format);

}  // namespace gannet::model
