// Evaluation of the chat-template Jinja subset: Python's semantics where the templates rely on
// them (truthiness, equality, str() of values, slicing, str.strip), Jinja's where it differs from
// Python (an undefined value prints as '' and iterates as empty, but its attributes are errors;
// dict.attr finds methods before keys). Every string keeps the provenance of its bytes (Text)
// so the caller knows which output came from the messages.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <unordered_map>

#include "lib/common/status.h"
#include "lib/common/utf8.h"
#include "lib/tokenizer/jinja_ast.h"
#include "lib/tokenizer/jinja_template.h"
#include "lib/tokenizer/unicode_text.h"

namespace gannet::tokenizer {
namespace jinja {

void Text::Append(const Text& t) {
  const size_t base = s.size();
  s += t.s;
  for (const auto& [b, e] : t.data) {
    if (!data.empty() && data.back().second == base + b) {
      data.back().second = base + e;
    } else {
      data.emplace_back(base + b, base + e);
    }
  }
}

Text Text::Sub(size_t begin, size_t end) const {
  Text out;
  out.s = s.substr(begin, end - begin);
  for (const auto& [b, e] : data) {
    const size_t lo = std::max(b, begin), hi = std::min(e, end);
    if (lo < hi) out.data.emplace_back(lo - begin, hi - begin);
  }
  return out;
}

Text Text::Data(std::string str) {
  Text t;
  t.s = std::move(str);
  if (!t.s.empty()) t.data.emplace_back(0, t.s.size());
  return t;
}

const Value* Value::Find(std::string_view key) const {
  if (!dict) return nullptr;
  for (const auto& [k, v] : *dict) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

constexpr int kMaxCallDepth = 256;
constexpr int64_t kMaxRange = 1 << 20;

struct LimitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void Fail(int line, const std::string& what) {
  throw Error(Error::Kind::kRender, line, what);
}

const char* KindName(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return "undefined";
    case Value::Kind::kNone:
      return "none";
    case Value::Kind::kBool:
      return "boolean";
    case Value::Kind::kInt:
      return "integer";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "string";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "namespace";
    case Value::Kind::kMacro:
      return "macro";
    case Value::Kind::kBuiltin:
      return "function";
  }
  return "value";
}

bool HasData(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString:
      return !v.s.data.empty();
    case Value::Kind::kList:
      return std::any_of(v.list->begin(), v.list->end(), [](const Value& x) { return HasData(x); });
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      return std::any_of(v.dict->begin(), v.dict->end(),
                         [](const auto& kv) { return HasData(kv.second); });
    default:
      return false;
  }
}

// Python's repr of a float: the shortest digits that read back, positional between 1e-4 and
// 1e16, else d.ddde+XX.
std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s(buf);
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t epos = s.find('e');
  const int exp = std::stoi(s.substr(epos + 1));
  std::string digits = s.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (static_cast<int>(digits.size()) <= exp + 1) {
        out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
      }
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += e;
  }
  return neg ? "-" + out : out;
}

std::string PyQuote(const std::string& s) {
  // Python's repr of a str: single quotes unless the text has one and no double quote.
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else
      out += c;
  }
  return out + q;
}

std::string Repr(const Value& v);

// str() of a value, as {{ }} prints it.
Text ToText(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kString:
      return v.s;
    default:
      break;
  }
  Text t;
  t.s = Repr(v);
  if (HasData(v) && !t.s.empty()) t.data.emplace_back(0, t.s.size());
  return t;
}

std::string Repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.b ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.i);
    case Value::Kind::kFloat:
      return FloatRepr(v.f);
    case Value::Kind::kString:
      return PyQuote(v.s.s);
    case Value::Kind::kList: {
      std::string out = "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += Repr((*v.list)[k]);
      }
      return out + "]";
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      std::string out = v.kind == Value::Kind::kNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, x] : *v.dict) {
        if (!first) out += ", ";
        first = false;
        out += PyQuote(k) + ": " + Repr(x);
      }
      return out + (v.kind == Value::Kind::kNamespace ? "}>" : "}");
    }
    case Value::Kind::kMacro:
      return "<Macro>";
    case Value::Kind::kBuiltin:
      return "<function>";
  }
  return "";
}

bool Truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.b;
    case Value::Kind::kInt:
      return v.i != 0;
    case Value::Kind::kFloat:
      return v.f != 0;
    case Value::Kind::kString:
      return !v.s.s.empty();
    case Value::Kind::kList:
      return !v.list->empty();
    case Value::Kind::kDict:
      return !v.dict->empty();
    default:
      return true;
  }
}

double AsDouble(const Value& v) {
  return v.kind == Value::Kind::kFloat ? v.f
         : v.kind == Value::Kind::kInt ? double(v.i)
                                       : double(v.b);
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Value::Kind::kFloat && b.kind != Value::Kind::kFloat) {
      return (a.kind == Value::Kind::kInt ? a.i : a.b) == (b.kind == Value::Kind::kInt ? b.i : b.b);
    }
    return AsDouble(a) == AsDouble(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.s.s == b.s.s;
    case Value::Kind::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!Equal((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    case Value::Kind::kDict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, x] : *a.dict) {
        const Value* y = b.Find(k);
        if (y == nullptr || !Equal(x, *y)) return false;
      }
      return true;
    default:
      return a.dict == b.dict && a.macro == b.macro && a.builtin == b.builtin;
  }
}

// Code point start offsets of a string, plus its size at the end.
std::vector<size_t> CodePointOffsets(const std::string& s) {
  std::vector<size_t> offs;
  for (size_t p = 0; p < s.size();) {
    offs.push_back(p);
    size_t len = Utf8SequenceLength(std::string_view(s).substr(p));
    p += len == 0 ? 1 : len;
  }
  offs.push_back(s.size());
  return offs;
}

Value MakeBuiltin(Builtin fn) {
  Value v;
  v.kind = Value::Kind::kBuiltin;
  v.builtin = std::make_shared<const Builtin>(std::move(fn));
  return v;
}

