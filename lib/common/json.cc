#include "lib/common/json.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "lib/common/status.h"
#include "lib/common/utf8.h"

namespace gannet {

Json Json::Bool(bool b) {
  Json j;
  j.type_ = Type::kBool;
  j.bool_ = b;
  return j;
}
Json Json::Number(double d) {
  Json j;
  j.type_ = Type::kNumber;
  j.number_ = d;
  return j;
}
Json Json::Int(int64_t i) {
  Json j;
  j.type_ = Type::kNumber;
  j.number_ = static_cast<double>(i);
  j.int_ = i;
  j.is_int_ = true;
  return j;
}
Json Json::String(std::string s) {
  Json j;
  j.type_ = Type::kString;
  j.string_ = std::move(s);
  return j;
}
Json Json::MakeArray(Array items) {
  Json j;
  j.type_ = Type::kArray;
  j.array_ = std::move(items);
  return j;
}
Json Json::MakeObject() {
  Json j;
  j.type_ = Type::kObject;
  return j;
}

const Json* Json::Find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &members_[it->second].second;
}

Json& Json::Set(std::string key, Json value) {
  type_ = Type::kObject;
  auto it = index_.find(key);
  if (it != index_.end()) {
    members_[it->second].second = std::move(value);
    return members_[it->second].second;
  }
  index_.emplace(key, members_.size());
  members_.emplace_back(std::move(key), std::move(value));
  return members_.back().second;
}

Json& Json::Push(Json value) {
  type_ = Type::kArray;
  array_.push_back(std::move(value));
  return array_.back();
}

std::string_view Json::TypeName(Type t) {
  switch (t) {
    case Type::kNull: return "null";
    case Type::kBool: return "bool";
    case Type::kNumber: return "number";
    case Type::kString: return "string";
    case Type::kArray: return "array";
    case Type::kObject: return "object";
  }
  return "?";
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

namespace {

void DumpTo(const Json& j, std::string* out) {
  switch (j.type()) {
    case Json::Type::kNull: out->append("null"); break;
    case Json::Type::kBool: out->append(j.AsBool() ? "true" : "false"); break;
    case Json::Type::kNumber:
      if (j.is_int()) {
        out->append(std::to_string(j.AsInt()));
      } else {
        char buf[64];
        auto r = std::to_chars(buf, buf + sizeof(buf), j.AsDouble());
        std::string_view lit(buf, r.ptr - buf);
        out->append(lit);
        // Keep floats recognisable as floats ("30.0", not "30"): readers such as HF's strict
        // config dataclasses distinguish the two.
        if (lit.find_first_of(".eEn") == std::string_view::npos) out->append(".0");
      }
      break;
    case Json::Type::kString: AppendJsonString(j.AsString(), out); break;
    case Json::Type::kArray: {
      out->push_back('[');
      bool first = true;
      for (const Json& e : j.AsArray()) {
        if (!first) out->push_back(',');
        first = false;
        DumpTo(e, out);
      }
      out->push_back(']');
      break;
    }
    case Json::Type::kObject: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, v] : j.AsMembers()) {
        if (!first) out->push_back(',');
        first = false;
        AppendJsonString(k, out);
        out->push_back(':');
        DumpTo(v, out);
      }
      out->push_back('}');
      break;
    }
  }
}

}  // namespace

std::string Json::Dump() const {
  std::string out;
  DumpTo(*this, &out);
  return out;
}

class JsonParser {
 public:
  JsonParser(std::string_view text, int64_t max_nodes) : text_(text), nodes_left_(max_nodes) {}

  absl::Status ParseMembers(int64_t max_nodes_per_member,
                            const std::function<absl::Status(std::string, Json)>& fn) {
    SkipWs();
    if (pos_ >= text_.size() || text_[pos_] != '{') return Error("expected an object");
    ++pos_;
    SkipWs();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
    } else {
      while (true) {
        SkipWs();
        if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a string key");
        std::string key;
        GANNET_RETURN_IF_ERROR(ParseString(&key));
        SkipWs();
        if (pos_ >= text_.size() || text_[pos_] != ':') return Error("expected ':' after key");
        ++pos_;
        SkipWs();
        nodes_left_ = max_nodes_per_member;
        Json value;
        GANNET_RETURN_IF_ERROR(ParseValue(&value, 1));
        GANNET_RETURN_IF_ERROR(fn(std::move(key), std::move(value)));
        SkipWs();
        if (pos_ >= text_.size()) return Error("unexpected end of input in object");
        if (text_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (text_[pos_] == '}') {
          ++pos_;
          break;
        }
        return Error("expected ',' or '}' in object");
      }
    }
    SkipWs();
    if (pos_ != text_.size()) return Error("trailing characters after the JSON value");
    return absl::OkStatus();
  }

  absl::StatusOr<Json> ParseDocument() {
    SkipWs();
    Json root;
    GANNET_RETURN_IF_ERROR(ParseValue(&root, 0));
    SkipWs();
    if (pos_ != text_.size()) return Error("trailing characters after the JSON value");
    return root;
  }

 private:
  absl::Status Error(std::string_view what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return InvalidArgumentError("JSON line {}, column {}: {}", line, col, what);
  }

  void SkipWs() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  bool Consume(std::string_view lit) {
    if (text_.substr(pos_, lit.size()) == lit) {
      pos_ += lit.size();
      return true;
    }
    return false;
  }

