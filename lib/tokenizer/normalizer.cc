#include "lib/tokenizer/normalizer.h"

#include <utility>
#include <vector>

#include "lib/common/status.h"
#include "lib/tokenizer/unicode_text.h"

namespace gannet::tokenizer {
namespace {

using internal::JsonWhere;

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string from, std::string to)
      : from_(std::move(from)), to_(std::move(to)) {}
  void Normalize(std::string* text) const override {
    size_t pos = text->find(from_);
    if (pos == std::string::npos) return;
    std::string out;
    out.reserve(text->size() + text->size() / 4);
    size_t start = 0;
    for (; pos != std::string::npos; pos = text->find(from_, start)) {
      out.append(*text, start, pos - start);
      out.append(to_);
      start = pos + from_.size();
    }
    out.append(*text, start, std::string::npos);
    *text = std::move(out);
  }
  int64_t MaxShrink() const override {
    if (to_.size() >= from_.size()) return 1;
    return to_.empty() ? 0 : static_cast<int64_t>((from_.size() + to_.size() - 1) / to_.size());
  }

 private:
  std::string from_, to_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void Normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);
  }
  int64_t MaxShrink() const override { return 1; }

 private:
  std::string prefix_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(std::string* text) const override {
    std::string_view s = *text;
    size_t len;
    if (left_) {
      while (!s.empty() && IsUnicodeWhitespace(NextCodePoint(s, &len))) s.remove_prefix(len);
    }
    if (right_) {
      while (!s.empty() && IsUnicodeWhitespace(LastCodePoint(s, &len))) s.remove_suffix(len);
    }
    if (s.size() != text->size()) *text = std::string(s);
  }
  int64_t MaxShrink() const override { return left_ || right_ ? 0 : 1; }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void Normalize(std::string* text) const override {
    for (const auto& step : steps_) step->Normalize(text);
  }
  int64_t MaxShrink() const override {
    int64_t f = 1;
    for (const auto& step : steps_) {
      const int64_t g = step->MaxShrink();
      if (g == 0 || __builtin_mul_overflow(f, g, &f)) return 0;
    }
    return f;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

absl::StatusOr<std::unique_ptr<Normalizer>> Parse(const Json& json, const JsonWhere& where,
                                                  internal::RewriteBudget* budget) {
  if (json.is_null()) return nullptr;
  GANNET_ASSIGN_OR_RETURN(std::string type, internal::GetType(json, where));
  if (type == "Replace") {
    GANNET_ASSIGN_OR_RETURN(std::string from, internal::GetStringPattern(json, where));
    GANNET_ASSIGN_OR_RETURN(std::string to, internal::GetString(json, "content", where));
    GANNET_RETURN_IF_ERROR(budget->AddReplace(from, to, where));
    return std::make_unique<ReplaceNormalizer>(std::move(from), std::move(to));
  }
  if (type != "Sequence") GANNET_RETURN_IF_ERROR(budget->AddStep(where));
  if (type == "Prepend") {
    GANNET_ASSIGN_OR_RETURN(std::string prefix, internal::GetString(json, "prepend", where));
    return std::make_unique<PrependNormalizer>(std::move(prefix));
  }
  if (type == "Strip") {
    GANNET_ASSIGN_OR_RETURN(bool left, internal::GetBool(json, "strip_left", false, where));
    GANNET_ASSIGN_OR_RETURN(bool right, internal::GetBool(json, "strip_right", false, where));
    return std::make_unique<StripNormalizer>(left, right);
  }
  if (type == "Sequence") {
    const Json* list = json.Find("normalizers");
    JsonWhere lw = where.Child("normalizers");
    if (list == nullptr || !list->is_array()) return lw.Error("must be an array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list->AsArray().size(); ++i) {
      GANNET_ASSIGN_OR_RETURN(auto step, Parse(list->AsArray()[i], lw.Index(i), budget));
      if (step != nullptr) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  return UnimplementedError("{}: {}: normalizer type '{}' is not supported", where.source,
                            where.path, type);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const Json& json,
                                                            const JsonWhere& where) {
  internal::RewriteBudget budget;
  return Parse(json, where, &budget);
}

}  // namespace gannet::tokenizer