Text TrimText(const Text& t, bool left, bool right) {
  std::string_view whole = TrimPythonSpace(t.s);
  size_t b = whole.data() - t.s.data(), e = b + whole.size();
  if (whole.empty()) b = e = left ? t.s.size() : 0;
  if (!left) b = 0;
  if (!right) e = t.s.size();
  if (b > e) b = e;
  return t.Sub(b, e);
}

Text StripChars(const Text& t, const std::string& chars, bool left, bool right) {
  size_t b = 0, e = t.s.size();
  if (left)
    while (b < e && chars.find(t.s[b]) != std::string::npos) ++b;
  if (right)
    while (e > b && chars.find(t.s[e - 1]) != std::string::npos) --e;
  return t.Sub(b, e);
}

Text MapAscii(const Text& t, int (*fn)(int)) {
  Text out = t;
  for (char& c : out.s) {
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(fn(c));
  }
  return out;
}

void AppendJson(const Value& v, int line, std::string* out) {
  switch (v.kind) {
    case Value::Kind::kNone:
    case Value::Kind::kUndefined:
      *out += "null";
      return;
    case Value::Kind::kBool:
      *out += v.b ? "true" : "false";
      return;
    case Value::Kind::kInt:
      *out += std::to_string(v.i);
      return;
    case Value::Kind::kFloat:
      *out += FloatRepr(v.f);
      return;
    case Value::Kind::kString: {
      // Python's json.dumps(ensure_ascii=False).
      *out += '"';
      for (char c : v.s.s) {
        switch (c) {
          case '"':
            *out += "\\\"";
            break;
          case '\\':
            *out += "\\\\";
            break;
          case '\n':
            *out += "\\n";
            break;
          case '\r':
            *out += "\\r";
            break;
          case '\t':
            *out += "\\t";
            break;
          case '\b':
            *out += "\\b";
            break;
          case '\f':
            *out += "\\f";
            break;
          default:
            if (static_cast<unsigned char>(c) < 0x20) {
              char buf[8];
              std::snprintf(buf, sizeof buf, "\\u%04x", c);
              *out += buf;
            } else {
              *out += c;
            }
        }
      }
      *out += '"';
      return;
    }
    case Value::Kind::kList:
      *out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) *out += ", ";
        AppendJson((*v.list)[k], line, out);
      }
      *out += ']';
      return;
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      *out += '{';
      bool first = true;
      for (const auto& [k, x] : *v.dict) {
        if (!first) *out += ", ";
        first = false;
        AppendJson(Value::Literal(k), line, out);
        *out += ": ";
        AppendJson(x, line, out);
      }
      *out += '}';
      return;
    }
    default:
      Fail(line, std::string("tojson: cannot serialize a ") + KindName(v));
  }
}

List Iterate(const Value& v, int line) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return *v.list;
    case Value::Kind::kDict: {
      List keys;
      for (const auto& kv : *v.dict) keys.push_back(Value::Str(Text::Data(kv.first)));
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      std::vector<size_t> offs = CodePointOffsets(v.s.s);
      for (size_t k = 0; k + 1 < offs.size(); ++k)
        chars.push_back(Value::Str(v.s.Sub(offs[k], offs[k + 1])));
      return chars;
    }
    default:
      Fail(line, std::string("cannot iterate over a ") + KindName(v));
  }
}

Value ItemsOf(const Value& v, int line) {
  if (v.kind != Value::Kind::kDict)
    Fail(line, std::string("items: expected a dict, got a ") + KindName(v));
  List items;
  for (const auto& [k, x] : *v.dict)
    items.push_back(Value::MakeList({Value::Str(Text::Data(k)), x}));
  return Value::MakeList(std::move(items));
}

// A content part's "type" naming a media kind: a choice among the template's own markers, not
// users' text. Gemma-4's template writes an image part as '<|' ~ part['type'] ~ '|>', which must
// stay the image token when the users' text is tokenized as plain text (split_special_tokens);
// only these exact values are exempt, so no other string of the data can spell a token this way.
bool IsMediaPartType(std::string_view key, const Json& value) {
  if (key != "type" || !value.is_string()) return false;
  const std::string& v = value.AsString();
  return v == "image" || v == "audio" || v == "video";
}

// Strings become the caller's data (is_data) or the template's own text.
Value FromJson(const Json& j, bool is_data) {
  switch (j.type()) {
    case Json::Type::kNull:
      return Value::None();
    case Json::Type::kBool:
      return Value::Bool(j.AsBool());
    case Json::Type::kNumber:
      return j.is_int() ? Value::Int(j.AsInt()) : Value::Float(j.AsDouble());
    case Json::Type::kString:
      return is_data ? Value::Str(Text::Data(j.AsString())) : Value::Literal(j.AsString());
    case Json::Type::kArray: {
      List l;
      for (const Json& x : j.AsArray()) l.push_back(FromJson(x, is_data));
      return Value::MakeList(std::move(l));
    }
    case Json::Type::kObject: {
      Dict d;
      for (const auto& [k, x] : j.AsMembers()) {
        d.emplace_back(k, FromJson(x, is_data && !IsMediaPartType(k, x)));
      }
      return Value::MakeDict(std::move(d));
    }
  }
  return Value::None();
}

