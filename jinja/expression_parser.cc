// ExpressionParser (see expression_parser.h).
#include "jinja/expression_parser.h"

#include <algorithm>

#include "jinja/builtins.h"
#include "jinja/parser.h"

namespace ls::jinja {

using K = Expr::Kind;

struct ExpressionParser::Nest {  // bounds the parser's own recursion
  explicit Nest(ExpressionParser* p) : p_(p) {
    if (++p_->nesting_ > kMaxExprNesting) p_->ts_.Error("expression nested too deeply");
  }
  ~Nest() { --p_->nesting_; }
  ExpressionParser* p_;
};

ExprPtr ExpressionParser::Node(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}
// Computes a node's height once its children are attached; bounds the tree's depth.
ExprPtr ExpressionParser::Finish(ExprPtr e) {
  int d = 0;
  for (const Expr* c : {e->a.get(), e->b.get(), e->c.get()})
    if (c) d = std::max(d, c->depth);
  for (const auto& c : e->items)
    if (c) d = std::max(d, c->depth);
  for (const auto& kv : e->kwargs) d = std::max(d, kv.second->depth);
  e->depth = d + 1;
  if (e->depth > kMaxExprNesting * 4) ts_.Error("expression nested too deeply", e->line);
  return e;
}

bool ExpressionParser::IsTupleEnd(std::initializer_list<std::string_view> extra) const {
  if (ts_.cur().type == TokenType::kVarEnd || ts_.cur().type == TokenType::kBlockEnd ||
      ts_.cur().type == TokenType::kEof)
    return true;
  if (ts_.IsOp(")")) return true;
  for (auto e : extra)
    if (ts_.IsName(e)) return true;
  return false;
}

ExprPtr ExpressionParser::ParseTuple(bool with_condexpr, std::initializer_list<std::string_view> extra,
                                     bool explicit_parens) {
  const int line = ts_.cur().line;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) ts_.ExpectOp(",");
    if (IsTupleEnd(extra)) break;
    args.push_back(ParseExpression(with_condexpr));
    if (ts_.IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parens) {
      if (ts_.cur().type == TokenType::kEof) ts_.FailEof();
      ts_.Error("expected an expression, got " + ts_.Describe(ts_.cur()));
    }
  }
  auto e = Node(K::kTuple, line);
  e->items = std::move(args);
  return Finish(std::move(e));
}

ExprPtr ExpressionParser::ParseExpression(bool with_condexpr) { return with_condexpr ? ParseCondExpr() : ParseOr(); }

ExprPtr ExpressionParser::ParseCondExpr() {
  int line = ts_.cur().line;
  ExprPtr e = ParseOr();
  while (ts_.SkipName("if")) {
    auto c = Node(K::kCond, line);
    c->b = std::move(e);
    c->a = ParseOr();
    if (ts_.SkipName("else")) {
      Nest guard(this);
      c->c = ParseCondExpr();
    }
    e = Finish(std::move(c));
    line = ts_.cur().line;
  }
  return e;
}

ExprPtr ExpressionParser::ParseBool(Expr::Kind kind, const char* word, ExprPtr (ExpressionParser::*sub)()) {
  int line = ts_.cur().line;
  ExprPtr e = (this->*sub)();
  while (ts_.SkipName(word)) {
    auto n = Node(kind, line);
    n->a = std::move(e);
    n->b = (this->*sub)();
    e = Finish(std::move(n));
    line = ts_.cur().line;
  }
  return e;
}
ExprPtr ExpressionParser::ParseOr() { return ParseBool(K::kOr, "or", &ExpressionParser::ParseAnd); }
ExprPtr ExpressionParser::ParseAnd() { return ParseBool(K::kAnd, "and", &ExpressionParser::ParseNot); }

ExprPtr ExpressionParser::ParseNot() {
  if (ts_.IsName("not")) {
    const int line = ts_.cur().line;
    ts_.next();
    auto n = Node(K::kNot, line);
    Nest guard(this);
    n->a = ParseNot();
    return Finish(std::move(n));
  }
  return ParseCompare();
}

