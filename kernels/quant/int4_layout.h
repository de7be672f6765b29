// The device layout of a W4A16 int4 weight (docs/int4-kernels.md): what the loader's canonical form
// (gannet::WeightFormat {kI4 | kU4 + zero point, kGroup, 32/64/128 or K}: bytes [N, K/2], element k
// in byte k/2, low nibble first; scales and zero points [N, K/group]) becomes at load time
// (Int4Repack, int4_repack.h) so that the kernels (int4_linear.h) read it with one 16-byte load per
// lane and dequantize it straight into mma.sync operand registers. Plain C++ (host and tests).
//
// Tiles. Rows are padded to a multiple of 16 (n_pad) and cut into row blocks of 16; K (a multiple
// of 64) into tiles of 64. A tile (16 rows x 64 k = 512 bytes) is stored contiguously, tiles in
// (row block, k tile) order, so a warp that walks one row block along K streams contiguous memory.
// Lane l of a warp (g = l / 4, t = l % 4) owns bytes [16 l, 16 l + 16) of a tile: one 32-bit word
// per k-step s (16 k each, s = 0..3), holding exactly its m16n8k16 A-fragment elements of that
// step: nibble j (bits 4j..4j+3) of word s is row g + 8 (p & 1), column 16 s + 2 t + 8 (p >> 1) + e
// with p = j % 4, e = j / 4. So (word >> 4p) & 0x000F000F puts register a_p's two elements in the
// two 16-bit halves, where an OR with an exponent pattern turns them into f16/bf16 (1024 + u or
// 128 + u) and one subtraction gives the exact integer u - zero point.
//
// Nibbles are stored unsigned: u = q + 8 for kI4 (the sign bit flipped; the zero point is then 8
// everywhere), u = q for kU4 (its own zero points). Padding rows hold zero values.
//
// Scales (and kU4 zero points) are stored per (row block, group) as 8 pairs: pair g is the scales
// of rows g and g + 8, so the lanes of one g read both of theirs with one 4-byte (f32: 8-byte) load
// and a warp's 32 bytes are one sector: [n_pad / 16][groups][8][2] of the scale type (zero points:
// bytes). The values are the canonical ones, unchanged.
#pragma once

#include <cstdint>

#include "kernels/common/dtype.h"

namespace gannet::kernels {

inline constexpr int kInt4RowBlock = 16;    // rows of a tile (the MMA's M)
inline constexpr int kInt4TileK = 64;       // k of a tile
inline constexpr int kInt4TileBytes = 512;  // 16 x 64 nibbles: 32 lanes x 16 bytes
inline constexpr int kInt4SignedZero = 8;   // the stored zero of kI4 (u = q + 8)

struct Int4Layout {
  int64_t n = 0;            // output rows
  int64_t k = 0;            // input columns (a multiple of kInt4TileK)
  int64_t n_pad = 0;        // n rounded up to kInt4RowBlock
  int group = 0;            // input elements per scale (k for per-channel)
  bool zero_point = false;  // kU4 with zero points; else kI4
  DType scale = DType::kBF16;

  int64_t groups() const { return group > 0 ? k / group : 0; }
  int64_t row_blocks() const { return n_pad / kInt4RowBlock; }
  int64_t k_tiles() const { return k / kInt4TileK; }
  int64_t packed_bytes() const { return n_pad * k / 2; }
  int64_t scale_bytes() const { return n_pad * groups() * (DTypeBits(scale) / 8); }
  int64_t zero_point_bytes() const { return zero_point ? n_pad * groups() : 0; }
};

// Rows [row0, row0 + rows) of a weight in the device form, row0 a multiple of kInt4RowBlock: a
// layout of its own whose tiles, scales and zero points start at these byte offsets of the
// whole weight's (row blocks are stored one after the other in each). The CUDA backend
// dequantizes a large weight a slice of rows at a time.
struct Int4RowSlice {
  Int4Layout layout;
  int64_t packed_offset = 0;
  int64_t scale_offset = 0;
  int64_t zero_point_offset = 0;
};
inline Int4RowSlice Int4RowsOf(const Int4Layout& l, int64_t row0, int64_t rows) {
  Int4RowSlice s;
  s.layout = l;
  s.layout.n = rows;
  s.layout.n_pad = (rows + kInt4RowBlock - 1) / kInt4RowBlock * kInt4RowBlock;
  const int64_t blocks = row0 / kInt4RowBlock;
  s.packed_offset = blocks * l.k_tiles() * kInt4TileBytes;
  s.scale_offset = blocks * l.groups() * kInt4RowBlock * (DTypeBits(l.scale) / 8);
  s.zero_point_offset = l.zero_point ? blocks * l.groups() * kInt4RowBlock : 0;
  return s;
}

}  // namespace gannet::kernels
