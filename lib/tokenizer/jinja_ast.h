// The values and syntax tree of the chat-template interpreter (jinja_template.h). Internal to
// lib/tokenizer: jinja_parse.cc builds the tree, jinja_eval.cc walks it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gannet::tokenizer::jinja {

// Byte ranges [begin, end) of a string that came from the caller's data (message content,
// tool arguments) rather than from the template's own literals: the tokenizer keeps them from
// being read as control tokens (split_special_tokens). Sorted and disjoint.
using Ranges = std::vector<std::pair<size_t, size_t>>;

// A string with the provenance of its bytes.
struct Text {
  std::string s;
  Ranges data;

  void Append(const Text& t);
  void AppendLiteral(std::string_view lit) { s += lit; }
  // The bytes [begin, end), with their provenance.
  Text Sub(size_t begin, size_t end) const;
  // All bytes from data.
  static Text Data(std::string s);
};

struct Value;
struct Macro;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, like Python dicts
using Builtin = std::function<Value(std::vector<Value>& args,
                                    std::vector<std::pair<std::string, Value>>& kwargs)>;

struct Value {
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kMacro,
    kBuiltin
  };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  Text s;
  std::shared_ptr<List> list;  // lists are immutable once built (the sandbox forbids append)
  std::shared_ptr<Dict> dict;  // dicts, and namespaces (shared: `set ns.x` is seen by all)
  std::shared_ptr<const Macro> macro;
  std::shared_ptr<const Builtin> builtin;

  static Value None() {
    Value v;
    v.kind = Kind::kNone;
    return v;
  }
  static Value Bool(bool x) {
    Value v;
    v.kind = Kind::kBool;
    v.b = x;
    return v;
  }
  static Value Int(int64_t x) {
    Value v;
    v.kind = Kind::kInt;
    v.i = x;
    return v;
  }
  static Value Float(double x) {
    Value v;
    v.kind = Kind::kFloat;
    v.f = x;
    return v;
  }
  static Value Str(Text t) {
    Value v;
    v.kind = Kind::kString;
    v.s = std::move(t);
    return v;
  }
  static Value Literal(std::string x) { return Str(Text{std::move(x), {}}); }
  static Value MakeList(List l) {
    Value v;
    v.kind = Kind::kList;
    v.list = std::make_shared<List>(std::move(l));
    return v;
  }
  static Value MakeDict(Dict d) {
    Value v;
    v.kind = Kind::kDict;
    v.dict = std::make_shared<Dict>(std::move(d));
    return v;
  }

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const {
    return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool;
  }
  bool is_mapping() const { return kind == Kind::kDict || kind == Kind::kNamespace; }
  // Looks a key up in a dict or namespace; nullptr when absent.
  const Value* Find(std::string_view key) const;
};

// A template error: its message names the line. Thrown inside the interpreter only; the API
// (jinja_template.cc) turns it into a Status.
struct Error : std::runtime_error {
  enum class Kind { kSyntax, kUnsupported, kRender };
  Error(Kind k, int line, const std::string& what)
      : std::runtime_error("chat template line " + std::to_string(line) + ": " + what), kind(k) {}
  Kind kind;
};

struct Expr;
using ExprP = std::unique_ptr<Expr>;
struct Expr {
  enum class Kind {
    kLiteral,
    kName,
    kAttr,
    kIndex,
    kSlice,
    kCall,
    kFilter,
    kTest,
    kNeg,
    kNot,
    kBinary,
    kAnd,
    kOr,
    kCond,
    kList,
    kDict
  };
  Kind kind;
  int line = 0;
  Value literal;        // kLiteral
  std::string name;     // kName, kAttr, kFilter and kTest (their name), kBinary (operator)
  bool negate = false;  // kTest: `is not`
  std::vector<ExprP>
      kids;  // operands; kCall: [callee]; kFilter/kTest: [subject]; kSlice: 3, may be null
  std::vector<ExprP>
      args;  // kCall/kFilter/kTest positional arguments; kList items; kDict keys/values
  std::vector<std::pair<std::string, ExprP>> kwargs;
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;
struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetAttr, kMacro, kBreak, kContinue };
  Kind kind;
  int line = 0;
  std::string text;                              // kText
  ExprP expr;                                    // kOutput, kSet/kSetAttr value, kFor iterable
  std::vector<std::pair<ExprP, Body>> branches;  // kIf: condition and body, in order
  Body body;                                     // kFor, kMacro
  Body else_body;                                // kIf, kFor
  std::vector<std::string> targets;  // kFor loop variables; kSet name; kSetAttr [ns, attr]
  ExprP filter;                      // kFor: `for x in y if cond`
  std::string name;                  // kMacro
  std::vector<std::pair<std::string, ExprP>> params;  // kMacro: names and defaults (may be null)
};

struct Macro {
  const Node* node;
};

// Parses template source with Hugging Face's settings (trim_blocks, lstrip_blocks). Throws Error.
Body Parse(std::string_view source);

}  // namespace gannet::tokenizer::jinja