ExprPtr ExpressionParser::ParseCompare() {
  const int line = ts_.cur().line;
  ExprPtr first = ParseMath1();
  std::unique_ptr<Expr> cmp;
  while (true) {
    CmpOp op;
    if (ts_.IsOp("=="))
      op = CmpOp::kEq;
    else if (ts_.IsOp("!="))
      op = CmpOp::kNe;
    else if (ts_.IsOp("<"))
      op = CmpOp::kLt;
    else if (ts_.IsOp("<="))
      op = CmpOp::kLe;
    else if (ts_.IsOp(">"))
      op = CmpOp::kGt;
    else if (ts_.IsOp(">="))
      op = CmpOp::kGe;
    else if (ts_.IsName("in"))
      op = CmpOp::kIn;
    else if (ts_.IsName("not") && ts_.look().type == TokenType::kName && ts_.look().text == "in")
      op = CmpOp::kNotIn;
    else
      break;
    ts_.next();
    if (op == CmpOp::kNotIn) ts_.next();
    if (!cmp) {
      cmp = Node(K::kCompare, line);
      cmp->a = std::move(first);
    }
    cmp->cmp.push_back(op);
    cmp->items.push_back(ParseMath1());
  }
  if (!cmp) return first;
  return Finish(std::move(cmp));
}

ExprPtr ExpressionParser::ParseBinary(std::initializer_list<std::pair<std::string_view, BinOp>> ops,
                                      ExprPtr (ExpressionParser::*sub)()) {
  int line = ts_.cur().line;
  ExprPtr e = (this->*sub)();
  while (true) {
    const std::pair<std::string_view, BinOp>* hit = nullptr;
    for (const auto& o : ops)
      if (ts_.IsOp(o.first)) hit = &o;
    if (!hit) break;
    ts_.next();
    auto n = Node(K::kBinary, line);
    n->op = hit->second;
    n->a = std::move(e);
    n->b = (this->*sub)();
    e = Finish(std::move(n));
    line = ts_.cur().line;
  }
  return e;
}
ExprPtr ExpressionParser::ParseMath1() {
  return ParseBinary({{"+", BinOp::kAdd}, {"-", BinOp::kSub}}, &ExpressionParser::ParseConcat);
}
ExprPtr ExpressionParser::ParseMath2() {
  return ParseBinary({{"*", BinOp::kMul}, {"/", BinOp::kDiv}, {"//", BinOp::kFloorDiv}, {"%", BinOp::kMod}},
                     &ExpressionParser::ParsePow);
}
ExprPtr ExpressionParser::ParsePow() {
  return ParseBinary({{"**", BinOp::kPow}}, &ExpressionParser::ParseUnaryFiltered);
}
ExprPtr ExpressionParser::ParseUnaryFiltered() { return ParseUnary(true); }

ExprPtr ExpressionParser::ParseConcat() {
  const int line = ts_.cur().line;
  ExprPtr first = ParseMath2();
  if (!ts_.IsOp("~")) return first;
  auto n = Node(K::kConcat, line);
  n->items.push_back(std::move(first));
  while (ts_.SkipOp("~")) n->items.push_back(ParseMath2());
  return Finish(std::move(n));
}

ExprPtr ExpressionParser::ParseUnary(bool with_filter) {
  Nest guard(this);
  const int line = ts_.cur().line;
  ExprPtr e;
  if (ts_.IsOp("-") || ts_.IsOp("+")) {
    const bool neg = ts_.IsOp("-");
    ts_.next();
    e = Node(neg ? K::kNeg : K::kPos, line);
    e->a = ParseUnary(false);
    e = Finish(std::move(e));
  } else {
    e = ParsePrimary();
  }
  e = ParsePostfix(std::move(e));
  if (with_filter) e = ParseFilterExpr(std::move(e));
  return e;
}

