// A small, deterministic Gemma-style tokenizer.json for tiny test checkpoints, generated in C++
// so a fresh machine without Python can build one. Same structure as the real Gemma-4 file (and
// as tests/data/tokenizer/parity_tokenizer.json): BPE with byte_fallback and fuse_unk, normalizer
// Replace(" " -> "▁"), pre-tokenizer Split(" ", MergedWithPrevious), decoder
// Sequence[Replace("▁" -> " "), ByteFallback, Fuse], post-processor "<bos> $A".
//
// Layout: every Gemma-4 special token below vocab_size at its real id (docs/gemma4-model.md
// §5: <pad> 0 … <turn|> 106, and <|image> 255999 … when the vocabulary is that large), <unusedN>
// on the other ids below 107, "\n" at 107, the 256 byte tokens <0x00>..<0xFF> at 108..363, "▁",
// "\t" and the printable ASCII characters, then a few dozen merges of common English pieces
// ("▁the", "ing", "ation", ...) so ordinary text encodes into multi-byte tokens; any remaining
// ids are <unusedN> placeholders (plain vocabulary entries that no text produces). HF tokenizers
// loads the output and encodes like our encoder (tests/tokenizer/tiny_tokenizer_test.cc).
//
// Pure function; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace gannet::tokenizer {

// InvalidArgument unless 512 <= vocab_size <= 2^24.
absl::StatusOr<std::string> MakeTinyTokenizerJson(int vocab_size);

}  // namespace gannet::tokenizer