  absl::Status ParseValue(Json* out, int depth) {
    if (depth > Json::kMaxDepth) return Error("nesting deeper than 128 levels");
    if (--nodes_left_ < 0) {
      const absl::Status e = Error("more values than the parser's limit: the document is too large");
      return absl::ResourceExhaustedError(e.message());
    }
    if (pos_ >= text_.size()) return Error("unexpected end of input, expected a value");
    char c = text_[pos_];
    switch (c) {
      case '{': return ParseObject(out, depth);
      case '[': return ParseArray(out, depth);
      case '"': {
        std::string s;
        GANNET_RETURN_IF_ERROR(ParseString(&s));
        *out = Json::String(std::move(s));
        return absl::OkStatus();
      }
      case 't':
        if (Consume("true")) {
          *out = Json::Bool(true);
          return absl::OkStatus();
        }
        return Error("invalid literal");
      case 'f':
        if (Consume("false")) {
          *out = Json::Bool(false);
          return absl::OkStatus();
        }
        return Error("invalid literal");
      case 'n':
        if (Consume("null")) {
          *out = Json();
          return absl::OkStatus();
        }
        return Error("invalid literal");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
        return Error(fmt::format("unexpected character '{}'", c));
    }
  }

  absl::Status ParseObject(Json* out, int depth) {
    ++pos_;  // '{'
    *out = Json::MakeObject();
    SkipWs();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      SkipWs();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a string key");
      std::string key;
      GANNET_RETURN_IF_ERROR(ParseString(&key));
      if (out->Find(key) != nullptr) return Error(fmt::format("duplicate key \"{}\"", key));
      SkipWs();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Error("expected ':' after key");
      ++pos_;
      SkipWs();
      Json value;
      GANNET_RETURN_IF_ERROR(ParseValue(&value, depth + 1));
      out->Set(std::move(key), std::move(value));
      SkipWs();
      if (pos_ >= text_.size()) return Error("unexpected end of input in object");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or '}' in object");
    }
  }

  absl::Status ParseArray(Json* out, int depth) {
    ++pos_;  // '['
    *out = Json::MakeArray();
    SkipWs();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      SkipWs();
      Json value;
      GANNET_RETURN_IF_ERROR(ParseValue(&value, depth + 1));
      out->Push(std::move(value));
      SkipWs();
      if (pos_ >= text_.size()) return Error("unexpected end of input in array");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == ']') {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or ']' in array");
    }
  }

  absl::Status ParseHex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return Error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        v |= c - 'A' + 10;
      } else {
        return Error("invalid hex digit in \\u escape");
      }
    }
    *out = v;
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c < 0x20) return Error("control character in string");
      if (c == '\\') {
        ++pos_;
        if (pos_ >= text_.size()) return Error("unterminated escape");
        char e = text_[pos_++];
        switch (e) {
          case '"': out->push_back('"'); break;
          case '\\': out->push_back('\\'); break;
          case '/': out->push_back('/'); break;
          case 'b': out->push_back('\b'); break;
          case 'f': out->push_back('\f'); break;
          case 'n': out->push_back('\n'); break;
          case 'r': out->push_back('\r'); break;
          case 't': out->push_back('\t'); break;
          case 'u': {
            uint32_t cp = 0;
            GANNET_RETURN_IF_ERROR(ParseHex4(&cp));
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (!Consume("\\u")) return Error("unpaired high surrogate in \\u escape");
              uint32_t lo = 0;
              GANNET_RETURN_IF_ERROR(ParseHex4(&lo));
              if (lo < 0xDC00 || lo > 0xDFFF) return Error("invalid low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
              return Error("unpaired low surrogate in \\u escape");
            }
            AppendUtf8(cp, out);
            break;
          }
          default: return Error(fmt::format("invalid escape '\\{}'", e));
        }
        continue;
      }
      if (c < 0x80) {
        out->push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      size_t len = Utf8SequenceLength(text_.substr(pos_));
      if (len == 0) return Error("invalid UTF-8 in string");
      out->append(text_.substr(pos_, len));
      pos_ += len;
    }
  }

  absl::Status ParseNumber(Json* out) {
    size_t start = pos_;
    bool is_int = true;
    if (text_[pos_] == '-') ++pos_;
    if (pos_ >= text_.size()) return Error("truncated number");
    if (text_[pos_] == '0') {
      ++pos_;
    } else if (text_[pos_] >= '1' && text_[pos_] <= '9') {
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    } else {
      return Error("invalid number");
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      is_int = false;
      ++pos_;
      size_t digits = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ == digits) return Error("expected digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      is_int = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      size_t digits = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ == digits) return Error("expected digits in exponent");
    }
    std::string_view lit = text_.substr(start, pos_ - start);
    if (is_int) {
      int64_t v = 0;
      auto r = std::from_chars(lit.data(), lit.data() + lit.size(), v);
      if (r.ec == std::errc() && r.ptr == lit.data() + lit.size()) {
        *out = Json::Int(v);
        return absl::OkStatus();
      }
      // Out of int64 range: keep it as a double.
    }
    double d = 0;
    auto r = std::from_chars(lit.data(), lit.data() + lit.size(), d);
    if (r.ec != std::errc() || !std::isfinite(d)) return Error("number out of range");
    Json j;
    j.type_ = Json::Type::kNumber;
    j.number_ = d;
    *out = std::move(j);
    return absl::OkStatus();
  }

  std::string_view text_;
  size_t pos_ = 0;
  int64_t nodes_left_;
};

absl::StatusOr<Json> Json::Parse(std::string_view text, int64_t max_nodes) {
  return JsonParser(text, max_nodes).ParseDocument();
}

absl::Status Json::ParseMembers(std::string_view text, int64_t max_nodes_per_member,
                                const std::function<absl::Status(std::string, Json)>& fn) {
  return JsonParser(text, max_nodes_per_member).ParseMembers(max_nodes_per_member, fn);
}

}  // namespace gannet
