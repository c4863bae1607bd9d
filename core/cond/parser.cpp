#include "core/cond/parser.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace gotap::cond {

namespace {

enum class Tok {
  End,
  Ident,
  Int,
  Float,
  Duration,
  String,
  Op,
  LParen,
  RParen,
  LBrack,
  RBrack,
  Dot,
  Comma
};

struct Token {
  Tok kind = Tok::End;
  size_t pos = 0;
  std::string text;  // Ident, Op; String: the unquoted bytes
  uint64_t u = 0;
  double f = 0;
  bool neg = false;
};

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '~';
}
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// A duration's unit at s; its length in *n and nanoseconds per unit, or 0.
uint64_t unit_at(std::string_view s, size_t* n) {
  static const struct {
    const char* name;
    uint64_t ns;
  } units[] = {{"ns", 1},         {"us", 1000},       {"\xc2\xb5s", 1000}, {"ms", 1000000},
               {"s", 1000000000}, {"m", 60000000000}, {"h", 3600000000000}};
  // Longest first: "ms" before "m".
  uint64_t best = 0;
  size_t best_n = 0;
  for (const auto& u : units) {
    std::string_view name(u.name);
    if (s.substr(0, name.size()) == name && name.size() > best_n) {
      best = u.ns;
      best_n = name.size();
    }
  }
  *n = best_n;
  return best;
}

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  bool next(Token* t, ExprError* err) {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    *t = Token{};
    t->pos = i_;
    if (i_ >= s_.size()) return true;
    char c = s_[i_];
    if (ident_start(c)) {
      size_t b = i_++;
      while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
      t->kind = Tok::Ident;
      t->text = std::string(s_.substr(b, i_ - b));
      return true;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number(t, err);
    if (c == '-' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1]))) {
      ++i_;
      if (!number(t, err)) return false;
      if (t->kind == Tok::Duration) {
        *err = {t->pos, "a duration cannot be negative"};
        return false;
      }
      t->neg = true;
      t->f = -t->f;
      return true;
    }
    if (c == '"') return string(t, err);
    auto two = s_.substr(i_, 2);
    for (const char* op : {"==", "!=", "<=", ">=", "&&", "||"}) {
      if (two == op) {
        t->kind = Tok::Op;
        t->text = op;
        i_ += 2;
        return true;
      }
    }
    ++i_;
    switch (c) {
      case '<':
      case '>':
      case '!':
        t->kind = Tok::Op;
        t->text = std::string(1, c);
        return true;
      case '(':
        t->kind = Tok::LParen;
        return true;
      case ')':
        t->kind = Tok::RParen;
        return true;
      case '[':
        t->kind = Tok::LBrack;
        return true;
      case ']':
        t->kind = Tok::RBrack;
        return true;
      case '.':
        t->kind = Tok::Dot;
        return true;
      case ',':
        t->kind = Tok::Comma;
        return true;
      case '=':
        *err = {t->pos, "'=' is not an operator (did you mean '=='?)"};
        return false;
      case '&':
      case '|':
        *err = {t->pos, fmt::format("'{}' is not an operator (did you mean '{}{}'?)", c, c, c)};
        return false;
      default:
        break;
    }
    if (std::isprint(static_cast<unsigned char>(c)))
      *err = {t->pos, fmt::format("unexpected '{}'", c)};
    else
      *err = {t->pos, fmt::format("unexpected byte 0x{:02x}", static_cast<unsigned char>(c))};
    return false;
  }

 private:
  bool number(Token* t, ExprError* err) {
    size_t b = i_;
    bool hex = s_.substr(i_, 2) == "0x" || s_.substr(i_, 2) == "0X";
    if (hex) i_ += 2;
    bool is_float = false;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (hex ? std::isxdigit(static_cast<unsigned char>(c))
              : std::isdigit(static_cast<unsigned char>(c))) {
        ++i_;
      } else if (!hex && c == '.' && i_ + 1 < s_.size() &&
                 std::isdigit(static_cast<unsigned char>(s_[i_ + 1]))) {
        is_float = true;
        ++i_;
      } else if (!hex && (c == 'e' || c == 'E') && i_ + 1 < s_.size() &&
                 (std::isdigit(static_cast<unsigned char>(s_[i_ + 1])) || s_[i_ + 1] == '-' ||
                  s_[i_ + 1] == '+')) {
        is_float = true;
        i_ += 2;
      } else {
        break;
      }
    }
    std::string num(s_.substr(b, i_ - b));
    if (hex && num.size() == 2) {
      *err = {b, "a hex number needs digits"};
      return false;
    }
    // A duration: number and unit, repeated ("1m30s").
    size_t n = 0;
    if (!hex && i_ < s_.size() && unit_at(s_.substr(i_), &n) &&
        (i_ + n >= s_.size() || !ident_char(s_[i_ + n]) ||
         std::isdigit(static_cast<unsigned char>(s_[i_ + n])))) {
      size_t e = i_;
      while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '.' ||
                               static_cast<unsigned char>(s_[e]) >= 0x80))
        ++e;
      uint64_t ns = 0;
      if (!parse_duration(s_.substr(b, e - b), &ns)) {
        *err = {b, fmt::format("bad duration '{}'", s_.substr(b, e - b))};
        return false;
      }
      i_ = e;
      t->kind = Tok::Duration;
      t->u = ns;
      return true;
    }
    if (i_ < s_.size() && ident_char(s_[i_])) {
      *err = {b, fmt::format("bad number '{}{}'", num, s_[i_])};
      return false;
    }
    errno = 0;
    if (is_float) {
      t->kind = Tok::Float;
      t->f = std::strtod(num.c_str(), nullptr);
      if (!std::isfinite(t->f)) {
        *err = {b, "number out of range"};
        return false;
      }
      return true;
    }
    char* end = nullptr;
    t->u = std::strtoull(num.c_str(), &end, hex ? 16 : 10);
    if (errno == ERANGE) {
      *err = {b, "number out of range"};
      return false;
    }
    t->kind = Tok::Int;
    return true;
  }

  bool string(Token* t, ExprError* err) {
    size_t b = i_++;
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) break;
      char e = s_[i_++];
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
        case '0':
          out += '\0';
          break;
        case '\\':
          out += '\\';
          break;
        case '"':
          out += '"';
          break;
        default:
          *err = {i_ - 2, fmt::format("unknown escape '\\{}'", e)};
          return false;
      }
    }
    if (i_ >= s_.size()) {
      *err = {b, "string not closed"};
      return false;
    }
    ++i_;
    t->kind = Tok::String;
    t->text = std::move(out);
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
};

