// A model's own chat template (chat_template.jinja, or tokenizer_config.json's "chat_template"),
// run by a small, strict interpreter of the Jinja2 subset chat templates use. Debian packages no
// C++ Jinja implementation (minja and Jinja2Cpp are not in bookworm), hence our own;
// docs/chat-templates.md says what it covers and why.
//
// Covered: text with {{ }}, {% %} and {# #} and the `-` whitespace markers, rendered with Hugging
// Face's settings (trim_blocks, lstrip_blocks); if/elif/else, for (several targets, `if` filter,
// else, loop.index/index0/first/last/length/revindex/revindex0/previtem/nextitem), set (names and
// namespace attributes), macro (defaults, keyword arguments), break/continue; literals (strings,
// numbers, true/false/none, lists, dicts); + - * / // % ~, comparisons, in / not in, and/or/not,
// `x if c else y`, attribute, index and slice access; the filters and tests chat templates use
// (jinja_eval.cc lists them), range, namespace, raise_exception and strftime_now; string methods
// (split, strip, startswith, ...) and dict methods (get, items, keys, values).
// Anything else (include, extends, call blocks, filters or tests not listed, ...) is an error
// naming the construct and the line: at Parse when it is syntax, at Render when it is a name.
//
// Thread-safe: a parsed template is immutable; Render may run on many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/json.h"

namespace gannet::tokenizer {

namespace jinja {
struct Node;
}

class JinjaTemplate {
 public:
  // InvalidArgument for a syntax error, Unimplemented for a construct outside the subset; both
  // name the line.
  static absl::StatusOr<JinjaTemplate> Parse(std::string_view source);

  // Renders with the members of `data` and `settings` as the template's variables. `data` holds
  // what callers write (messages, tools, documents): its strings are the caller's text. `settings`
  // holds the template's own parameters (bos_token, add_generation_prompt, enable_thinking, ...):
  // its strings count as the template's. InvalidArgument for a render error (a type error,
  // raise_exception(...), an unsupported filter) naming the line; ResourceExhausted when the
  // output passes max_output_bytes, macros nest deeper than 256 calls or the render takes more
  // than max_steps steps (statements, expressions, loop rounds and list items made).
  // data_ranges (optional) receives the byte ranges of the result that came from `data`'s
  // strings, sorted and disjoint: what Tokenizer::Encode's plain_ranges keeps from being read as
  // control tokens.
  static constexpr int64_t kDefaultMaxSteps = int64_t{1} << 24;
  absl::StatusOr<std::string> Render(const Json& data, const Json& settings,
                                     size_t max_output_bytes,
                                     std::vector<std::pair<size_t, size_t>>* data_ranges,
                                     int64_t max_steps = kDefaultMaxSteps) const;

  const std::string& source() const { return *source_; }

 private:
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Node>>> body_;
};

}  // namespace gannet::tokenizer
