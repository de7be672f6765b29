#include "lib/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "lib/common/status.h"

namespace gannet::tokenizer {
namespace {

using internal::JsonWhere;

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t begin, end;
  bool is_match;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::string pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void Split(std::vector<std::string_view>* pieces) const override {
    std::vector<std::string_view> out;
    out.reserve(pieces->size());
    std::vector<Span> spans;
    for (std::string_view piece : *pieces) {
      spans.clear();
      FindMatches(piece, &spans);
      if (invert_) {
        for (Span& s : spans) s.is_match = !s.is_match;
      }
      Apply(&spans);
      for (const Span& s : spans) {
        if (!s.is_match && s.end > s.begin) out.push_back(piece.substr(s.begin, s.end - s.begin));
      }
    }
    *pieces = std::move(out);
  }

 private:
  // Alternating match / non-match spans that cover `text` (regex find_iter of the escaped string).
  void FindMatches(std::string_view text, std::vector<Span>* spans) const {
    size_t prev = 0;
    for (size_t pos = text.find(pattern_); pos != std::string_view::npos;
         pos = text.find(pattern_, prev)) {
      if (pos != prev) spans->push_back({prev, pos, false});
      spans->push_back({pos, pos + pattern_.size(), true});
      prev = pos + pattern_.size();
    }
    if (prev != text.size() || text.empty()) spans->push_back({prev, text.size(), false});
  }

  // Rewrites spans per behavior; afterwards is_match marks spans to drop (as HF's "remove").
  void Apply(std::vector<Span>* spans) const {
    std::vector<Span> out;
    bool previous_match = false;
    switch (behavior_) {
      case SplitBehavior::kRemoved:
        return;  // matches are already flagged for removal
      case SplitBehavior::kIsolated:
        for (Span& s : *spans) s.is_match = false;
        return;
      case SplitBehavior::kMergedWithPrevious:
        for (const Span& s : *spans) {
          if (s.is_match && !previous_match && !out.empty()) {
            out.back().end = s.end;
          } else {
            out.push_back({s.begin, s.end, false});
          }
          previous_match = s.is_match;
        }
        break;
      case SplitBehavior::kMergedWithNext:
        for (auto it = spans->rbegin(); it != spans->rend(); ++it) {
          if (it->is_match && !previous_match && !out.empty()) {
            out.back().begin = it->begin;
          } else {
            out.push_back({it->begin, it->end, false});
          }
          previous_match = it->is_match;
        }
        std::reverse(out.begin(), out.end());
        break;
      case SplitBehavior::kContiguous:
        for (const Span& s : *spans) {
          if (s.is_match == previous_match && !out.empty()) {
            out.back().end = s.end;
          } else {
            out.push_back({s.begin, s.end, false});
          }
          previous_match = s.is_match;
        }
        break;
    }
    *spans = std::move(out);
  }

  bool Drops() const override { return behavior_ == SplitBehavior::kRemoved; }

  std::string pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void Split(std::vector<std::string_view>* pieces) const override {
    for (const auto& step : steps_) step->Split(pieces);
  }
  bool Drops() const override {
    for (const auto& step : steps_) {
      if (step->Drops()) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

absl::StatusOr<SplitBehavior> ParseBehavior(const Json& json, const JsonWhere& where) {
  GANNET_ASSIGN_OR_RETURN(std::string b, internal::GetString(json, "behavior", where));
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return where.Child("behavior").Error(fmt::format("unknown split behavior '{}'", b));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const Json& json,
                                                                const JsonWhere& where) {
  if (json.is_null()) return nullptr;
  GANNET_ASSIGN_OR_RETURN(std::string type, internal::GetType(json, where));
  if (type == "Split") {
    GANNET_ASSIGN_OR_RETURN(std::string pattern, internal::GetStringPattern(json, where));
    GANNET_ASSIGN_OR_RETURN(SplitBehavior behavior, ParseBehavior(json, where));
    GANNET_ASSIGN_OR_RETURN(bool invert, internal::GetBool(json, "invert", false, where));
    return std::make_unique<SplitPreTokenizer>(std::move(pattern), behavior, invert);
  }
  if (type == "Sequence") {
    const Json* list = json.Find("pretokenizers");
    JsonWhere lw = where.Child("pretokenizers");
    if (list == nullptr || !list->is_array()) return lw.Error("must be an array");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list->AsArray().size(); ++i) {
      GANNET_ASSIGN_OR_RETURN(auto step, ParsePreTokenizer(list->AsArray()[i], lw.Index(i)));
      if (step != nullptr) steps.push_back(std::move(step));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  return UnimplementedError("{}: {}: pre_tokenizer type '{}' is not supported", where.source,
                            where.path, type);
}

}  // namespace gannet::tokenizer