class Parser {
 public:
  explicit Parser(std::string_view s, ExprError* err) : lex_(s), err_(err) {}

  NodePtr run() {
    if (!advance()) return nullptr;
    if (tok_.kind == Tok::End) return fail(tok_.pos, "empty condition");
    NodePtr n = or_expr(0);
    if (!n) return nullptr;
    if (tok_.kind != Tok::End) return fail(tok_.pos, "unexpected " + what(tok_));
    return n;
  }

 private:
  bool advance() { return lex_.next(&tok_, err_); }

  NodePtr fail(size_t pos, std::string what) {
    if (!failed_) *err_ = {pos, std::move(what)};
    failed_ = true;
    return nullptr;
  }

  static std::string what(const Token& t) {
    switch (t.kind) {
      case Tok::End:
        return "end of the condition";
      case Tok::Ident:
        return "'" + t.text + "'";
      case Tok::Op:
        return "'" + t.text + "'";
      case Tok::String:
        return "string";
      case Tok::LParen:
        return "'('";
      case Tok::RParen:
        return "')'";
      case Tok::LBrack:
        return "'['";
      case Tok::RBrack:
        return "']'";
      case Tok::Dot:
        return "'.'";
      case Tok::Comma:
        return "','";
      default:
        return "number";
    }
  }

