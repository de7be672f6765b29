// Typed field access for the tokenizer.json parsers, with errors that name the file and the
// JSON path of the offending field ("tokenizer.json: model.merges[12]: ..."). Internal to
// lib/tokenizer. Stateless helpers; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/common/json.h"

namespace gannet::tokenizer::internal {

// Where a JSON value sits: the file name for messages and the path inside the document.
struct JsonWhere {
  std::string_view source;
  std::string path;

  JsonWhere Child(std::string_view key) const;
  JsonWhere Index(size_t i) const;
  absl::Status Error(std::string_view what) const;  // InvalidArgument "source: path: what"
};

absl::Status ExpectObject(const Json& v, const JsonWhere& where);
absl::StatusOr<std::string> GetString(const Json& obj, std::string_view key,
                                      const JsonWhere& where);
// Absent or null yields `fallback`.
absl::StatusOr<bool> GetBool(const Json& obj, std::string_view key, bool fallback,
                             const JsonWhere& where);
absl::StatusOr<int64_t> GetInt(const Json& obj, std::string_view key, const JsonWhere& where);
// The "type" field every normalizer/pre-tokenizer/decoder/processor object carries.
absl::StatusOr<std::string> GetType(const Json& obj, const JsonWhere& where);
// A {"String": "..."} pattern; {"Regex": ...} is reported as Unimplemented.
absl::StatusOr<std::string> GetStringPattern(const Json& obj, const JsonWhere& where);

// Bounds a normalizer's or a decoder's chain of rewrites from an untrusted tokenizer.json: at
// most kMaxRewriteSteps steps, and Replace steps that together grow a text at most
// kMaxRewriteGrowth-fold (the product of each step's ceil(|to| / |from|)). Without it a chain of
// doubling Replaces, applied to every added token and vocabulary entry at load, takes memory and
// time without bound. Real pipelines have a handful of steps and grow text at most ~3-fold.
inline constexpr int kMaxRewriteSteps = 64;
inline constexpr int64_t kMaxRewriteGrowth = 64;
class RewriteBudget {
 public:
  absl::Status AddStep(const JsonWhere& where);
  absl::Status AddReplace(std::string_view from, std::string_view to, const JsonWhere& where);

 private:
  int steps_ = 0;
  int64_t growth_ = 1;
};

}  // namespace gannet::tokenizer::internal
