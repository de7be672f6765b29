#include "lib/common/json.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>

#include <nlohmann/json.hpp>

#include "lib/common/status.h"

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
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "bool";
    case Type::kNumber:
      return "number";
    case Type::kString:
      return "string";
    case Type::kArray:
      return "array";
    case Type::kObject:
      return "object";
  }
  return "?";
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
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
    case Json::Type::kNull:
      out->append("null");
      break;
    case Json::Type::kBool:
      out->append(j.AsBool() ? "true" : "false");
      break;
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
    case Json::Type::kString:
      AppendJsonString(j.AsString(), out);
      break;
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

namespace {

// nlohmann's lexer reads the text through this iterator, so the count of characters consumed is
// known when a callback below refuses something (nlohmann reports positions only for its own
// syntax errors).
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* p, const char* base, size_t* consumed)
      : p_(p), base_(base), consumed_(consumed) {}
  reference operator*() const { return *p_; }
  CountingIterator& operator++() {
    ++p_;
    *consumed_ = static_cast<size_t>(p_ - base_);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const CountingIterator& o) const { return p_ == o.p_; }
  bool operator!=(const CountingIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char* base_;
  size_t* consumed_;
};

}  // namespace

// Parsing is nlohmann-json's (the project's one JSON library, nlohmann-json3-dev): its SAX events
// build the Json tree whose interface the model and tokenizer code was written against.
//
// Builds a Json from nlohmann's SAX events. nlohmann checks the syntax, UTF-8, escapes and
// surrogates; the rules it does not have (duplicate keys, the depth and value limits, finite
// numbers) are checked here, and every error names the line and column.
//
// Streaming (Json::Stream, ParseMembers): the open containers form a stack of frames; a streamed
// frame keeps no values, only the path to it, and each child of a streamed frame is either
// streamed itself (the handler's descend) or built into member_ and handed over when it ends.
class JsonParser {
 public:
  using json = nlohmann::json;

  JsonParser(std::string_view text, int64_t max_nodes) : text_(text), nodes_left_(max_nodes) {}

  absl::Status Stream(int64_t max_nodes_per_value, const Json::StreamHandler& handler) {
    handler_ = &handler;
    per_value_ = max_nodes_per_value;
    return ParseDocument().status();
  }

  absl::StatusOr<Json> ParseDocument() {
    CountingIterator first(text_.data(), text_.data(), &consumed_);
    CountingIterator last(text_.data() + text_.size(), text_.data(), &consumed_);
    const bool ok = json::sax_parse(first, last, this, nlohmann::detail::input_format_t::json,
                                    /*strict=*/true, /*ignore_comments=*/false);
    if (!ok || !status_.ok()) {
      if (status_.ok()) status_ = Error(consumed_, "invalid JSON");
      return status_;
    }
    return std::move(root_);
  }

