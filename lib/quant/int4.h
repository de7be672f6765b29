// The canonical in-memory int4 weight (docs/quantized-formats.md) and the conversions between it
// and compressed-tensors' `pack-quantized` int32 words.
//
// Canonical form of a weight [N, K] with WeightFormat{kI4 | kU4, kGroup, group_size g, scale}:
//   packed   uint8 [N, K/2]: row n, element k in byte k/2, the low nibble holding even k;
//            kI4: two's complement (-8..7); kU4: 0..15 with a zero point
//   scales   [N, K/g] in the scale type as stored (bf16/f16/f32); per-channel is g = K
//   zeros    uint8 [N, K/g] (kU4 only), one zero point (0..15) per byte
//   value    (q - zp) * scale, zp = 0 for kI4
// Every backend (the CPU reference here, the CUDA kernels) reads exactly these bytes.
#pragma once

#include <cstdint>

#include "lib/common/dtype.h"

namespace gannet::quant {

// Scale i of a scale array of type t (bf16/f16/f32), as f32.
float ScaleToF32(const void* scales, DType t, int64_t i);
// Stores v (already representable) as element i of a scale array of type t.
void StoreScale(void* scales, DType t, int64_t i, float v);

// The values of one canonical row of k elements (k even; f.group_size divides k) into out.
// `scales` / `zeros` point at the row's first group.
void DequantizeInt4Row(const WeightFormat& f, const uint8_t* packed_row, const void* scales,
                       const uint8_t* zeros, int64_t k, float* out);

// compressed-tensors stores int4 values offset by +8 (0..15) in little-endian int32 words, element
// i of a row at bits 4*(i%8) of word i/8, so on a little-endian host a row's word bytes are the
// canonical bytes but for the offset. Copies `rows` rows of k elements from rows of
// `words_per_row` words into canonical rows of k/2 bytes: signed (kI4) flips each nibble's top bit
// (q + 8 -> q in two's complement); unsigned (kU4) keeps them (the zero point carries the +8).
void CtWordsToCanonical(const uint8_t* words, int64_t rows, int64_t words_per_row, int64_t k,
                        bool to_signed, uint8_t* out);
// The inverse: canonical rows to int32 word rows (nibbles past k are 0, as compressed-tensors
// pads them).
void CanonicalToCtWords(const uint8_t* packed, int64_t rows, int64_t k, bool from_signed,
                        int64_t words_per_row, uint8_t* words);

// compressed-tensors packs asymmetric zero points along the output rows: an int32 tensor
// [ceil(rows/8), groups] whose word (r/8, g) holds zp(r, g) + 8 at bits 4*(r%8). To one byte per
// zero point, [rows, groups], 0..15.
void CtZeroPointsToCanonical(const uint8_t* words, int64_t rows, int64_t groups, uint8_t* out);
void CanonicalZeroPointsToCt(const uint8_t* zeros, int64_t rows, int64_t groups, uint8_t* words);

// Round-to-nearest quantization of `rows` f32 rows of k elements into the canonical form, as
// compressed-tensors' observer computes it: symmetric scale = amax / 7.5 (q = round(w / scale)
// clamped to -8..7); asymmetric (kU4) scale = (max - min) / 15 over [min(w, 0), max(w, 0)],
// zp = clamp(round(-min / scale), 0, 15), u = clamp(round(w / scale) + zp, 0, 15). Scales are
// rounded to f.scale first and quantization divides by the rounded scale. A zero scale (an
// all-zero group) becomes the smallest normal of the scale type.
void QuantizeInt4Rows(const WeightFormat& f, const float* w, int64_t rows, int64_t k,
                      uint8_t* packed, void* scales, uint8_t* zeros);

}  // namespace gannet::quant