using Frame = std::unordered_map<std::string, Value>;
enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  // max_steps: statements and expressions evaluated, loop rounds and list items made. Gemma-4's
  // template takes a few thousand for a chat (it scans earlier messages, so a 2000-message chat
  // takes millions); nested loops over large ranges would otherwise not end.
  Renderer(size_t max_output, int64_t max_steps) : max_output_(max_output), max_steps_(max_steps) {}

  Frame& globals() { return globals_; }

  Text RenderTop(const Body& body) {
    frames_ = {&globals_, &top_};
    Text out;
    Exec(body, &out);
    return out;
  }

 private:
  Value Lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      auto f = (*it)->find(name);
      if (f != (*it)->end()) return f->second;
    }
    return Value();
  }

  void Emit(Text* out, const Text& t) {
    out->Append(t);
    if (out->s.size() > max_output_) {
      throw LimitError("the chat template's output passed " + std::to_string(max_output_) +
                       " bytes");
    }
  }

  Flow Exec(const Body& body, Text* out) {
    for (const auto& n : body) {
      Flow f = ExecNode(*n, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  void Step(int64_t n = 1) {
    steps_ += n;
    if (steps_ > max_steps_) {
      throw LimitError("the chat template ran more than " + std::to_string(max_steps_) + " steps");
    }
  }

  Flow ExecNode(const Node& n, Text* out) {
    Step();
    switch (n.kind) {
      case Node::Kind::kText:
        Emit(out, Text{n.text, {}});
        return Flow::kNormal;
      case Node::Kind::kOutput:
        Emit(out, ToText(Eval(*n.expr)));
        return Flow::kNormal;
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches) {
          if (Truthy(Eval(*cond))) return Exec(body, out);
        }
        return Exec(n.else_body, out);
      case Node::Kind::kFor:
        return ExecFor(n, out);
      case Node::Kind::kSet:
        (*frames_.back())[n.targets[0]] = Eval(*n.expr);
        return Flow::kNormal;
      case Node::Kind::kSetAttr: {
        Value ns = Lookup(n.targets[0]);
        if (ns.kind != Value::Kind::kNamespace) {
          Fail(n.line, "'set " + n.targets[0] + "." + n.targets[1] + "' needs a namespace, not a " +
                           KindName(ns));
        }
        Value v = Eval(*n.expr);
        for (auto& [k, x] : *ns.dict) {
          if (k == n.targets[1]) {
            x = std::move(v);
            return Flow::kNormal;
          }
        }
        ns.dict->emplace_back(n.targets[1], std::move(v));
        return Flow::kNormal;
      }
      case Node::Kind::kMacro: {
        Value m;
        m.kind = Value::Kind::kMacro;
        m.macro = std::make_shared<const Macro>(Macro{&n});
        (*frames_.back())[n.name] = m;
        return Flow::kNormal;
      }
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Flow ExecFor(const Node& n, Text* out) {
    List items = Iterate(Eval(*n.expr), n.line);
    if (n.filter) {
      List kept;
      for (Value& item : items) {
        Step();
        Frame f;
        Bind(n, item, &f);
        frames_.push_back(&f);
        const bool keep = Truthy(Eval(*n.filter));
        frames_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return Exec(n.else_body, out);
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < len; ++k) {
      Step();
      Frame f;
      Bind(n, items[k], &f);
      Dict loop = {{"index", Value::Int(k + 1)},
                   {"index0", Value::Int(k)},
                   {"revindex", Value::Int(len - k)},
                   {"revindex0", Value::Int(len - k - 1)},
                   {"first", Value::Bool(k == 0)},
                   {"last", Value::Bool(k == len - 1)},
                   {"length", Value::Int(len)},
                   {"previtem", k > 0 ? items[k - 1] : Value()},
                   {"nextitem", k + 1 < len ? items[k + 1] : Value()}};
      f["loop"] = Value::MakeDict(std::move(loop));
      frames_.push_back(&f);
      Flow fl = Exec(n.body, out);
      frames_.pop_back();
      if (fl == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void Bind(const Node& n, const Value& item, Frame* f) {
    if (n.targets.size() == 1) {
      (*f)[n.targets[0]] = item;
      return;
    }
    if (item.kind != Value::Kind::kList || item.list->size() != n.targets.size()) {
      Fail(n.line, "cannot unpack a " + std::string(KindName(item)) + " into " +
                       std::to_string(n.targets.size()) + " loop variables");
    }
    for (size_t k = 0; k < n.targets.size(); ++k) (*f)[n.targets[k]] = (*item.list)[k];
  }

  Value CallMacro(const Macro& m, std::vector<Value>& args,
                  std::vector<std::pair<std::string, Value>>& kwargs, int line) {
    const Node& def = *m.node;
    if (args.size() > def.params.size()) {
      Fail(line, "macro '" + def.name + "' takes " + std::to_string(def.params.size()) +
                     " arguments, got " + std::to_string(args.size()));
    }
    if (++depth_ > kMaxCallDepth) {
      throw LimitError("macro calls nest deeper than " + std::to_string(kMaxCallDepth));
    }
    Frame f;
    std::vector<Frame*> saved = std::move(frames_);
    frames_ = {saved[0], saved[1]};
    for (size_t k = 0; k < def.params.size(); ++k) {
      const std::string& p = def.params[k].first;
      if (k < args.size()) {
        f[p] = args[k];
        continue;
      }
      auto kw =
          std::find_if(kwargs.begin(), kwargs.end(), [&](const auto& x) { return x.first == p; });
      if (kw != kwargs.end()) {
        f[p] = kw->second;
      } else if (def.params[k].second) {
        frames_.push_back(&f);
        f[p] = Eval(*def.params[k].second);
        frames_.pop_back();
      } else {
        f[p] = Value();
      }
    }
    for (const auto& kwarg : kwargs) {
      const auto& k = kwarg.first;  // a plain reference: clang 14 cannot capture a binding
      if (std::none_of(def.params.begin(), def.params.end(),
                       [&](const auto& x) { return x.first == k; })) {
        Fail(line, "macro '" + def.name + "' has no argument '" + k + "'");
      }
    }
    frames_.push_back(&f);
    Text out;
    Exec(def.body, &out);
    frames_ = std::move(saved);
    --depth_;
    return Value::Str(std::move(out));
  }

  Value Call(const Value& callee, std::vector<Value>& args,
             std::vector<std::pair<std::string, Value>>& kwargs, int line) {
    if (callee.kind == Value::Kind::kMacro) return CallMacro(*callee.macro, args, kwargs, line);
    if (callee.kind == Value::Kind::kBuiltin) {
      try {
        Value v = (*callee.builtin)(args, kwargs);
        // Building a list costs a step per item (range() in a loop).
        if (v.kind == Value::Kind::kList) Step(static_cast<int64_t>(v.list->size()));
        return v;
      } catch (const std::invalid_argument& e) {
        Fail(line, e.what());
      }
    }
    Fail(line, std::string(callee.is_undefined() ? "an " : "a ") + KindName(callee) +
                   " value is not callable");
  }

  Value Attr(const Value& obj, const std::string& name, int line) {
    if (obj.is_undefined()) Fail(line, "'" + name + "' of an undefined value");
    if (obj.kind == Value::Kind::kDict) {
      if (name == "get") {
        return MakeBuiltin([obj](std::vector<Value>& a, auto&) {
          if (a.empty() || a.size() > 2)
            throw std::invalid_argument("get() takes 1 or 2 arguments");
          const Value* v = a[0].is_string() ? obj.Find(a[0].s.s) : nullptr;
          return v ? *v : a.size() == 2 ? a[1] : Value::None();
        });
      }
      if (name == "items") return MakeBuiltin([obj](auto&, auto&) { return ItemsOf(obj, 0); });
      if (name == "keys" || name == "values") {
        const bool keys = name == "keys";
        return MakeBuiltin([obj, keys](auto&, auto&) {
          List l;
          for (const auto& [k, v] : *obj.dict) l.push_back(keys ? Value::Str(Text::Data(k)) : v);
          return Value::MakeList(std::move(l));
        });
      }
    }
    if (obj.is_mapping()) {
      const Value* v = obj.Find(name);
      return v ? *v : Value();
    }
    if (obj.is_string()) return StringMethod(obj, name, line);
    return Value();  // Jinja: a missing attribute is undefined
  }

  Value StringMethod(const Value& obj, const std::string& name, int line) {
    const Text t = obj.s;
    auto str_arg = [](std::vector<Value>& a, size_t k, const char* what) -> const Text& {
      if (k >= a.size() || !a[k].is_string()) {
        throw std::invalid_argument(std::string(what) + ": expected a string argument");
      }
      return a[k].s;
    };
    if (name == "split") {
      return MakeBuiltin([t, str_arg](std::vector<Value>& a, auto&) {
        int64_t maxsplit = a.size() > 1 && a[1].kind == Value::Kind::kInt ? a[1].i : -1;
        List parts;
        if (a.empty() || a[0].kind == Value::Kind::kNone) {
          size_t p = 0;
          while (true) {
            while (p < t.s.size() && std::isspace(static_cast<unsigned char>(t.s[p]))) ++p;
            if (p >= t.s.size()) break;
            size_t e = p;
            if (maxsplit == 0) {
              e = t.s.size();
              while (e > p && std::isspace(static_cast<unsigned char>(t.s[e - 1]))) --e;
            } else {
              while (e < t.s.size() && !std::isspace(static_cast<unsigned char>(t.s[e]))) ++e;
            }
            parts.push_back(Value::Str(t.Sub(p, e)));
            if (maxsplit > 0) --maxsplit;
            p = e;
          }
          return Value::MakeList(std::move(parts));
        }
        const std::string& sep = str_arg(a, 0, "split").s;
        if (sep.empty()) throw std::invalid_argument("split: empty separator");
        size_t p = 0;
        while (true) {
          size_t e = maxsplit == 0 ? std::string::npos : t.s.find(sep, p);
          if (e == std::string::npos) {
            parts.push_back(Value::Str(t.Sub(p, t.s.size())));
            break;
          }
          parts.push_back(Value::Str(t.Sub(p, e)));
          p = e + sep.size();
          if (maxsplit > 0) --maxsplit;
        }
        return Value::MakeList(std::move(parts));
      });
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool l = name != "rstrip", r = name != "lstrip";
      return MakeBuiltin([t, l, r, str_arg](std::vector<Value>& a, auto&) {
        if (a.empty() || a[0].kind == Value::Kind::kNone) return Value::Str(TrimText(t, l, r));
        return Value::Str(StripChars(t, str_arg(a, 0, "strip").s, l, r));
      });
    }
    if (name == "startswith" || name == "endswith") {
      const bool starts = name == "startswith";
      return MakeBuiltin([t, starts, str_arg](std::vector<Value>& a, auto&) {
        const std::string& x = str_arg(a, 0, starts ? "startswith" : "endswith").s;
        return Value::Bool(x.size() <= t.s.size() &&
                           (starts ? t.s.compare(0, x.size(), x) == 0
                                   : t.s.compare(t.s.size() - x.size(), x.size(), x) == 0));
      });
    }
    if (name == "upper" || name == "lower") {
      const bool up = name == "upper";
      return MakeBuiltin(
          [t, up](auto&, auto&) { return Value::Str(MapAscii(t, up ? ::toupper : ::tolower)); });
    }
    if (name == "replace") {
      return MakeBuiltin([t, str_arg](std::vector<Value>& a, auto&) {
        return Value::Str(Replace(t, str_arg(a, 0, "replace"), str_arg(a, 1, "replace")));
      });
    }
    Fail(line, "the string method '" + name + "' is not supported");
  }

  static Text Replace(const Text& t, const Text& from, const Text& to) {
    if (from.s.empty()) throw std::invalid_argument("replace: empty search string");
    Text out;
    size_t p = 0;
    while (true) {
      size_t e = t.s.find(from.s, p);
      out.Append(t.Sub(p, e == std::string::npos ? t.s.size() : e));
      if (e == std::string::npos) break;
      out.Append(to);
      p = e + from.s.size();
    }
    return out;
  }

  Value Index(const Value& obj, const Value& key, int line) {
    if (obj.is_undefined()) Fail(line, "indexing an undefined value");
    if (obj.is_mapping()) {
      if (!key.is_string()) return Value();
      const Value* v = obj.Find(key.s.s);
      return v ? *v : Value();
    }
    if (key.kind != Value::Kind::kInt) {
      if (key.is_string()) return Attr(obj, key.s.s, line);
      return Value();
    }
    if (obj.kind == Value::Kind::kList) {
      int64_t n = static_cast<int64_t>(obj.list->size()), k = key.i < 0 ? key.i + n : key.i;
      return k >= 0 && k < n ? (*obj.list)[k] : Value();
    }
    if (obj.is_string()) {
      std::vector<size_t> offs = CodePointOffsets(obj.s.s);
      int64_t n = static_cast<int64_t>(offs.size()) - 1, k = key.i < 0 ? key.i + n : key.i;
      return k >= 0 && k < n ? Value::Str(obj.s.Sub(offs[k], offs[k + 1])) : Value();
    }
    return Value();
  }

  Value Slice(const Value& obj, const Expr& e) {
    auto bound = [&](const ExprP& x) -> std::optional<int64_t> {
      if (!x) return std::nullopt;
      Value v = Eval(*x);
      if (v.kind == Value::Kind::kNone) return std::nullopt;
      if (v.kind != Value::Kind::kInt) Fail(e.line, "slice bounds must be integers");
      return v.i;
    };
    std::optional<int64_t> lo = bound(e.kids[1]), hi = bound(e.kids[2]), st = bound(e.kids[3]);
    const int64_t step = st.value_or(1);
    if (step == 0) Fail(e.line, "slice step cannot be zero");
    std::vector<size_t> offs;
    int64_t n;
    if (obj.kind == Value::Kind::kList) {
      n = static_cast<int64_t>(obj.list->size());
    } else if (obj.is_string()) {
      offs = CodePointOffsets(obj.s.s);
      n = static_cast<int64_t>(offs.size()) - 1;
    } else {
      Fail(e.line, std::string("cannot slice a ") + KindName(obj));
    }
    // Python's slice.indices.
    auto norm = [&](std::optional<int64_t> x, int64_t dflt) {
      if (!x) return dflt;
      int64_t v = *x < 0 ? *x + n : *x;
      if (step > 0) return std::clamp<int64_t>(v, 0, n);
      return std::clamp<int64_t>(v, -1, n - 1);
    };
    const int64_t b = norm(lo, step > 0 ? 0 : n - 1), en = norm(hi, step > 0 ? n : -1);
    std::vector<int64_t> idx;
    for (int64_t k = b; step > 0 ? k < en : k > en; k += step) idx.push_back(k);
    if (obj.kind == Value::Kind::kList) {
      List out;
      for (int64_t k : idx) out.push_back((*obj.list)[k]);
      return Value::MakeList(std::move(out));
    }
    Text out;
    for (int64_t k : idx) out.Append(obj.s.Sub(offs[k], offs[k + 1]));
    return Value::Str(std::move(out));
  }

  Value Binary(const std::string& op, const Value& a, const Value& b, int line) {
    if (op == "==") return Value::Bool(Equal(a, b));
    if (op == "!=") return Value::Bool(!Equal(a, b));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.is_string()) {
        if (!a.is_string()) Fail(line, "'in <string>' needs a string on the left");
        found = b.s.s.find(a.s.s) != std::string::npos;
      } else if (b.kind == Value::Kind::kList) {
        found = std::any_of(b.list->begin(), b.list->end(),
                            [&](const Value& x) { return Equal(a, x); });
      } else if (b.is_mapping()) {
        found = a.is_string() && b.Find(a.s.s) != nullptr;
      } else if (!b.is_undefined()) {
        Fail(line,
             std::string("'in' needs a string, list or dict on the right, not a ") + KindName(b));
      }
      return Value::Bool(op == "in" ? found : !found);
    }
    if (op == "~") {
      Text t = ToText(a);
      t.Append(ToText(b));
      return Value::Str(std::move(t));
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (a.is_number() && b.is_number()) {
        double x = AsDouble(a), y = AsDouble(b);
        c = x < y ? -1 : x > y ? 1 : 0;
      } else if (a.is_string() && b.is_string()) {
        c = a.s.s.compare(b.s.s);
      } else {
        Fail(line, std::string("cannot compare a ") + KindName(a) + " with a " + KindName(b));
      }
      return Value::Bool(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (op == "+" && a.is_string() && b.is_string()) {
      Text t = a.s;
      t.Append(b.s);
      return Value::Str(std::move(t));
    }
    if (op == "+" && a.kind == Value::Kind::kList && b.kind == Value::Kind::kList) {
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::MakeList(std::move(l));
    }
    if (op == "*" && a.is_string() && b.kind == Value::Kind::kInt) {
      if (b.i > 0 && a.s.s.size() * static_cast<size_t>(b.i) > max_output_) {
        throw LimitError("string repetition passes the output limit");
      }
      Text t;
      for (int64_t k = 0; k < b.i; ++k) t.Append(a.s);
      return Value::Str(std::move(t));
    }
    if (!a.is_number() || !b.is_number()) {
      Fail(line,
           std::string("cannot apply '") + op + "' to a " + KindName(a) + " and a " + KindName(b));
    }
    const bool ints = a.kind != Value::Kind::kFloat && b.kind != Value::Kind::kFloat;
    const int64_t x = a.kind == Value::Kind::kInt ? a.i : a.b,
                  y = b.kind == Value::Kind::kInt ? b.i : b.b;
    const double dx = AsDouble(a), dy = AsDouble(b);
    if (op == "+") return ints ? Value::Int(x + y) : Value::Float(dx + dy);
    if (op == "-") return ints ? Value::Int(x - y) : Value::Float(dx - dy);
    if (op == "*") return ints ? Value::Int(x * y) : Value::Float(dx * dy);
    if (dy == 0) Fail(line, "division by zero");
    if (op == "/") return Value::Float(dx / dy);
    if (op == "//") {
      if (ints) return Value::Int(x / y - ((x % y != 0) && ((x < 0) != (y < 0))));
      return Value::Float(std::floor(dx / dy));
    }
    if (op == "%") {
      if (ints) {
        int64_t r = x % y;
        return Value::Int(r != 0 && ((r < 0) != (y < 0)) ? r + y : r);
      }
      double r = std::fmod(dx, dy);
      return Value::Float(r != 0 && ((r < 0) != (dy < 0)) ? r + dy : r);
    }
    Fail(line, "unknown operator '" + op + "'");
  }

  Value Eval(const Expr& e) {
    Step();
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName:
        return Lookup(e.name);
      case Expr::Kind::kAttr:
        return Attr(Eval(*e.kids[0]), e.name, e.line);
      case Expr::Kind::kIndex:
        return Index(Eval(*e.kids[0]), Eval(*e.kids[1]), e.line);
      case Expr::Kind::kSlice:
        return Slice(Eval(*e.kids[0]), e);
      case Expr::Kind::kCall: {
        Value callee = Eval(*e.kids[0]);
        std::vector<Value> args;
        std::vector<std::pair<std::string, Value>> kwargs;
        EvalArgs(e, &args, &kwargs);
        if (callee.is_undefined() && e.kids[0]->kind == Expr::Kind::kName) {
          Fail(e.line, "'" + e.kids[0]->name + "' is undefined (not a supported function)");
        }
        if (callee.is_undefined() && e.kids[0]->kind == Expr::Kind::kAttr) {
          Fail(e.line, "cannot call '" + e.kids[0]->name + "': no such method of a " +
                           KindName(Eval(*e.kids[0]->kids[0])));
        }
        return Call(callee, args, kwargs, e.line);
      }
      case Expr::Kind::kFilter: {
        Value subject = Eval(*e.kids[0]);
        std::vector<Value> args;
        std::vector<std::pair<std::string, Value>> kwargs;
        EvalArgs(e, &args, &kwargs);
        return ApplyFilter(e.name, subject, args, kwargs, e.line);
      }
      case Expr::Kind::kTest: {
        Value subject = Eval(*e.kids[0]);
        std::vector<Value> args;
        std::vector<std::pair<std::string, Value>> kwargs;
        EvalArgs(e, &args, &kwargs);
        const bool r = ApplyTest(e.name, subject, args, e.line);
        return Value::Bool(e.negate ? !r : r);
      }
      case Expr::Kind::kNeg: {
        Value v = Eval(*e.kids[0]);
        if (v.kind == Value::Kind::kInt) return Value::Int(-v.i);
        if (v.kind == Value::Kind::kFloat) return Value::Float(-v.f);
        Fail(e.line, std::string("cannot negate a ") + KindName(v));
      }
      case Expr::Kind::kNot:
        return Value::Bool(!Truthy(Eval(*e.kids[0])));
      case Expr::Kind::kAnd: {
        Value a = Eval(*e.kids[0]);
        return Truthy(a) ? Eval(*e.kids[1]) : a;
      }
      case Expr::Kind::kOr: {
        Value a = Eval(*e.kids[0]);
        return Truthy(a) ? a : Eval(*e.kids[1]);
      }
      case Expr::Kind::kCond:
        if (Truthy(Eval(*e.kids[0]))) return Eval(*e.kids[1]);
        return e.kids[2] ? Eval(*e.kids[2]) : Value();
      case Expr::Kind::kBinary:
        return Binary(e.name, Eval(*e.kids[0]), Eval(*e.kids[1]), e.line);
      case Expr::Kind::kList: {
        List l;
        for (const auto& x : e.args) l.push_back(Eval(*x));
        return Value::MakeList(std::move(l));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = Eval(*e.args[k]);
          if (!key.is_string()) Fail(e.line, "dict keys must be strings");
          Value v = Eval(*e.args[k + 1]);
          auto it =
              std::find_if(d.begin(), d.end(), [&](const auto& x) { return x.first == key.s.s; });
          if (it != d.end())
            it->second = std::move(v);
          else
            d.emplace_back(key.s.s, std::move(v));
        }
        return Value::MakeDict(std::move(d));
      }
    }
    Fail(e.line, "unknown expression");
  }

  void EvalArgs(const Expr& e, std::vector<Value>* args,
                std::vector<std::pair<std::string, Value>>* kwargs) {
    for (const auto& a : e.args) args->push_back(Eval(*a));
    for (const auto& [k, a] : e.kwargs) kwargs->emplace_back(k, Eval(*a));
  }

  static const Value* Kwarg(const std::vector<std::pair<std::string, Value>>& kw,
                            const char* name) {
    for (const auto& [k, v] : kw) {
      if (k == name) return &v;
    }
    return nullptr;
  }

  Value ApplyFilter(const std::string& name, const Value& v, std::vector<Value>& args,
                    std::vector<std::pair<std::string, Value>>& kwargs, int line) {
    auto arg = [&](size_t k, const char* kw) -> const Value* {
      if (k < args.size()) return &args[k];
      return Kwarg(kwargs, kw);
    };
    if (name == "default" || name == "d") {
      const Value* b = arg(1, "boolean");
      const bool use = v.is_undefined() || (b && Truthy(*b) && !Truthy(v));
      if (!use) return v;
      const Value* d = arg(0, "default_value");
      return d ? *d : Value::Literal("");
    }
    if (name == "trim") return Value::Str(TrimText(ToText(v), true, true));
    if (name == "upper" || name == "lower")
      return Value::Str(MapAscii(ToText(v), name == "upper" ? ::toupper : ::tolower));
    if (name == "capitalize") {
      Text t = MapAscii(ToText(v), ::tolower);
      if (!t.s.empty() && static_cast<unsigned char>(t.s[0]) < 0x80)
        t.s[0] = static_cast<char>(::toupper(t.s[0]));
      return Value::Str(std::move(t));
    }
    if (name == "string") return Value::Str(ToText(v));
    if (name == "safe" || name == "e" || name == "escape") {
      if (name != "safe")
        Fail(line, "the '" + name + "' filter is not supported (no HTML escaping)");
      return v;
    }
    if (name == "length" || name == "count") {
      if (v.is_string())
        return Value::Int(static_cast<int64_t>(CodePointOffsets(v.s.s).size() - 1));
      if (v.kind == Value::Kind::kList) return Value::Int(static_cast<int64_t>(v.list->size()));
      if (v.is_mapping()) return Value::Int(static_cast<int64_t>(v.dict->size()));
      if (v.is_undefined()) return Value::Int(0);
      Fail(line, std::string("length of a ") + KindName(v));
    }
    if (name == "list") return Value::MakeList(Iterate(v, line));
    if (name == "first" || name == "last") {
      List l = Iterate(v, line);
      if (l.empty()) return Value();
      return name == "first" ? l.front() : l.back();
    }
    if (name == "reverse") {
      if (v.is_string()) {
        List l = Iterate(v, line);
        Text t;
        for (auto it = l.rbegin(); it != l.rend(); ++it) t.Append(it->s);
        return Value::Str(std::move(t));
      }
      List l = Iterate(v, line);
      std::reverse(l.begin(), l.end());
      return Value::MakeList(std::move(l));
    }
    if (name == "join") {
      const Value* sep = arg(0, "d");
      const Value* attr = arg(1, "attribute");
      Text out;
      bool first = true;
      for (const Value& x : Iterate(v, line)) {
        if (!first && sep) out.Append(ToText(*sep));
        first = false;
        out.Append(ToText(attr ? Attr(x, ToText(*attr).s, line) : x));
      }
      return Value::Str(std::move(out));
    }
    if (name == "tojson") {
      if (arg(0, "indent") && !arg(0, "indent")->is_undefined() &&
          arg(0, "indent")->kind != Value::Kind::kNone) {
        Fail(line, "tojson with an indent is not supported");
      }
      Text t;
      AppendJson(v, line, &t.s);
      if (HasData(v)) t.data.emplace_back(0, t.s.size());
      return Value::Str(std::move(t));
    }
    if (name == "items") return v.is_undefined() ? Value::MakeList({}) : ItemsOf(v, line);
    if (name == "dictsort") {
      Value items = ItemsOf(v, line);
      const Value* cs = arg(0, "case_sensitive");
      const bool case_sensitive = cs && Truthy(*cs);
      if (arg(1, "by") || arg(2, "reverse"))
        Fail(line, "dictsort's 'by' and 'reverse' are not supported");
      auto key = [&](const Value& kv) {
        std::string k = (*kv.list)[0].s.s;
        if (!case_sensitive) std::transform(k.begin(), k.end(), k.begin(), ::tolower);
        return k;
      };
      std::stable_sort(items.list->begin(), items.list->end(),
                       [&](const Value& a, const Value& b) { return key(a) < key(b); });
      return items;
    }
    if (name == "map") {
      List out;
      const Value* attr = Kwarg(kwargs, "attribute");
      if (attr) {
        for (const Value& x : Iterate(v, line)) out.push_back(Attr(x, ToText(*attr).s, line));
        return Value::MakeList(std::move(out));
      }
      if (args.empty() || !args[0].is_string()) Fail(line, "map needs a filter name or attribute=");
      std::vector<Value> rest(args.begin() + 1, args.end());
      for (const Value& x : Iterate(v, line)) {
        std::vector<Value> a = rest;
        std::vector<std::pair<std::string, Value>> kw;
        out.push_back(ApplyFilter(args[0].s.s, x, a, kw, line));
      }
      return Value::MakeList(std::move(out));
    }
    if (name == "replace") {
      if (args.size() < 2 || !args[0].is_string() || !args[1].is_string())
        Fail(line, "replace needs two strings");
      try {
        return Value::Str(Replace(ToText(v), args[0].s, args[1].s));
      } catch (const std::invalid_argument& e) {
        Fail(line, e.what());
      }
    }
    if (name == "int") {
      if (v.kind == Value::Kind::kInt) return v;
      if (v.kind == Value::Kind::kFloat) return Value::Int(static_cast<int64_t>(v.f));
      if (v.kind == Value::Kind::kBool) return Value::Int(v.b);
      if (v.is_string()) {
        int64_t x = 0;
        auto [p, ec] = std::from_chars(v.s.s.data(), v.s.s.data() + v.s.s.size(), x);
        if (ec == std::errc() && p == v.s.s.data() + v.s.s.size()) return Value::Int(x);
      }
      return Value::Int(0);
    }
    if (name == "float") {
      if (v.is_number()) return Value::Float(AsDouble(v));
      return Value::Float(0);
    }
    if (name == "abs") {
      if (v.kind == Value::Kind::kInt) return Value::Int(v.i < 0 ? -v.i : v.i);
      if (v.kind == Value::Kind::kFloat) return Value::Float(std::fabs(v.f));
      Fail(line, std::string("abs of a ") + KindName(v));
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
      const bool by_attr = name == "selectattr" || name == "rejectattr";
      const bool keep_if = name == "select" || name == "selectattr";
      size_t k = 0;
      std::string attr;
      if (by_attr) {
        if (args.empty() || !args[0].is_string()) Fail(line, name + " needs an attribute name");
        attr = args[k++].s.s;
      }
      std::string test = k < args.size() && args[k].is_string() ? args[k++].s.s : "";
      std::vector<Value> targs(args.begin() + std::min(k, args.size()), args.end());
      List out;
      for (const Value& x : Iterate(v, line)) {
        Value subject = by_attr ? Attr(x, attr, line) : x;
        bool r = test.empty() ? Truthy(subject) : ApplyTest(test, subject, targs, line);
        if (r == keep_if) out.push_back(x);
      }
      return Value::MakeList(std::move(out));
    }
    Fail(line, "the '" + name + "' filter is not supported");
  }

  bool ApplyTest(const std::string& name, const Value& v, std::vector<Value>& args, int line) {
    using K = Value::Kind;
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.kind == K::kNone;
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_mapping();
    if (name == "sequence" || name == "iterable") {
      return v.is_string() || v.kind == K::kList || v.kind == K::kDict;
    }
    if (name == "boolean") return v.kind == K::kBool;
    if (name == "true") return v.kind == K::kBool && v.b;
    if (name == "false") return v.kind == K::kBool && !v.b;
    if (name == "number") return v.is_number();
    if (name == "integer") return v.kind == K::kInt;
    if (name == "float") return v.kind == K::kFloat;
    if (name == "callable") return v.kind == K::kMacro || v.kind == K::kBuiltin;
    if (name == "lower" || name == "upper") {
      if (!v.is_string()) return false;
      return std::none_of(v.s.s.begin(), v.s.s.end(), [&](char c) {
        return name == "lower" ? std::isupper(static_cast<unsigned char>(c))
                               : std::islower(static_cast<unsigned char>(c));
      });
    }
    if (name == "odd" || name == "even") {
      if (v.kind != K::kInt) Fail(line, "'" + name + "' needs an integer");
      return (v.i % 2 != 0) == (name == "odd");
    }
    auto other = [&]() -> const Value& {
      if (args.empty()) Fail(line, "the '" + name + "' test needs an argument");
      return args[0];
    };
    if (name == "equalto" || name == "eq" || name == "==" || name == "sameas")
      return Equal(v, other());
    if (name == "ne" || name == "!=") return !Equal(v, other());
    if (name == "in") return Truthy(Binary("in", v, other(), line));
    if (name == "lt" || name == "gt" || name == "le" || name == "ge") {
      static const std::unordered_map<std::string, std::string> ops = {
          {"lt", "<"}, {"gt", ">"}, {"le", "<="}, {"ge", ">="}};
      return Truthy(Binary(ops.at(name), v, other(), line));
    }
    Fail(line, "the '" + name + "' test is not supported");
  }

  Frame globals_, top_;
  std::vector<Frame*> frames_;
  size_t max_output_;
  int depth_ = 0;
  int64_t steps_ = 0;
  int64_t max_steps_;
};

void AddGlobals(Frame* g) {
  (*g)["range"] = MakeBuiltin([](std::vector<Value>& a, auto&) {
    if (a.empty() || a.size() > 3) throw std::invalid_argument("range() takes 1 to 3 arguments");
    for (const Value& x : a) {
      if (x.kind != Value::Kind::kInt) throw std::invalid_argument("range() takes integers");
    }
    int64_t start = a.size() == 1 ? 0 : a[0].i, stop = a.size() == 1 ? a[0].i : a[1].i,
            step = a.size() == 3 ? a[2].i : 1;
    if (step == 0) throw std::invalid_argument("range() step cannot be zero");
    // The length first, so an oversized range costs nothing (in 128 bits: no overflow).
    const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
    const __int128 len = span <= 0 ? 0
                                   : (span + (step > 0 ? step : -__int128{step}) - 1) /
                                         (step > 0 ? step : -__int128{step});
    if (len > kMaxRange) {
      throw std::invalid_argument("range() longer than " + std::to_string(kMaxRange));
    }
    List l;
    l.reserve(static_cast<size_t>(len));
    for (int64_t k = 0; k < static_cast<int64_t>(len); ++k)
      l.push_back(Value::Int(start + k * step));
    return Value::MakeList(std::move(l));
  });
  (*g)["namespace"] =
      MakeBuiltin([](std::vector<Value>& a, std::vector<std::pair<std::string, Value>>& kw) {
        Value ns;
        ns.kind = Value::Kind::kNamespace;
        ns.dict = std::make_shared<Dict>();
        for (const Value& x : a) {
          if (x.kind != Value::Kind::kDict)
            throw std::invalid_argument("namespace() takes a dict or keywords");
          for (const auto& kv : *x.dict) ns.dict->push_back(kv);
        }
        for (auto& kv : kw) ns.dict->push_back(kv);
        return ns;
      });
  (*g)["dict"] = MakeBuiltin([](auto&, std::vector<std::pair<std::string, Value>>& kw) {
    return Value::MakeDict(Dict(kw.begin(), kw.end()));
  });
  (*g)["raise_exception"] = MakeBuiltin([](std::vector<Value>& a, auto&) -> Value {
    throw std::invalid_argument("raise_exception: " + (a.empty() ? std::string() : ToText(a[0]).s));
  });
  (*g)["strftime_now"] = MakeBuiltin([](std::vector<Value>& a, auto&) {
    if (a.empty() || !a[0].is_string()) throw std::invalid_argument("strftime_now needs a format");
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    size_t n = std::strftime(buf, sizeof buf, a[0].s.s.c_str(), &tm);
    return Value::Literal(std::string(buf, n));
  });
}

}  // namespace
}  // namespace jinja

absl::StatusOr<JinjaTemplate> JinjaTemplate::Parse(std::string_view source) {
  JinjaTemplate t;
  try {
    t.body_ = std::make_shared<const jinja::Body>(jinja::Parse(source));
  } catch (const jinja::Error& e) {
    if (e.kind == jinja::Error::Kind::kUnsupported) return absl::UnimplementedError(e.what());
    return absl::InvalidArgumentError(e.what());
  }
  t.source_ = std::make_shared<const std::string>(source);
  return t;
}

absl::StatusOr<std::string> JinjaTemplate::Render(
    const Json& data, const Json& settings, size_t max_output_bytes,
    std::vector<std::pair<size_t, size_t>>* data_ranges, int64_t max_steps) const {
  if (!data.is_object() || !settings.is_object()) {
    return InvalidArgumentError("chat template: data and settings must be objects");
  }
  jinja::Renderer r(max_output_bytes, max_steps);
  jinja::AddGlobals(&r.globals());
  for (const auto& [k, v] : settings.AsMembers()) r.globals()[k] = jinja::FromJson(v, false);
  for (const auto& [k, v] : data.AsMembers()) r.globals()[k] = jinja::FromJson(v, true);
  try {
    jinja::Text out = r.RenderTop(*body_);
    if (data_ranges != nullptr) *data_ranges = std::move(out.data);
    return std::move(out.s);
  } catch (const jinja::Error& e) {
    return absl::InvalidArgumentError(e.what());
  } catch (const jinja::LimitError& e) {
    return absl::ResourceExhaustedError(std::string("chat template: ") + e.what());
  }
}

}  // namespace gannet::tokenizer
