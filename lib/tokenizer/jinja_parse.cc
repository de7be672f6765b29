// Lexer and parser of the chat-template Jinja subset (jinja_template.h lists what it covers).
// Whitespace follows Jinja2 with Hugging Face's settings: trim_blocks (the first newline after a
// block or comment tag is dropped), lstrip_blocks (spaces and tabs from a line's start up to a
// block or comment tag are dropped), and the `-` markers that strip all whitespace beside a tag.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

#include "lib/tokenizer/jinja_ast.h"

namespace gannet::tokenizer::jinja {
namespace {

struct Tok {
  enum class T {
    kText,
    kVarBegin,
    kVarEnd,
    kBlockBegin,
    kBlockEnd,
    kName,
    kString,
    kInt,
    kFloat,
    kOp,
    kEof
  };
  T t;
  std::string s;
  int line;
};

[[noreturn]] void Fail(int line, const std::string& what) {
  throw Error(Error::Kind::kSyntax, line, what);
}

// Number literals of a template (untrusted): one past the range of int64 or double is a syntax
// error naming the line, never an exception escaping the parser (jinja_template_fuzz found
// `m.99999999999999999999`).
template <typename Tok>
Value IntLiteral(const Tok& t) {
  try {
    return Value::Int(std::stoll(t.s));
  } catch (const std::exception&) {
    Fail(t.line, "integer literal out of range: " + t.s.substr(0, 32));
  }
}
template <typename Tok>
Value FloatLiteral(const Tok& t) {
  try {
    return Value::Float(std::stod(t.s));
  } catch (const std::exception&) {
    Fail(t.line, "float literal out of range: " + t.s.substr(0, 32));
  }
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Tok> Run() {
    bool strip_next = false;  // a `-` closed the last tag
    bool trim_next = false;   // trim_blocks after a block or comment tag
    while (pos_ < src_.size()) {
      size_t open = FindTagOpen(pos_);
      std::string text(src_.substr(pos_, open - pos_));
      const size_t text_begin = pos_;
      CountLines(pos_, open);
      pos_ = open;
      if (strip_next) {
        size_t k = 0;
        while (k < text.size() && IsSpace(text[k])) ++k;
        text.erase(0, k);
      } else if (trim_next) {
        if (text.rfind("\r\n", 0) == 0)
          text.erase(0, 2);
        else if (!text.empty() && text[0] == '\n')
          text.erase(0, 1);
      }
      strip_next = trim_next = false;
      if (open == src_.size()) {
        Emit(Tok::T::kText, std::move(text));
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char mod = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (mod == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (mod != '+' && kind != '{') {
        // lstrip_blocks: only spaces/tabs between the line's start and the tag.
        // Judged on the source, before trim_blocks took a newline away.
        const std::string_view raw = src_.substr(text_begin, open - text_begin);
        size_t k = raw.size();
        while (k > 0 && (raw[k - 1] == ' ' || raw[k - 1] == '\t')) --k;
        const bool line_start =
            k > 0 ? raw[k - 1] == '\n' : text_begin == 0 || src_[text_begin - 1] == '\n';
        if (line_start) text.erase(text.size() - std::min(text.size(), raw.size() - k));
      }
      Emit(Tok::T::kText, std::move(text));
      pos_ = open + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      if (kind == '#') {
        size_t end = src_.find("#}", pos_);
        if (end == std::string_view::npos) Fail(line_, "comment '{#' is never closed");
        CountLines(pos_, end);
        strip_next = end > pos_ && src_[end - 1] == '-';
        trim_next = !strip_next;
        pos_ = end + 2;
        continue;
      }
      const bool block = kind == '%';
      Emit(block ? Tok::T::kBlockBegin : Tok::T::kVarBegin, "");
      const std::string_view close = block ? "%}" : "}}";
      while (true) {
        SkipSpace();
        if (pos_ >= src_.size())
          Fail(line_, block ? "'{%' is never closed" : "'{{' is never closed");
        if ((src_[pos_] == '-' || src_[pos_] == '+') && src_.substr(pos_ + 1, 2) == close) {
          strip_next = src_[pos_] == '-';
          pos_ += 1;
        }
        if (src_.substr(pos_, 2) == close) {
          pos_ += 2;
          Emit(block ? Tok::T::kBlockEnd : Tok::T::kVarEnd, "");
          if (block && !strip_next) trim_next = true;
          break;
        }
        LexOne();
      }
    }
    Emit(Tok::T::kEof, "");
    return std::move(toks_);
  }

 private:
  size_t FindTagOpen(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string_view::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
        return p;
      }
    }
    return src_.size();
  }
  void CountLines(size_t a, size_t b) {
    for (size_t k = a; k < b; ++k) line_ += src_[k] == '\n';
  }
  void SkipSpace() {
    while (pos_ < src_.size() && IsSpace(src_[pos_])) {
      line_ += src_[pos_] == '\n';
      ++pos_;
    }
  }
  void Emit(Tok::T t, std::string s) {
    if (t == Tok::T::kText && s.empty()) return;
    toks_.push_back(Tok{t, std::move(s), line_});
  }
  void LexOne() {
    const char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = pos_;
      while (pos_ < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
        ++pos_;
      }
      Emit(Tok::T::kName, std::string(src_.substr(b, pos_ - b)));
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t b = pos_;
      while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
      bool is_float = false;
      if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
          std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
        is_float = true;
        ++pos_;
        while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
      }
      if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
        size_t q = pos_ + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
          is_float = true;
          pos_ = q;
          while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
        }
      }
      Emit(is_float ? Tok::T::kFloat : Tok::T::kInt, std::string(src_.substr(b, pos_ - b)));
      return;
    }
    if (c == '\'' || c == '"') {
      std::string out;
      ++pos_;
      while (true) {
        if (pos_ >= src_.size()) Fail(line_, "string literal is never closed");
        char d = src_[pos_++];
        if (d == c) break;
        if (d == '\n') ++line_;
        if (d == '\\' && pos_ < src_.size()) {
          char e = src_[pos_++];
          switch (e) {
            case 'n':
              out += '\n';
              break;
            case 't':
              out += '\t';
              break;
            case 'r':
              out += '\r';
              break;
            case '\\':
              out += '\\';
              break;
            case '\'':
              out += '\'';
              break;
            case '"':
              out += '"';
              break;
            default:
              Fail(line_, std::string("unsupported escape '\\") + e + "' in a string literal");
          }
          continue;
        }
        out += d;
      }
      Emit(Tok::T::kString, std::move(out));
      return;
    }
    static const char* kTwo[] = {"==", "!=", "<=", ">=", "//", "**"};
    for (const char* op : kTwo) {
      if (src_.substr(pos_, 2) == op) {
        Emit(Tok::T::kOp, op);
        pos_ += 2;
        return;
      }
    }
    if (std::string_view("+-*/%~<>=()[]{}.,:|").find(c) != std::string_view::npos) {
      Emit(Tok::T::kOp, std::string(1, c));
      ++pos_;
      return;
    }
    Fail(line_, std::string("unexpected character '") + c + "'");
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Tok> toks_;
};

