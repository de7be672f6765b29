#include "lib/model/weight_summary.h"

#include <algorithm>
#include <set>
#include <vector>

#include "fmt/format.h"

namespace gannet::model {
namespace {

enum class Kind { kAttention, kMlp, kExperts, kEmbeddings, kOther };

std::string FormatOf(const WeightView& v) {
  if (!v.quantized()) return std::string(DTypeShortName(v.dtype));
  using P = WeightPiece::Packing;
  const WeightPiece* first = v.pieces.empty() ? nullptr : &v.pieces[0];
  const P packing = first == nullptr ? P::kCompressedTensors : first->packing;
  const char* source = packing == P::kAwq                             ? "AWQ"
                       : packing == P::kGptqV1                        ? "GPTQ"
                       : packing == P::kGptqV2                        ? "GPTQ v2"
                       : first != nullptr && first->global_multiplies ? "ModelOpt"
                                                                      : "compressed-tensors";
  return WeightFormatName(v.format) + ", " + source;
}

}  // namespace

WeightSummary SummarizeWeights(const ModelWeights& w) {
  WeightSummary s;
  struct Entry {
    const WeightView* view;
    Kind kind;
    const char* name;  // the kind's name in kept_plain (nullptr: not a Linear weight)
  };
  std::vector<Entry> entries = {
      {&w.embed_tokens, Kind::kEmbeddings, "embeddings"},
      {&w.lm_head, Kind::kEmbeddings, "lm_head"},
      {&w.final_norm, Kind::kOther, nullptr},
      {&w.embed_tokens_per_layer, Kind::kEmbeddings, "embeddings"},
      {&w.per_layer_model_projection, Kind::kEmbeddings, "ple_projection"},
      {&w.per_layer_projection_norm, Kind::kOther, nullptr},
      {&w.pre_projection, Kind::kOther, "drafter"},
      {&w.post_projection, Kind::kOther, "drafter"},
      {&w.centroids, Kind::kOther, "drafter"},
      {&w.token_ordering, Kind::kOther, nullptr}};
  for (const LayerWeights& l : w.layers) {
    for (const WeightView* v : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj}) {
      entries.push_back({v, Kind::kAttention, "attention"});
    }
    for (const WeightView* v : {&l.gate_proj, &l.up_proj, &l.down_proj}) {
      entries.push_back({v, Kind::kMlp, "mlp"});
    }
    entries.push_back({&l.experts_gate_up, Kind::kExperts, "experts"});
    entries.push_back({&l.experts_down, Kind::kExperts, "experts"});
    entries.push_back({&l.per_layer_input_gate, Kind::kEmbeddings, "ple_projection"});
    entries.push_back({&l.per_layer_projection, Kind::kEmbeddings, "ple_projection"});
    entries.push_back({&l.router_proj, Kind::kOther, "router"});
    for (const WeightView* v :
         {&l.input_layernorm, &l.post_attention_layernorm, &l.pre_feedforward_layernorm,
          &l.post_feedforward_layernorm, &l.q_norm, &l.k_norm, &l.layer_scalar,
          &l.post_per_layer_input_norm, &l.router_scale, &l.router_per_expert_scale,
          &l.pre_feedforward_layernorm_2, &l.post_feedforward_layernorm_1,
          &l.post_feedforward_layernorm_2}) {
      entries.push_back({v, Kind::kOther, nullptr});
    }
  }
  std::set<std::string> formats, plain_formats;
  std::vector<std::string> kept;
  bool any_quantized = false;
  for (const Entry& e : entries) {
    const WeightView& v = *e.view;
    if (!v.present()) continue;
    const int64_t bytes = static_cast<int64_t>(v.nbytes() + v.scale_bytes());
    switch (e.kind) {
      case Kind::kAttention:
        s.attention += bytes;
        break;
      case Kind::kMlp:
        s.mlp += bytes;
        break;
      case Kind::kExperts:
        s.experts += bytes;
        break;
      case Kind::kEmbeddings:
        s.embeddings += bytes;
        break;
      case Kind::kOther:
        s.other += bytes;
        break;
    }
    if (e.name == nullptr || v.shape.size() < 2) continue;  // vectors and index tables
    any_quantized |= v.quantized();
    (v.quantized() ? formats : plain_formats).insert(FormatOf(v));
    if (!v.quantized() && std::find(kept.begin(), kept.end(), e.name) == kept.end()) {
      kept.push_back(e.name);
    }
  }
  for (const std::string& f : formats) s.format += (s.format.empty() ? "" : ", ") + f;
  if (!any_quantized) {
    for (const std::string& f : plain_formats) s.format += (s.format.empty() ? "" : ", ") + f;
    return s;
  }
  for (const std::string& k : kept) s.kept_plain += (s.kept_plain.empty() ? "" : ",") + k;
  return s;
}

}  // namespace gannet::model
