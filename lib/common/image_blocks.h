// Image blocks of a prompt: runs of positions whose tokens stand for one image's soft tokens.
//
// Gemma-4 models whose text config says use_bidirectional_attention = "vision" let the tokens of
// one image see each other in both directions during prefill (docs/vision.md, "Bidirectional
// attention over image blocks"). Everything below the engine needs only two facts about such a
// run: where it is ([begin, end) positions) and what it shows (a 64-bit hash of the image
// content, so that KV computed for one picture is never reused for another: every soft token has
// the same token id). The k-th block of a prompt (in position order) has block id k; text
// positions have block id kTextBlock.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"

namespace gannet {

inline constexpr int32_t kTextBlock = -1;

struct ImageBlock {
  int64_t begin = 0;  // first position of the block
  int64_t end = 0;    // one past its last position
  uint64_t content_hash = 0;
  int64_t size() const { return end - begin; }
};

// InvalidArgument unless the blocks are non-empty, inside [0, prompt_len), in increasing position
// order and separated by at least one text position.
absl::Status CheckImageBlocks(std::span<const ImageBlock> blocks, int64_t prompt_len);

// Block id of every position in [0, len): the block's index, or kTextBlock. Empty when there are
// no blocks (every position is text), so text-only requests carry nothing.
std::vector<int32_t> ImageBlockIds(std::span<const ImageBlock> blocks, int64_t len);

// The block containing position p, or nullptr.
const ImageBlock* ImageBlockAt(std::span<const ImageBlock> blocks, int64_t p);

// Per KV page of `page_size` positions, for the first `num_pages` pages: 0 when the page holds
// text only, else a mix of the content hash and in-page extent of every block overlapping it. The
// prefix cache folds it into the page's key (lib/kv/prefix_cache.h), so two prompts with the same
// token ids share an image page only when the same images sit at the same positions. Empty when
// there are no blocks.
std::vector<uint64_t> ImagePageSalts(std::span<const ImageBlock> blocks, int64_t page_size,
                                     int64_t num_pages);

}  // namespace gannet
