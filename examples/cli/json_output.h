// The CLI's --json output: one JSON object (one line) per request, per `gannet info` and per
// `gannet tokenize`, written with the project's JSON module (lib/common/json.h).
#pragma once

#include <string>
#include <vector>

#include "examples/cli/session.h"
#include "gannet/gannet.h"

namespace gannet_cli {

// {"text", "thinking", "tokens", "finish", ["logprobs"], "prompt_tokens", "cached_prompt_tokens",
//  "generated_tokens", ["draft_tokens", "accepted_draft_tokens"], "ttft_ms", "tpot_ms",
//  "total_ms", "tokens_per_s", ["load_s"], ["error": {"status", "message"}]}. load_s < 0 leaves
// it out; logprobs only with `with_logprobs`. Non-finite numbers are null.
std::string RequestJson(const RunResult& r, double load_seconds, bool with_logprobs);

// Every field of gannet_model_info_t, plus "model" (the folder or dummy name).
std::string ModelInfoJson(const std::string& model, const gannet_model_info_t& info);

// {"ids": [...]} and, with pieces, "pieces": [...] (each token's text alone; bytes that are not
// valid UTF-8 on their own become U+FFFD).
std::string TokensJson(const std::vector<int32_t>& ids, const std::vector<std::string>* pieces);

// Bytes that are not valid UTF-8 replaced by U+FFFD (JSON text must be UTF-8).
std::string ValidUtf8(const std::string& s);

}  // namespace gannet_cli
