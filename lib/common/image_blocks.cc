#include "lib/common/image_blocks.h"

#include <algorithm>

#include "lib/common/hash.h"
#include "lib/common/status.h"

namespace gannet {

absl::Status CheckImageBlocks(std::span<const ImageBlock> blocks, int64_t prompt_len) {
  int64_t prev_end = 0;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const ImageBlock& b = blocks[k];
    if (b.begin < 0 || b.end <= b.begin || b.end > prompt_len) {
      return InvalidArgumentError(
          "image block {} covers positions [{}, {}), not a non-empty range inside the {}-token "
          "prompt",
          k, b.begin, b.end, prompt_len);
    }
    // Adjacent blocks are refused too: HF forms blocks from runs of image tokens, so two
    // touching blocks would be one block there (images are framed by text tokens anyway).
    if (k > 0 && b.begin <= prev_end) {
      return InvalidArgumentError(
          "image block {} starts at {}, not after the previous block's end ({}): blocks must be "
          "in position order with text between them",
          k, b.begin, prev_end);
    }
    prev_end = b.end;
  }
  return absl::OkStatus();
}

std::vector<int32_t> ImageBlockIds(std::span<const ImageBlock> blocks, int64_t len) {
  if (blocks.empty()) return {};
  std::vector<int32_t> ids(static_cast<size_t>(len), kTextBlock);
  for (size_t k = 0; k < blocks.size(); ++k) {
    const int64_t e = std::min(blocks[k].end, len);
    for (int64_t p = std::max<int64_t>(0, blocks[k].begin); p < e; ++p) {
      ids[p] = static_cast<int32_t>(k);
    }
  }
  return ids;
}

const ImageBlock* ImageBlockAt(std::span<const ImageBlock> blocks, int64_t p) {
  // Blocks are sorted and disjoint (CheckImageBlocks): the first ending after p is the candidate.
  auto it = std::upper_bound(blocks.begin(), blocks.end(), p,
                             [](int64_t pos, const ImageBlock& b) { return pos < b.end; });
  return it != blocks.end() && it->begin <= p ? &*it : nullptr;
}

std::vector<uint64_t> ImagePageSalts(std::span<const ImageBlock> blocks, int64_t page_size,
                                     int64_t num_pages) {
  if (blocks.empty()) return {};
  std::vector<uint64_t> salts(static_cast<size_t>(num_pages), 0);
  for (const ImageBlock& b : blocks) {
    for (int64_t page = b.begin / page_size; page < num_pages && page * page_size < b.end; ++page) {
      const int64_t lo = std::max(b.begin, page * page_size) - page * page_size;
      const int64_t hi = std::min(b.end, (page + 1) * page_size) - page * page_size;
      // The extent matters as well as the hash: the same picture shifted within the page is
      // other KV. Never 0, so a salted page never keys like a text page.
      uint64_t s = SplitMix64(salts[page] ^ b.content_hash);
      s = SplitMix64(s ^ (static_cast<uint64_t>(lo) << 32 | static_cast<uint64_t>(hi)));
      salts[page] = s == 0 ? 1 : s;
    }
  }
  return salts;
}

}  // namespace gannet
