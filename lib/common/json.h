// A strict JSON (RFC 8259) reader and writer for config.json, safetensors headers,
// model.safetensors.index.json and tokenizer.json.
//
// nlohmann-json parses (json.cc); this tree keeps the interface the callers use. Strict on
// purpose because its inputs are untrusted files: invalid UTF-8, duplicate object keys, trailing
// garbage, nesting deeper than kMaxDepth and non-finite numbers are errors that name the line and
// column. Integers keep their exact value up to int64 (safetensors offsets can exceed 2^53).
// Objects keep insertion order (the writer reproduces it) and look keys up in O(log n).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gannet {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<Json>;
  using Members = std::vector<std::pair<std::string, Json>>;
  static constexpr int kMaxDepth = 128;

  Json() = default;  // null
  static Json Bool(bool b);
  static Json Number(double d);
  static Json Int(int64_t i);
  static Json String(std::string s);
  static Json MakeArray(Array items = {});
  static Json MakeObject();

  // Every value (number, string, array, object, ...) is one node of ~240 bytes, so a document of
  // n bytes could expand ~100x in memory: Parse refuses documents with more than max_nodes
  // values (ResourceExhausted), before allocating them. The default fits Gemma's 33 MB
  // tokenizer.json (~1.5M values) as a tree with room to spare (its loader streams it: Stream).
  static constexpr int64_t kDefaultMaxNodes = 4'000'000;
  static absl::StatusOr<Json> Parse(std::string_view text, int64_t max_nodes = kDefaultMaxNodes);
  // A document whose top level is an object, read one member at a time without building the
  // whole tree: fn gets each key and its value (at most max_nodes_per_member values) in document
  // order, and the value is gone before the next member is read, so the memory is one member's
  // tree plus what fn keeps (safetensors headers: a few bytes of tensor description per entry,
  // where the whole tree costs ~30 times the text). Duplicate keys are fn's to detect. An error
  // of fn ends the parse and is returned as it is.
  static absl::Status ParseMembers(
      std::string_view text, int64_t max_nodes_per_member,
      const std::function<absl::Status(std::string key, Json value)>& fn);
  // The general form of ParseMembers, for documents whose bulk sits deeper (tokenizer.json:
  // model.vocab, model.merges): the top-level object is streamed, and so is every container for
  // which `descend` returns true (it is asked for each container whose parent is streamed, with
  // the container's path and type); every other value whose parent is streamed is built (at most
  // max_nodes_per_value values) and handed to `value` with its path, then dropped. A path is the
  // keys and array indexes (in decimal) from the top level down to the value. Duplicate keys of
  // streamed objects are the handler's to detect. An error of either callback ends the parse and
  // is returned as it is; the memory is the innermost built value plus what the handler keeps.
  struct StreamHandler {
    std::function<bool(const std::vector<std::string>& path, Type type)> descend;
    std::function<absl::Status(const std::vector<std::string>& path, Json value)> value;
  };
  static absl::Status Stream(std::string_view text, int64_t max_nodes_per_value,
                             const StreamHandler& handler);
  // Feeds a built tree to a StreamHandler as Stream would feed its text (same paths, same
  // values), so one reader serves both a file and a tree built in code.
  absl::Status Walk(const StreamHandler& handler) const;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }
  // True for numbers written without fraction/exponent that fit in int64.
  bool is_int() const { return type_ == Type::kNumber && is_int_; }

  // Accessors assume the type was checked; they return a neutral value otherwise.
  bool AsBool() const { return bool_; }
  double AsDouble() const { return number_; }
  int64_t AsInt() const { return int_; }
  const std::string& AsString() const { return string_; }
  const Array& AsArray() const { return array_; }
  const Members& AsMembers() const { return members_; }

  // Object access: nullptr when absent or when this is not an object.
  const Json* Find(std::string_view key) const;
  // Object building: replaces an existing key, else appends.
  Json& Set(std::string key, Json value);
  // Array building.
  Json& Push(Json value);

  std::string Dump() const;  // compact, keys in insertion order

  static std::string_view TypeName(Type t);

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool bool_ = false;
  bool is_int_ = false;
  double number_ = 0;
  int64_t int_ = 0;
  std::string string_;
  Array array_;
  Members members_;
  std::map<std::string, size_t, std::less<>> index_;
};

// Appends s as a JSON string literal (with quotes) to out.
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace gannet
