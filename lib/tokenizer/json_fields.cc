#include "lib/tokenizer/json_fields.h"

#include <algorithm>

#include "lib/common/status.h"

namespace gannet::tokenizer::internal {

JsonWhere JsonWhere::Child(std::string_view key) const {
  return {source, path.empty() ? std::string(key) : path + "." + std::string(key)};
}

JsonWhere JsonWhere::Index(size_t i) const { return {source, fmt::format("{}[{}]", path, i)}; }

absl::Status JsonWhere::Error(std::string_view what) const {
  return InvalidArgumentError("{}: {}: {}", source, path.empty() ? "(root)" : path, what);
}

absl::Status ExpectObject(const Json& v, const JsonWhere& where) {
  if (v.is_object()) return absl::OkStatus();
  return where.Error(fmt::format("must be an object, got {}", Json::TypeName(v.type())));
}

absl::StatusOr<std::string> GetString(const Json& obj, std::string_view key,
                                      const JsonWhere& where) {
  const Json* v = obj.Find(key);
  if (v == nullptr) return where.Child(key).Error("missing");
  if (!v->is_string()) {
    return where.Child(key).Error(
        fmt::format("must be a string, got {}", Json::TypeName(v->type())));
  }
  return v->AsString();
}

absl::StatusOr<bool> GetBool(const Json& obj, std::string_view key, bool fallback,
                             const JsonWhere& where) {
  const Json* v = obj.Find(key);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_bool()) {
    return where.Child(key).Error(
        fmt::format("must be true or false, got {}", Json::TypeName(v->type())));
  }
  return v->AsBool();
}

absl::StatusOr<int64_t> GetInt(const Json& obj, std::string_view key, const JsonWhere& where) {
  const Json* v = obj.Find(key);
  if (v == nullptr) return where.Child(key).Error("missing");
  if (!v->is_int()) {
    return where.Child(key).Error(
        fmt::format("must be an integer, got {}", Json::TypeName(v->type())));
  }
  return v->AsInt();
}

absl::StatusOr<std::string> GetType(const Json& obj, const JsonWhere& where) {
  GANNET_RETURN_IF_ERROR(ExpectObject(obj, where));
  return GetString(obj, "type", where);
}

absl::StatusOr<std::string> GetStringPattern(const Json& obj, const JsonWhere& where) {
  const Json* p = obj.Find("pattern");
  JsonWhere pw = where.Child("pattern");
  if (p == nullptr) return pw.Error("missing");
  GANNET_RETURN_IF_ERROR(ExpectObject(*p, pw));
  if (p->Find("Regex") != nullptr) {
    return UnimplementedError("{}: {}: regex patterns are not supported (only {{\"String\": ...}})",
                              where.source, pw.path);
  }
  GANNET_ASSIGN_OR_RETURN(std::string s, GetString(*p, "String", pw));
  if (s.empty()) return pw.Error("empty pattern");
  return s;
}

absl::Status RewriteBudget::AddStep(const JsonWhere& where) {
  if (++steps_ > kMaxRewriteSteps) {
    return where.Error(fmt::format("more than {} steps in one chain", kMaxRewriteSteps));
  }
  return absl::OkStatus();
}

absl::Status RewriteBudget::AddReplace(std::string_view from, std::string_view to,
                                       const JsonWhere& where) {
  GANNET_RETURN_IF_ERROR(AddStep(where));
  // from is never empty (GetStringPattern); growth_ stays <= kMaxRewriteGrowth, so no overflow.
  const int64_t step = std::max<int64_t>(
      1, (static_cast<int64_t>(to.size()) + static_cast<int64_t>(from.size()) - 1) /
             static_cast<int64_t>(from.size()));
  if (step > kMaxRewriteGrowth / growth_) {
    return where.Error(
        fmt::format("the Replace steps would grow a text more than {}-fold (this one by up to {}x)",
                    kMaxRewriteGrowth, step));
  }
  growth_ *= step;
  return absl::OkStatus();
}

}  // namespace gannet::tokenizer::internal
