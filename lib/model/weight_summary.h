// What a model's weights are stored as, for `gannet info` (gannet_model_info_t): the format of
// the matrices, the bytes by layer kind (packed int4 counted with its scales and zero points),
// and, for a quantized checkpoint, the kinds of matrices it keeps in their plain type.
#pragma once

#include <cstdint>
#include <string>

#include "lib/model/weights.h"

namespace gannet::model {

struct WeightSummary {
  std::string format;  // "bf16", or "int4 g32 (bf16 scales), compressed-tensors" (comma-joined)
  int64_t attention = 0, mlp = 0, experts = 0, embeddings = 0, other = 0;  // bytes
  // Comma-joined kinds kept plain in a quantized checkpoint ("embeddings,lm_head,router"); ""
  // for a plain one.
  std::string kept_plain;
};

WeightSummary SummarizeWeights(const ModelWeights& weights);

}  // namespace gannet::model
