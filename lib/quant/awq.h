// AWQ int4 checkpoints (config.json `quantization_config` with quant_method "awq", AutoAWQ's
// "gemm" packing): the strict config reader and the conversion of one module's tensors into
// gannet's canonical int4 form (lib/quant/int4.h). The config shares GptqConfig (gptq.h): AWQ is
// always asymmetric, never act-ordered, and its zero points are stored as they are.
//
// Module weight [n, k] (docs/quantized-formats.md):
//   qweight int32 [k, n/8]   8 outputs per word, interleaved: output n of input k is nibble
//                            kAwqNibbleOfColumn[n % 8] (bits 4 * that) of word (k, n/8)
//   qzeros  int32 [G, n/8]   the same interleaving, zero points as they are (0..15)
//   scales  f16 [G, n]       G = k / group_size
//   value   (q - zero) * scale
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/common/json.h"
#include "lib/quant/gptq.h"

namespace gannet::quant {

// AutoAWQ packs the 8 outputs of a word in the order 0, 2, 4, 6, 1, 3, 5, 7 (nibble i holds
// output kAwqColumnOfNibble[i]), which its GEMM kernel's dequantization wants; so output c of a
// word sits in nibble kAwqNibbleOfColumn[c].
inline constexpr int kAwqColumnOfNibble[8] = {0, 2, 4, 6, 1, 3, 5, 7};
inline constexpr int kAwqNibbleOfColumn[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// Parses a quant_method "awq" quantization_config (AutoAWQ's or transformers' AwqConfig);
// `source` prefixes errors. version "gemm" loads; "gemv", "gemv_fast", "exllama", "marlin",
// "ipex" are other packings: Unimplemented. zero_point false, bits other than 4 and unknown
// fields too.
absl::StatusOr<GptqConfig> ParseAwqConfig(const Json& q, std::string_view source);

// AWQ module -> canonical kU4: packed [n, k/2], scales [n, G], zeros [n, G]. DataLoss naming the
// module for a non-finite scale.
absl::Status AwqToCanonical(const ZpInt4Module& m, const WeightFormat& f, uint8_t* packed,
                            void* scales, uint8_t* zeros);

}  // namespace gannet::quant