  // nlohmann's SAX interface.
  bool null() { return Value(Json()); }
  bool boolean(bool b) { return Value(Json::Bool(b)); }
  bool number_integer(json::number_integer_t v) { return Value(Json::Int(v)); }
  bool number_unsigned(json::number_unsigned_t v) {
    // Out of int64 range: kept as a double, as before.
    if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Value(Json::Int(static_cast<int64_t>(v)));
    }
    return Value(Json::Number(static_cast<double>(v)));
  }
  bool number_float(json::number_float_t v, const std::string&) {
    if (!std::isfinite(v)) return Fail("number out of range");
    return Value(Json::Number(v));
  }
  bool string(std::string& s) { return Value(Json::String(std::move(s))); }
  bool binary(json::binary_t&) { return Fail("binary values are not JSON"); }
  bool start_object(std::size_t) { return Open(Json::MakeObject()); }
  bool key(std::string& k) {
    Frame& top = frames_.back();
    if (top.node == nullptr) {
      // A member of a streamed object: duplicates are the handler's to detect.
      child_key_ = std::move(k);
      return true;
    }
    if (top.node->Find(k) != nullptr) return Fail(fmt::format("duplicate key \"{}\"", k));
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(Json::MakeArray()); }
  bool end_array() { return Close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1, column 4: <what>; last
    // read: '<input>'" (or "[json.exception.out_of_range.406] number overflow ..."): the id, the
    // position (ours is computed the same way for every error) and the echoed input (possibly
    // invalid UTF-8) are dropped.
    std::string_view what = e.what();
    if (const size_t id_end = what.find("] "); id_end != std::string_view::npos) {
      what.remove_prefix(id_end + 2);
    }
    if (what.substr(0, 15) == "parse error at ") {
      if (const size_t colon = what.find(": "); colon != std::string_view::npos) {
        what.remove_prefix(colon + 2);
      }
    }
    what = what.substr(0, what.find("; last read:"));
    status_ = Error(position > 0 ? position - 1 : 0, what);
    return false;
  }

 private:
  // An open container: built into the tree (node), or streamed (node == nullptr: its children
  // go to the handler; index counts an array's elements so far).
  struct Frame {
    Json* node = nullptr;
    bool is_array = false;
    int64_t index = 0;
  };

  absl::Status Error(size_t pos, std::string_view what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return InvalidArgumentError("JSON line {}, column {}: {}", line, col, what);
  }

  bool Fail(std::string_view what) {
    status_ = Error(consumed_, what);
    return false;
  }

  bool Streaming() const { return handler_ != nullptr; }
  // Whether the next value is a child of a streamed container.
  bool InStreamed() const { return !frames_.empty() && frames_.back().node == nullptr; }

  // The name of the next child of the (streamed) top frame: its key, or its index.
  std::string ChildName() const {
    const Frame& top = frames_.back();
    return top.is_array ? std::to_string(top.index) : child_key_;
  }

  // Places a value (a scalar, or a container about to be filled) in the tree being built;
  // returns where it now lives.
  Json* Place(Json v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    if (InStreamed()) {
      member_ = std::move(v);
      return &member_;
    }
    Json* parent = frames_.back().node;
    if (parent->is_array()) return &parent->Push(std::move(v));
    return &parent->Set(std::move(key_), std::move(v));
  }

  bool Count() {
    // Each child of a streamed container has a budget of its own.
    if (InStreamed()) nodes_left_ = per_value_;
    if (static_cast<int>(frames_.size()) > Json::kMaxDepth) {
      return Fail("nesting deeper than 128 levels");
    }
    if (--nodes_left_ < 0) {
      status_ = absl::ResourceExhaustedError(
          Error(consumed_, "more values than the parser's limit: the document is too large")
              .message());
      return false;
    }
    return true;
  }

  bool Value(Json v) {
    if (!Count()) return false;
    if (Streaming() && frames_.empty()) return Fail("the top-level value must be an object");
    if (InStreamed()) return Deliver(std::move(v));
    Place(std::move(v));
    return true;
  }

  // Hands a completed child of the streamed top frame to the handler.
  bool Deliver(Json v) {
    path_.push_back(ChildName());
    absl::Status st = handler_->value(path_, std::move(v));
    path_.pop_back();
    Frame& top = frames_.back();
    ++top.index;
    child_key_.clear();
    if (!st.ok()) {
      status_ = std::move(st);
      return false;
    }
    return true;
  }

  // Ancestors' addresses stay valid while a child container is open: only the innermost
  // container grows.
  bool Open(Json container) {
    if (!Count()) return false;
    const bool is_array = container.is_array();
    if (Streaming() && frames_.empty()) {
      if (is_array) return Fail("the top-level value must be an object");
      frames_.push_back(Frame{nullptr, false, 0});  // the top level is always streamed
      return true;
    }
    if (InStreamed()) {
      path_.push_back(ChildName());
      if (handler_->descend(path_, container.type())) {
        frames_.push_back(Frame{nullptr, is_array, 0});
        child_key_.clear();
        return true;
      }
      path_.pop_back();
    }
    frames_.push_back(Frame{Place(std::move(container)), is_array, 0});
    return true;
  }

  bool Close() {
    const bool was_streamed = frames_.back().node == nullptr;
    frames_.pop_back();
    if (was_streamed) {
      if (frames_.empty()) return true;  // the end of the document
      path_.pop_back();
      ++frames_.back().index;
      return true;
    }
    // A built value whose parent is streamed is complete: hand it over.
    if (InStreamed()) return Deliver(std::move(member_));
    return true;
  }

  std::string_view text_;
  size_t consumed_ = 0;
  int64_t nodes_left_;
  absl::Status status_;
  Json root_;
  std::vector<Frame> frames_;
  std::string key_;
  // Streaming only.
  const Json::StreamHandler* handler_ = nullptr;
  int64_t per_value_ = 0;
  std::vector<std::string> path_;  // to the streamed top frame
  std::string child_key_;          // the key of the streamed top frame's next child
  Json member_;                    // the child being built
};

absl::StatusOr<Json> Json::Parse(std::string_view text, int64_t max_nodes) {
  return JsonParser(text, max_nodes).ParseDocument();
}

absl::Status Json::Stream(std::string_view text, int64_t max_nodes_per_value,
                          const StreamHandler& handler) {
  return JsonParser(text, max_nodes_per_value).Stream(max_nodes_per_value, handler);
}

absl::Status Json::ParseMembers(std::string_view text, int64_t max_nodes_per_member,
                                const std::function<absl::Status(std::string, Json)>& fn) {
  StreamHandler handler;
  handler.descend = [](const std::vector<std::string>&, Type) { return false; };
  handler.value = [&fn](const std::vector<std::string>& path, Json value) {
    return fn(path.front(), std::move(value));
  };
  return Stream(text, max_nodes_per_member, handler);
}

namespace {

absl::Status WalkChildren(const Json& node, std::vector<std::string>* path,
                          const Json::StreamHandler& handler);

// One child of a streamed container: streamed in turn where the handler descends, else handed
// over as a copy (Stream hands over values it built and drops).
absl::Status WalkChild(const Json& child, std::vector<std::string>* path,
                       const Json::StreamHandler& handler) {
  if ((child.is_object() || child.is_array()) && handler.descend(*path, child.type())) {
    return WalkChildren(child, path, handler);
  }
  return handler.value(*path, child);
}

absl::Status WalkChildren(const Json& node, std::vector<std::string>* path,
                          const Json::StreamHandler& handler) {
  if (node.is_array()) {
    for (size_t i = 0; i < node.AsArray().size(); ++i) {
      path->push_back(std::to_string(i));
      absl::Status st = WalkChild(node.AsArray()[i], path, handler);
      path->pop_back();
      GANNET_RETURN_IF_ERROR(st);
    }
    return absl::OkStatus();
  }
  for (const auto& [k, v] : node.AsMembers()) {
    path->push_back(k);
    absl::Status st = WalkChild(v, path, handler);
    path->pop_back();
    GANNET_RETURN_IF_ERROR(st);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Json::Walk(const StreamHandler& handler) const {
  if (!is_object()) return InvalidArgumentError("JSON: expected an object");
  std::vector<std::string> path;
  return WalkChildren(*this, &path, handler);
}

}  // namespace gannet