  NodePtr node(NodeKind k, size_t pos) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->pos = pos;
    return n;
  }

  NodePtr binary(NodeKind k, const char* op, NodePtr (Parser::*sub)(int), int depth) {
    NodePtr l = (this->*sub)(depth + 1);
    if (!l) return nullptr;
    while (tok_.kind == Tok::Op && tok_.text == op) {
      size_t pos = tok_.pos;
      if (!advance()) return nullptr;
      NodePtr r = (this->*sub)(depth + 1);
      if (!r) return nullptr;
      NodePtr n = node(k, pos);
      n->kids.push_back(std::move(l));
      n->kids.push_back(std::move(r));
      l = std::move(n);
    }
    return l;
  }

  NodePtr or_expr(int depth) {
    if (depth > kMaxDepth) return fail(tok_.pos, "condition nested too deeply");
    return binary(NodeKind::Or, "||", &Parser::and_expr, depth);
  }
  NodePtr and_expr(int depth) { return binary(NodeKind::And, "&&", &Parser::unary, depth); }

  NodePtr unary(int depth) {
    if (depth > kMaxDepth) return fail(tok_.pos, "condition nested too deeply");
    if (tok_.kind == Tok::Op && tok_.text == "!") {
      NodePtr n = node(NodeKind::Not, tok_.pos);
      if (!advance()) return nullptr;
      NodePtr k = unary(depth + 1);
      if (!k) return nullptr;
      n->kids.push_back(std::move(k));
      return n;
    }
    return compare(depth);
  }

  NodePtr compare(int depth) {
    NodePtr l = operand(depth + 1);
    if (!l) return nullptr;
    if (tok_.kind == Tok::Op && tok_.text != "&&" && tok_.text != "||" && tok_.text != "!") {
      NodePtr n = node(NodeKind::Compare, tok_.pos);
      n->text = tok_.text;
      if (!advance()) return nullptr;
      NodePtr r = operand(depth + 1);
      if (!r) return nullptr;
      n->kids.push_back(std::move(l));
      n->kids.push_back(std::move(r));
      if (tok_.kind == Tok::Op && tok_.text != "&&" && tok_.text != "||")
        return fail(tok_.pos, "comparisons do not chain; use && between them");
      return n;
    }
    return l;
  }

  NodePtr operand(int depth) {
    if (depth > kMaxDepth) return fail(tok_.pos, "condition nested too deeply");
    NodePtr n = primary(depth);
    if (!n) return nullptr;
    for (;;) {
      if (tok_.kind == Tok::Dot) {
        size_t pos = tok_.pos;
        if (!advance()) return nullptr;
        if (tok_.kind != Tok::Ident || tok_.text[0] == '~')
          return fail(tok_.pos, "a field name must follow '.', not " + what(tok_));
        NodePtr f = node(NodeKind::Field, pos);
        f->text = tok_.text;
        f->kids.push_back(std::move(n));
        n = std::move(f);
        if (!advance()) return nullptr;
      } else if (tok_.kind == Tok::LBrack) {
        NodePtr ix = node(NodeKind::Index, tok_.pos);
        if (!advance()) return nullptr;
        NodePtr k = or_expr(depth + 1);
        if (!k) return nullptr;
        if (tok_.kind != Tok::RBrack) return fail(tok_.pos, "expected ']', not " + what(tok_));
        if (!advance()) return nullptr;
        ix->kids.push_back(std::move(n));
        ix->kids.push_back(std::move(k));
        n = std::move(ix);
      } else {
        return n;
      }
    }
  }

  NodePtr primary(int depth) {
    Token t = tok_;
    switch (t.kind) {
      case Tok::LParen: {
        if (!advance()) return nullptr;
        NodePtr n = or_expr(depth + 1);
        if (!n) return nullptr;
        if (tok_.kind != Tok::RParen) return fail(tok_.pos, "expected ')', not " + what(tok_));
        if (!advance()) return nullptr;
        return n;
      }
      case Tok::Int:
      case Tok::Float:
      case Tok::Duration:
      case Tok::String: {
        NodePtr n = node(t.kind == Tok::Int        ? NodeKind::Int
                         : t.kind == Tok::Float    ? NodeKind::Float
                         : t.kind == Tok::Duration ? NodeKind::Duration
                                                   : NodeKind::String,
                         t.pos);
        n->u = t.u;
        n->f = t.f;
        n->neg = t.neg;
        n->text = t.text;
        if (!advance()) return nullptr;
        return n;
      }
      case Tok::Op:
        return fail(t.pos, "expected an operand, not " + what(t));
      case Tok::Ident:
        break;
      default:
        return fail(t.pos, "expected an operand, not " + what(t));
    }
    if (!advance()) return nullptr;
    if (t.text == "true" || t.text == "false") {
      NodePtr n = node(NodeKind::Bool, t.pos);
      n->u = t.text == "true";
      return n;
    }
    if (t.text == "nil") return node(NodeKind::Nil, t.pos);
    if (tok_.kind == Tok::LParen) {
      NodePtr n = node(NodeKind::Call, t.pos);
      n->text = t.text;
      if (!advance()) return nullptr;
      while (tok_.kind != Tok::RParen) {
        if (n->kids.size() >= 4) return fail(tok_.pos, "too many arguments");
        NodePtr a = or_expr(depth + 1);
        if (!a) return nullptr;
        n->kids.push_back(std::move(a));
        if (tok_.kind == Tok::Comma) {
          if (!advance()) return nullptr;
        } else if (tok_.kind != Tok::RParen) {
          return fail(tok_.pos, "expected ',' or ')', not " + what(tok_));
        }
      }
      if (!advance()) return nullptr;
      return n;
    }
    NodePtr n = node(NodeKind::Name, t.pos);
    n->text = t.text;
    return n;
  }

  Lexer lex_;
  ExprError* err_;
  Token tok_;
  bool failed_ = false;
};

}  // namespace

bool parse_duration(std::string_view s, uint64_t* ns) {
  if (s.empty()) return false;
  double total = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t b = i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (i == b) return false;
    std::string num(s.substr(b, i - b));
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size()) return false;
    size_t n = 0;
    uint64_t unit = unit_at(s.substr(i), &n);
    if (!unit) return false;
    i += n;
    total += v * static_cast<double>(unit);
  }
  if (!(total >= 0) || total > 9.2e18) return false;
  *ns = static_cast<uint64_t>(std::llround(total));
  return true;
}

NodePtr parse(std::string_view expr, ExprError* err) {
  if (expr.size() > kMaxExprBytes) {
    *err = {kMaxExprBytes, fmt::format("condition longer than {} bytes", kMaxExprBytes)};
    return nullptr;
  }
  Parser p(expr, err);
  return p.run();
}

std::string describe(std::string_view expr, const ExprError& e) {
  size_t pos = std::min(e.pos, expr.size());
  // The spot: the rest of the expression from there, cut short; "end" past the last byte.
  std::string at;
  if (pos >= expr.size()) {
    at = "at the end";
  } else {
    std::string_view rest = expr.substr(pos, 20);
    std::string shown;
    for (char c : rest) shown += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
    at = fmt::format("at '{}{}'", shown, expr.size() - pos > 20 ? "..." : "");
  }
  return fmt::format("--if: column {}: {} ({})", pos + 1, e.what, at);
}

}  // namespace gotap::cond
