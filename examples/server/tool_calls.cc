#include "examples/server/tool_calls.h"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

namespace gannet_server {
namespace {

using nlohmann::json;

constexpr std::string_view kQuote = "<|\"|>";
constexpr std::string_view kOpen = "<|tool_call>";
constexpr std::string_view kClose = "<tool_call|>";
constexpr int kMaxDepth = 64;

// A recursive-descent reader of Gemma-4's value syntax.
class ValueReader {
 public:
  explicit ValueReader(std::string_view s) : s_(s) {}

  bool Object(json* out, int depth) {  // after '{'
    *out = json::object();
    Space();
    if (Eat('}')) return true;
    while (true) {
      std::string key;
      if (!Key(&key)) return false;
      Space();
      if (!Eat(':')) return false;
      json v;
      if (!Value(&v, depth + 1)) return false;
      (*out)[key] = std::move(v);
      Space();
      if (Eat('}')) return true;
      if (!Eat(',')) return false;
      Space();
    }
  }
  bool AtEnd() {
    Space();
    return p_ == s_.size();
  }
  bool Eat(char c) {
    if (p_ < s_.size() && s_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  void Space() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }

 private:
  bool Key(std::string* key) {
    if (s_.substr(p_, kQuote.size()) == kQuote) return String(key);
    const size_t b = p_;
    while (p_ < s_.size() && s_[p_] != ':' && s_[p_] != ',' && s_[p_] != '{' && s_[p_] != '}' &&
           s_.substr(p_, kQuote.size()) != kQuote) {
      ++p_;
    }
    std::string_view k = s_.substr(b, p_ - b);
    while (!k.empty() && std::isspace(static_cast<unsigned char>(k.back()))) k.remove_suffix(1);
    if (k.empty()) return false;
    *key = std::string(k);
    return true;
  }
  bool String(std::string* out) {  // at <|"|>
    p_ += kQuote.size();
    const size_t end = s_.find(kQuote, p_);
    if (end == std::string_view::npos) return false;
    *out = std::string(s_.substr(p_, end - p_));
    p_ = end + kQuote.size();
    return true;
  }
  bool Value(json* out, int depth) {
    if (depth > kMaxDepth) return false;
    Space();
    if (p_ >= s_.size()) return false;
    if (s_.substr(p_, kQuote.size()) == kQuote) {
      std::string str;
      if (!String(&str)) return false;
      *out = std::move(str);
      return true;
    }
    if (Eat('{')) return Object(out, depth);
    if (Eat('[')) {
      *out = json::array();
      Space();
      if (Eat(']')) return true;
      while (true) {
        json v;
        if (!Value(&v, depth + 1)) return false;
        out->push_back(std::move(v));
        Space();
        if (Eat(']')) return true;
        if (!Eat(',')) return false;
      }
    }
    // A bare word up to the next separator: a number, true, false, null; else a string (the
    // model left the quotes out).
    const size_t b = p_;
    while (p_ < s_.size() && s_[p_] != ',' && s_[p_] != '}' && s_[p_] != ']' &&
           s_.substr(p_, kQuote.size()) != kQuote && s_[p_] != '{' && s_[p_] != '[') {
      ++p_;
    }
    std::string word(s_.substr(b, p_ - b));
    while (!word.empty() && std::isspace(static_cast<unsigned char>(word.back()))) word.pop_back();
    if (word.empty()) return false;
    if (word == "true" || word == "false") {
      *out = word == "true";
    } else if (word == "null" || word == "None") {
      *out = nullptr;
    } else {
      json num = json::parse(word, nullptr, false);
      *out = !num.is_discarded() && num.is_number() ? num : json(word);
    }
    return true;
  }

  std::string_view s_;
  size_t p_ = 0;
};

std::string NewCallId() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[48];
  std::snprintf(buf, sizeof(buf), "call_%08llx%08llx",
                static_cast<unsigned long long>(salt & 0xffffffffu),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return buf;
}

}  // namespace

std::optional<ToolCall> ParseToolCallBody(std::string_view body) {
  size_t b = 0;
  while (b < body.size() && std::isspace(static_cast<unsigned char>(body[b]))) ++b;
  body.remove_prefix(b);
  if (body.substr(0, 5) != "call:") return std::nullopt;
  body.remove_prefix(5);
  const size_t brace = body.find('{');
  if (brace == std::string_view::npos) return std::nullopt;
  std::string_view name = body.substr(0, brace);
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())))
    name.remove_suffix(1);
  if (name.empty()) return std::nullopt;
  for (char c : name) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '}' || c == ',' || c == ':') {
      return std::nullopt;
    }
  }
  ValueReader reader(body.substr(brace + 1));
  json args;
  if (!reader.Object(&args, 0) || !reader.AtEnd()) return std::nullopt;
  ToolCall call;
  call.name = std::string(name);
  call.arguments = args.dump(-1, ' ', false, json::error_handler_t::replace);
  return call;
}

bool ToolCallParser::Allowed(const std::string& name) const {
  if (allowed_.empty()) return true;
  for (const std::string& a : allowed_) {
    if (a == name) return true;
  }
  return false;
}

void ToolCallParser::Force(const std::string& body_start) {
  in_call_ = true;
  forced_ = true;
  raw_ = body_start;
}

std::optional<ToolCall> ToolCallParser::RawForcedCall() const {
  std::string_view body = raw_;
  if (body.substr(0, 5) != "call:") return std::nullopt;
  body.remove_prefix(5);
  const size_t brace = body.find('{');
  if (brace == std::string_view::npos) return std::nullopt;
  std::string_view name = body.substr(0, brace);
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())))
    name.remove_suffix(1);
  ToolCall call;
  call.name = std::string(name);
  if (call.name.empty() || !Allowed(call.name)) return std::nullopt;
  call.arguments = std::string(body.substr(brace));
  return call;
}

void ToolCallParser::Close(Delta* d) {
  std::optional<ToolCall> call = ParseToolCallBody(raw_);
  if (call && !Allowed(call->name)) call.reset();
  if (!call && forced_) call = RawForcedCall();
  forced_ = false;
  if (call) {
    call->id = NewCallId();
    d->calls.push_back(std::move(*call));
    ++calls_made_;
  } else {
    d->content += std::string(kOpen) + raw_ + std::string(kClose);
  }
  raw_.clear();
  in_call_ = false;
}

ToolCallParser::Delta ToolCallParser::Feed(int32_t token_id, const std::string& text) {
  Delta d;
  (in_call_ ? raw_ : d.content) += text;
  if (token_id < 0) return d;
  if (token_id == ids_.call_open) {
    // A call inside a call: the first is raw (the forced one a call, if its name reads).
    if (in_call_) Abandon(&d);
    in_call_ = true;
    raw_.clear();
  } else if (token_id == ids_.call_close && in_call_) {
    Close(&d);
  } else if (token_id == ids_.quote && in_call_) {
    raw_ += kQuote;
  }
  return d;
}

void ToolCallParser::Abandon(Delta* d) {
  std::optional<ToolCall> call;
  if (forced_) call = RawForcedCall();
  if (call) {
    call->id = NewCallId();
    d->calls.push_back(std::move(*call));
    ++calls_made_;
  } else {
    d->content += std::string(kOpen) + raw_;
  }
  raw_.clear();
  in_call_ = false;
  forced_ = false;
}

ToolCallParser::Delta ToolCallParser::Finish() {
  Delta d;
  if (in_call_) Abandon(&d);
  return d;
}

}  // namespace gannet_server