ExprPtr ExpressionParser::ParsePrimary() {
  const Token& tok = ts_.cur();
  const int line = tok.line;
  switch (tok.type) {
    case TokenType::kName: {
      const std::string n = tok.text;
      ts_.next();
      auto e = Node(K::kConst, line);
      if (n == "true" || n == "True" || n == "false" || n == "False") {
        e->value = Value::Bool(n == "true" || n == "True");
      } else if (n == "none" || n == "None") {
        e->value = Value::None();
      } else {
        e->kind = K::kName;
        e->name = n;
        for (auto& sc : scopes_) {
          sc.caller |= n == "caller";
          sc.varargs |= n == "varargs";
          sc.kwargs |= n == "kwargs";
        }
      }
      return e;
    }
    case TokenType::kString: {
      std::string s;
      while (ts_.cur().type == TokenType::kString) {
        s += ts_.cur().text;
        ts_.next();
      }
      auto e = Node(K::kConst, line);
      e->value = Value::Str(std::move(s));
      return e;
    }
    case TokenType::kInt:
    case TokenType::kFloat: {
      auto e = Node(K::kConst, line);
      e->value = tok.type == TokenType::kInt ? Value::Int(tok.int_value) : Value::Float(tok.float_value);
      ts_.next();
      return e;
    }
    case TokenType::kOp:
      if (tok.text == "(") {
        ts_.next();
        ExprPtr e = ParseTuple(true, {}, true);
        ts_.ExpectOp(")");
        return e;
      }
      if (tok.text == "[" || tok.text == "{") return ParseListOrDict(tok.text == "{");
      break;
    case TokenType::kEof:
      ts_.FailEof();
    default:
      break;
  }
  ts_.Error("unexpected " + ts_.Describe(tok));
}

ExprPtr ExpressionParser::ParseListOrDict(bool dict) {
  auto e = Node(dict ? K::kDict : K::kList, ts_.cur().line);
  ts_.next();
  const char* close = dict ? "}" : "]";
  while (!ts_.IsOp(close)) {
    if (!e->items.empty()) ts_.ExpectOp(",");
    if (ts_.IsOp(close)) break;
    e->items.push_back(ParseExpression(true));
    if (dict) {
      ts_.ExpectOp(":");
      e->items.push_back(ParseExpression(true));
    }
  }
  ts_.ExpectOp(close);
  return Finish(std::move(e));
}