class Parser {
 public:
  explicit Parser(std::vector<Tok> toks) : toks_(std::move(toks)) {}

  Body Run() {
    Body body = ParseBody({});
    if (Peek().t != Tok::T::kEof) Fail(Peek().line, "unexpected '" + Peek().s + "'");
    return body;
  }

 private:
  // A template is untrusted: every recursive production (a block inside a block, a parenthesis,
  // list, call or unary operator inside an expression) holds one of these, so a template nested
  // past kMaxNesting is a syntax error naming its line instead of a stack overflow in the parser
  // or, later, in the evaluator walking the tree (jinja_template_fuzz: thousands of '(').
  static constexpr int kMaxNesting = 256;
  class Nesting {
   public:
    explicit Nesting(Parser* p) : p_(p) {
      if (++p_->depth_ > kMaxNesting) {
        --p_->depth_;
        Fail(p_->Peek().line, "nested more than " + std::to_string(kMaxNesting) + " levels deep");
      }
    }
    ~Nesting() { --p_->depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser* p_;
  };

  const Tok& Peek(size_t ahead = 0) const {
    size_t k = std::min(i_ + ahead, toks_.size() - 1);
    return toks_[k];
  }
  Tok Next() {
    Tok t = Peek();
    if (i_ < toks_.size() - 1) ++i_;
    return t;
  }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).t == Tok::T::kOp && Peek(ahead).s == op;
  }
  bool IsName(const char* n, size_t ahead = 0) const {
    return Peek(ahead).t == Tok::T::kName && Peek(ahead).s == n;
  }
  void ExpectOp(const char* op) {
    if (!IsOp(op))
      Fail(Peek().line, std::string("expected '") + op + "', found '" + Peek().s + "'");
    Next();
  }
  void ExpectName(const char* n) {
    if (!IsName(n))
      Fail(Peek().line, std::string("expected '") + n + "', found '" + Peek().s + "'");
    Next();
  }
  std::string TakeName() {
    if (Peek().t != Tok::T::kName) Fail(Peek().line, "expected a name, found '" + Peek().s + "'");
    return Next().s;
  }
  void ExpectBlockEnd() {
    if (Peek().t != Tok::T::kBlockEnd) Fail(Peek().line, "expected '%}', found '" + Peek().s + "'");
    Next();
  }

  // Parses nodes until a block tag whose name is in `stops` (left unconsumed, after its '{%').
  Body ParseBody(const std::vector<std::string>& stops) {
    const Nesting nesting(this);
    Body body;
    while (true) {
      const Tok& t = Peek();
      if (t.t == Tok::T::kEof) {
        if (!stops.empty()) Fail(t.line, "missing '{% " + stops.back() + " %}'");
        return body;
      }
      if (t.t == Tok::T::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->line = t.line;
        n->text = Next().s;
        body.push_back(std::move(n));
        continue;
      }
      if (t.t == Tok::T::kVarBegin) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = Next().line;
        n->expr = ParseExpr();
        if (Peek().t != Tok::T::kVarEnd)
          Fail(Peek().line, "expected '}}', found '" + Peek().s + "'");
        Next();
        body.push_back(std::move(n));
        continue;
      }
      if (t.t != Tok::T::kBlockBegin) Fail(t.line, "unexpected '" + t.s + "'");
      const Tok& name = Peek(1);
      for (const std::string& s : stops) {
        if (name.t == Tok::T::kName && name.s == s) return body;
      }
      Next();
      body.push_back(ParseStatement());
    }
  }

  std::unique_ptr<Node> ParseStatement() {
    const int line = Peek().line;
    const std::string kw = TakeName();
    auto n = std::make_unique<Node>();
    n->line = line;
    if (kw == "if") {
      n->kind = Node::Kind::kIf;
      ExprP cond = ParseExpr();
      ExpectBlockEnd();
      while (true) {
        Body b = ParseBody({"elif", "else", "endif"});
        n->branches.emplace_back(std::move(cond), std::move(b));
        Next();  // '{%'
        const std::string k = TakeName();
        if (k == "elif") {
          cond = ParseExpr();
          ExpectBlockEnd();
          continue;
        }
        if (k == "else") {
          ExpectBlockEnd();
          n->else_body = ParseBody({"endif"});
          Next();
          ExpectName("endif");
        }
        ExpectBlockEnd();
        break;
      }
      return n;
    }
    if (kw == "for") {
      n->kind = Node::Kind::kFor;
      n->targets.push_back(TakeName());
      while (IsOp(",")) {
        Next();
        n->targets.push_back(TakeName());
      }
      ExpectName("in");
      n->expr = ParseOr();  // `if` after the iterable filters the loop
      if (IsName("if")) {
        Next();
        n->filter = ParseExpr();
      }
      if (IsName("recursive"))
        throw Error(Error::Kind::kUnsupported, line, "recursive loops are not supported");
      ExpectBlockEnd();
      n->body = ParseBody({"else", "endfor"});
      Next();
      if (TakeName() == "else") {
        ExpectBlockEnd();
        n->else_body = ParseBody({"endfor"});
        Next();
        ExpectName("endfor");
      }
      ExpectBlockEnd();
      return n;
    }
    if (kw == "set") {
      std::string target = TakeName();
      if (IsOp(".")) {
        Next();
        n->kind = Node::Kind::kSetAttr;
        n->targets = {target, TakeName()};
      } else {
        n->kind = Node::Kind::kSet;
        n->targets = {target};
        if (IsOp(","))
          throw Error(Error::Kind::kUnsupported, line,
                      "'set' with several targets is not supported");
      }
      if (Peek().t == Tok::T::kBlockEnd) {
        throw Error(Error::Kind::kUnsupported, line,
                    "block 'set' ({% set x %}...{% endset %}) is not supported");
      }
      ExpectOp("=");
      n->expr = ParseExpr();
      ExpectBlockEnd();
      return n;
    }
    if (kw == "macro") {
      n->kind = Node::Kind::kMacro;
      n->name = TakeName();
      ExpectOp("(");
      while (!IsOp(")")) {
        std::string p = TakeName();
        ExprP def;
        if (IsOp("=")) {
          Next();
          def = ParseExpr();
        }
        n->params.emplace_back(std::move(p), std::move(def));
        if (!IsOp(")")) ExpectOp(",");
      }
      Next();
      ExpectBlockEnd();
      n->body = ParseBody({"endmacro"});
      Next();
      ExpectName("endmacro");
      ExpectBlockEnd();
      return n;
    }
    if (kw == "break" || kw == "continue") {
      n->kind = kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      ExpectBlockEnd();
      return n;
    }
    if (kw == "elif" || kw == "else" || kw == "endif" || kw == "endfor" || kw == "endmacro") {
      Fail(line, "'{% " + kw + " %}' without its opening tag");
    }
    throw Error(Error::Kind::kUnsupported, line, "the '" + kw + "' tag is not supported");
  }

  ExprP Make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  ExprP ParseExpr() {
    const Nesting nesting(this);
    ExprP e = ParseOr();
    if (IsName("if")) {
      const int line = Next().line;
      auto c = Make(Expr::Kind::kCond, line);
      ExprP cond = ParseOr();
      ExprP other;
      if (IsName("else")) {
        Next();
        other = ParseExpr();
      }
      c->kids.push_back(std::move(cond));
      c->kids.push_back(std::move(e));
      c->kids.push_back(std::move(other));  // null: undefined when the condition is false
      return c;
    }
    return e;
  }
  ExprP ParseOr() {
    ExprP e = ParseAnd();
    while (IsName("or")) {
      auto n = Make(Expr::Kind::kOr, Next().line);
      n->kids.push_back(std::move(e));
      n->kids.push_back(ParseAnd());
      e = std::move(n);
    }
    return e;
  }
  ExprP ParseAnd() {
    ExprP e = ParseNot();
    while (IsName("and")) {
      auto n = Make(Expr::Kind::kAnd, Next().line);
      n->kids.push_back(std::move(e));
      n->kids.push_back(ParseNot());
      e = std::move(n);
    }
    return e;
  }
  ExprP ParseNot() {
    const Nesting nesting(this);
    if (IsName("not")) {
      auto n = Make(Expr::Kind::kNot, Next().line);
      n->kids.push_back(ParseNot());
      return n;
    }
    return ParseCompare();
  }
  ExprP ParseCompare() {
    ExprP e = ParseConcat();
    while (true) {
      std::string op;
      const int line = Peek().line;
      if (Peek().t == Tok::T::kOp && (Peek().s == "==" || Peek().s == "!=" || Peek().s == "<" ||
                                      Peek().s == ">" || Peek().s == "<=" || Peek().s == ">=")) {
        op = Next().s;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "not in";
      } else {
        return e;
      }
      auto n = Make(Expr::Kind::kBinary, line);
      n->name = op;
      n->kids.push_back(std::move(e));
      n->kids.push_back(ParseConcat());
      e = std::move(n);
    }
  }
  ExprP Binary(ExprP left, const std::string& op, int line, ExprP right) {
    auto n = Make(Expr::Kind::kBinary, line);
    n->name = op;
    n->kids.push_back(std::move(left));
    n->kids.push_back(std::move(right));
    return n;
  }
  ExprP ParseConcat() {
    ExprP e = ParseAdd();
    while (IsOp("~")) {
      const int line = Next().line;
      e = Binary(std::move(e), "~", line, ParseAdd());
    }
    return e;
  }
  ExprP ParseAdd() {
    ExprP e = ParseMul();
    while (IsOp("+") || IsOp("-")) {
      Tok t = Next();
      e = Binary(std::move(e), t.s, t.line, ParseMul());
    }
    return e;
  }
  ExprP ParseMul() {
    ExprP e = ParseUnary();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      Tok t = Next();
      e = Binary(std::move(e), t.s, t.line, ParseUnary());
    }
    return e;
  }
  ExprP ParseUnary() {
    const Nesting nesting(this);
    if (IsOp("-")) {
      auto n = Make(Expr::Kind::kNeg, Next().line);
      n->kids.push_back(ParseUnary());
      return n;
    }
    if (IsOp("+")) {
      Next();
      return ParseUnary();
    }
    if (IsOp("**")) Fail(Peek().line, "unexpected '**'");
    return ParseFilters(ParsePostfix(ParsePrimary()));
  }
  void ParseArgs(Expr* e) {
    // After '(' : positional then keyword arguments, up to ')'.
    while (!IsOp(")")) {
      if (Peek().t == Tok::T::kName && IsOp("=", 1)) {
        std::string k = Next().s;
        Next();
        e->kwargs.emplace_back(std::move(k), ParseExpr());
      } else {
        if (!e->kwargs.empty()) Fail(Peek().line, "positional argument after a keyword argument");
        e->args.push_back(ParseExpr());
      }
      if (!IsOp(")")) ExpectOp(",");
    }
    Next();
  }
  ExprP ParsePostfix(ExprP e) {
    while (true) {
      if (IsOp(".")) {
        const int line = Next().line;
        auto n = Make(Expr::Kind::kAttr, line);
        if (Peek().t == Tok::T::kInt) {
          n->kind = Expr::Kind::kIndex;
          n->kids.push_back(std::move(e));
          auto lit = Make(Expr::Kind::kLiteral, line);
          lit->literal = IntLiteral(Next());
          n->kids.push_back(std::move(lit));
        } else {
          n->name = TakeName();
          n->kids.push_back(std::move(e));
        }
        e = std::move(n);
      } else if (IsOp("[")) {
        const int line = Next().line;
        ExprP a, b, c;
        bool slice = false;
        if (!IsOp(":")) a = ParseExpr();
        if (IsOp(":")) {
          slice = true;
          Next();
          if (!IsOp("]") && !IsOp(":")) b = ParseExpr();
          if (IsOp(":")) {
            Next();
            if (!IsOp("]")) c = ParseExpr();
          }
        }
        ExpectOp("]");
        auto n = Make(slice ? Expr::Kind::kSlice : Expr::Kind::kIndex, line);
        n->kids.push_back(std::move(e));
        n->kids.push_back(std::move(a));
        if (slice) {
          n->kids.push_back(std::move(b));
          n->kids.push_back(std::move(c));
        }
        e = std::move(n);
      } else if (IsOp("(")) {
        auto n = Make(Expr::Kind::kCall, Next().line);
        n->kids.push_back(std::move(e));
        ParseArgs(n.get());
        e = std::move(n);
      } else {
        return e;
      }
    }
  }
  ExprP ParseFilters(ExprP e) {
    while (true) {
      if (IsOp("|")) {
        auto n = Make(Expr::Kind::kFilter, Next().line);
        n->name = TakeName();
        n->kids.push_back(std::move(e));
        if (IsOp("(")) {
          Next();
          ParseArgs(n.get());
        }
        e = ParsePostfix(std::move(n));
      } else if (IsName("is")) {
        auto n = Make(Expr::Kind::kTest, Next().line);
        if (IsName("not")) {
          Next();
          n->negate = true;
        }
        n->name = TakeName();
        n->kids.push_back(std::move(e));
        if (IsOp("(")) {
          Next();
          ParseArgs(n.get());
        } else if (Peek().t == Tok::T::kString || Peek().t == Tok::T::kInt ||
                   Peek().t == Tok::T::kFloat) {
          n->args.push_back(ParsePrimary());  // `is equalto 3`
        }
        e = std::move(n);
      } else {
        return e;
      }
    }
  }
  ExprP ParsePrimary() {
    const Tok t = Next();
    switch (t.t) {
      case Tok::T::kString: {
        auto e = Make(Expr::Kind::kLiteral, t.line);
        std::string s = t.s;
        while (Peek().t == Tok::T::kString) s += Next().s;  // adjacent literals join
        e->literal = Value::Literal(std::move(s));
        return e;
      }
      case Tok::T::kInt: {
        auto e = Make(Expr::Kind::kLiteral, t.line);
        e->literal = IntLiteral(t);
        return e;
      }
      case Tok::T::kFloat: {
        auto e = Make(Expr::Kind::kLiteral, t.line);
        e->literal = FloatLiteral(t);
        return e;
      }
      case Tok::T::kName: {
        auto e = Make(Expr::Kind::kLiteral, t.line);
        if (t.s == "true" || t.s == "True")
          e->literal = Value::Bool(true);
        else if (t.s == "false" || t.s == "False")
          e->literal = Value::Bool(false);
        else if (t.s == "none" || t.s == "None")
          e->literal = Value::None();
        else {
          e->kind = Expr::Kind::kName;
          e->name = t.s;
        }
        return e;
      }
      case Tok::T::kOp:
        if (t.s == "(") {
          ExprP e = ParseExpr();
          if (IsOp(",")) throw Error(Error::Kind::kUnsupported, t.line, "tuples are not supported");
          ExpectOp(")");
          return e;
        }
        if (t.s == "[") {
          auto e = Make(Expr::Kind::kList, t.line);
          while (!IsOp("]")) {
            e->args.push_back(ParseExpr());
            if (!IsOp("]")) ExpectOp(",");
          }
          Next();
          return e;
        }
        if (t.s == "{") {
          auto e = Make(Expr::Kind::kDict, t.line);
          while (!IsOp("}")) {
            e->args.push_back(ParseExpr());
            ExpectOp(":");
            e->args.push_back(ParseExpr());
            if (!IsOp("}")) ExpectOp(",");
          }
          Next();
          return e;
        }
        break;
      default:
        break;
    }
    Fail(t.line, t.t == Tok::T::kEof || t.t == Tok::T::kBlockEnd || t.t == Tok::T::kVarEnd
                     ? std::string("expression ends early")
                     : "unexpected '" + t.s + "' in an expression");
  }

  std::vector<Tok> toks_;
  size_t i_ = 0;
  int depth_ = 0;  // nesting of the recursive productions now open (Nesting)
};

}  // namespace

Body Parse(std::string_view source) { return Parser(Lexer(source).Run()).Run(); }

}  // namespace gannet::tokenizer::jinja
