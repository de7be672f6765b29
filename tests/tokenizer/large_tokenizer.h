// A synthetic tokenizer.json of Gemma-4's size for memory tests: a valid BPE file (every merge's
// parts and result are in the vocabulary) with `vocab_size` tokens, about `merges` merges and
// `added_tokens` added tokens, written indented as HF tokenizers writes it (merges as
// ["a", "b"] pairs over four lines), so that 262144 tokens and ~515k merges come to ~32 MB like
// the real file. Deterministic.
#pragma once

#include <string>

namespace gannet::tokenizer::testing {

struct LargeTokenizerSpec {
  int vocab_size = 262144;
  int merges = 514906;
  int added_tokens = 6000;
};

std::string MakeLargeTokenizerJson(const LargeTokenizerSpec& spec = {});

}  // namespace gannet::tokenizer::testing