ExprPtr ExpressionParser::ParsePostfix(ExprPtr e) {
  while (true) {
    if (ts_.IsOp(".") || ts_.IsOp("[")) {
      e = ParseSubscript(std::move(e));
    } else if (ts_.IsOp("(")) {
      e = ParseCall(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr ExpressionParser::ParseFilterExpr(ExprPtr e) {
  while (true) {
    if (ts_.IsOp("|")) {
      e = ParseFilter(std::move(e), false);
    } else if (ts_.IsName("is")) {
      e = ParseTest(std::move(e));
    } else if (ts_.IsOp("(")) {
      e = ParseCall(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr ExpressionParser::ParseSubscript(ExprPtr obj) {
  const Token tok = ts_.cur();
  ts_.next();
  if (tok.text == ".") {
    const Token attr = ts_.cur();
    ts_.next();
    if (attr.type == TokenType::kName) {
      auto e = Node(K::kGetattr, tok.line);
      e->a = std::move(obj);
      e->name = attr.text;
      return Finish(std::move(e));
    }
    if (attr.type != TokenType::kInt) ts_.Error("expected name or number after '.'", attr.line);
    auto e = Node(K::kGetitem, tok.line);
    e->a = std::move(obj);
    e->b = Node(K::kConst, attr.line);
    e->b->value = Value::Int(attr.int_value);
    return Finish(std::move(e));
  }
  std::vector<ExprPtr> args;
  while (!ts_.IsOp("]")) {
    if (!args.empty()) ts_.ExpectOp(",");
    args.push_back(ParseSubscribed());
  }
  ts_.ExpectOp("]");
  auto e = Node(K::kGetitem, tok.line);
  e->a = std::move(obj);
  if (args.size() == 1) {
    e->b = std::move(args[0]);
  } else {
    e->b = Node(K::kTuple, tok.line);
    e->b->items = std::move(args);
    e->b = Finish(std::move(e->b));
  }
  return Finish(std::move(e));
}

ExprPtr ExpressionParser::ParseSubscribed() {
  const int line = ts_.cur().line;
  ExprPtr start;
  if (!ts_.IsOp(":")) {
    start = ParseExpression(true);
    if (!ts_.IsOp(":")) return start;
  }
  ts_.next();  // ':'
  auto s = Node(K::kSlice, line);
  s->a = std::move(start);
  if (!ts_.IsOp(":") && !ts_.IsOp("]") && !ts_.IsOp(",")) s->b = ParseExpression(true);
  if (ts_.SkipOp(":") && !ts_.IsOp("]") && !ts_.IsOp(",")) s->c = ParseExpression(true);
  return Finish(std::move(s));
}

void ExpressionParser::ParseCallArgs(Expr* e) {
  ts_.ExpectOp("(");
  bool need_comma = false;
  while (!ts_.IsOp(")")) {
    if (need_comma) {
      ts_.ExpectOp(",");
      if (ts_.IsOp(")")) break;
    }
    if (ts_.IsOp("*") || ts_.IsOp("**")) ts_.Error("*args and **kwargs in calls are not supported");
    if (ts_.cur().type == TokenType::kName && ts_.look().type == TokenType::kOp && ts_.look().text == "=") {
      std::string key = ts_.cur().text;
      ts_.next();
      ts_.next();
      e->kwargs.emplace_back(std::move(key), ParseExpression(true));
    } else {
      if (!e->kwargs.empty()) ts_.Error("positional argument after keyword argument");
      e->items.push_back(ParseExpression(true));
    }
    need_comma = true;
  }
  ts_.ExpectOp(")");
}

ExprPtr ExpressionParser::ParseCall(ExprPtr callee) {
  const int line = ts_.cur().line;
  if (callee->kind == K::kGetattr && !IsMethodName(callee->name))
    ts_.Error("unknown method '" + callee->name + "'", callee->line);
  auto e = Node(K::kCall, line);
  e->a = std::move(callee);
  ParseCallArgs(e.get());
  return Finish(std::move(e));
}

std::string ExpressionParser::DottedName() {
  std::string name = ts_.ExpectName();
  while (ts_.SkipOp(".")) name += "." + ts_.ExpectName();
  return name;
}

// A filter or test name given as a constant argument (map('upper'), select('odd')) must exist.
void ExpressionParser::CheckNamedArg(const Expr& e, size_t index, bool filter) {
  if (index >= e.items.size() || e.items[index]->kind != K::kConst || !e.items[index]->value.is_string()) return;
  const std::string& n = e.items[index]->value.str();
  if (filter ? !FindFilter(n) : !FindTest(n))
    ts_.Error(std::string(filter ? "unknown filter '" : "unknown test '") + n + "' in '" + e.name + "'", e.line);
}

ExprPtr ExpressionParser::ParseFilter(ExprPtr input, bool start_inline) {
  while (ts_.IsOp("|") || start_inline) {
    if (!start_inline) ts_.next();
    start_inline = false;
    const int line = ts_.cur().line;
    auto e = Node(K::kFilter, line);
    e->name = DottedName();
    e->filter = FindFilter(e->name);
    if (!e->filter) {
      ts_.Error(std::string(IsUnsupportedFilter(e->name) ? "the filter '" : "unknown filter '") + e->name +
                    (IsUnsupportedFilter(e->name) ? "' is not supported" : "'"),
                line);
    }
    if (ts_.IsOp("(")) ParseCallArgs(e.get());
    if (e->name == "map" && !e->kwargs.size()) CheckNamedArg(*e, 0, true);
    if (e->name == "select" || e->name == "reject") CheckNamedArg(*e, 0, false);
    if (e->name == "selectattr" || e->name == "rejectattr") CheckNamedArg(*e, 1, false);
    e->a = std::move(input);
    input = Finish(std::move(e));
  }
  return input;
}

ExprPtr ExpressionParser::ParseTest(ExprPtr input) {
  const int line = ts_.cur().line;
  ts_.next();  // 'is'
  auto e = Node(K::kTest, line);
  e->negated = ts_.SkipName("not");
  e->name = DottedName();
  e->test = FindTest(e->name);
  if (!e->test) {
    ts_.Error(std::string(IsUnsupportedTest(e->name) ? "the test '" : "unknown test '") + e->name +
                  (IsUnsupportedTest(e->name) ? "' is not supported" : "'"),
              line);
  }
  if (ts_.IsOp("(")) {
    ParseCallArgs(e.get());
  } else {
    const Token& t = ts_.cur();
    const bool arg_start = t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInt ||
                           t.type == TokenType::kFloat || ts_.IsOp("(") || ts_.IsOp("[") || ts_.IsOp("{");
    if (arg_start && !ts_.IsName("else") && !ts_.IsName("or") && !ts_.IsName("and")) {
      if (ts_.IsName("is")) ts_.Error("you cannot chain multiple tests with 'is'");
      e->items.push_back(ParsePostfix(ParsePrimary()));
    }
  }
  e->a = std::move(input);
  return Finish(std::move(e));
}

}  // namespace ls::jinja
