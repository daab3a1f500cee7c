// The Jinja parser (see parser.h): statements here, expressions in expression_parser.cc.
#include "jinja/parser.h"

#include <algorithm>

#include "jinja/expression_parser.h"
#include "jinja/lexer.h"
#include "jinja/scope_analysis.h"
#include "jinja/token_stream.h"

namespace ls::jinja {
namespace {

using K = Expr::Kind;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : ts_(std::move(toks)), ex_(ts_) {}

  Body ParseTemplate() { return Subparse({}); }

 private:
  Body Subparse(std::vector<std::string_view> ends) {
    Body body;
    while (true) {
      const Token& tok = ts_.cur();
      switch (tok.type) {
        case TokenType::kData: {
          auto s = Stmt0(Stmt::Kind::kText, tok.line);
          s->text = tok.text;
          body.push_back(std::move(s));
          ts_.next();
          break;
        }
        case TokenType::kVarBegin: {
          ts_.next();
          auto s = Stmt0(Stmt::Kind::kPrint, tok.line);
          s->expr = ex_.ParseTuple(true, {}, false);
          ts_.Expect(TokenType::kVarEnd, "'}}'");
          body.push_back(std::move(s));
          break;
        }
        case TokenType::kBlockBegin: {
          ts_.next();
          if (ts_.cur().type == TokenType::kName && std::find(ends.begin(), ends.end(), ts_.cur().text) != ends.end())
            return body;
          ParseStatement(&body);
          ts_.Expect(TokenType::kBlockEnd, "'%}'");
          break;
        }
        case TokenType::kEof:
          if (!ends.empty()) ts_.FailEof();
          return body;
        default:
          ts_.Error("unexpected " + ts_.Describe(tok));
      }
    }
  }

  // Parses a block body up to one of `ends`; the cursor is left on the end tag's name.
  Body ParseStatements(const std::string& tag, int line, std::vector<std::string_view> ends, bool drop_end) {
    if (static_cast<int>(ts_.open().size()) >= kMaxBlockNesting) ts_.Error("blocks nested too deeply");
    ts_.SkipOp(":");
    ts_.Expect(TokenType::kBlockEnd, "'%}'");
    ts_.open().push_back({tag, line, ends});
    Body body = Subparse(ends);
    ts_.open().pop_back();
    if (drop_end) ts_.next();
    return body;
  }

  StmtPtr Stmt0(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  void ParseStatement(Body* body) {
    const Token& tok = ts_.cur();
    if (tok.type != TokenType::kName) ts_.Error("tag name expected, got " + ts_.Describe(tok));
    const std::string tag = tok.text;
    const int line = tok.line;
    if (tag == "if") return body->push_back(ParseIf());
    if (tag == "for") return body->push_back(ParseFor());
    if (tag == "set") return body->push_back(ParseSet());
    if (tag == "macro") return body->push_back(ParseMacro());
    if (tag == "call") return body->push_back(ParseCallBlock());
    if (tag == "filter") return body->push_back(ParseFilterBlock());
    if (tag == "with") return body->push_back(ParseWith());
    if (tag == "print") {
      ts_.next();
      for (int n = 0; ts_.cur().type != TokenType::kBlockEnd; ++n) {
        if (n) ts_.ExpectOp(",");
        auto s = Stmt0(Stmt::Kind::kPrint, line);
        s->expr = ex_.ParseExpression(true);
        body->push_back(std::move(s));
      }
      return;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) ts_.Error("'" + tag + "' outside of a for loop");
      ts_.next();
      return body->push_back(Stmt0(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line));
    }
    if (tag == "generation") {
      ts_.next();
      auto s = Stmt0(Stmt::Kind::kScope, line);
      const int saved_loops = loop_depth_;  // the body is a caller macro in jinja2: no break out of it
      loop_depth_ = 0;
      s->body = ParseStatements(tag, line, {"endgeneration"}, true);
      loop_depth_ = saved_loops;
      return body->push_back(std::move(s));
    }
    static constexpr std::string_view kUnsupported[] = {"block", "extends", "include", "import", "from", "autoescape"};
    for (auto u : kUnsupported)
      if (tag == u) ts_.Error("the '" + tag + "' tag is not supported");
    std::string msg = "unknown tag '" + tag + "'";
    if (!ts_.open().empty())
      msg += " (the '" + ts_.open().back().tag + "' block opened on line " + std::to_string(ts_.open().back().line) +
             " is still open)";
    ts_.Error(msg);
  }

  StmtPtr ParseIf() {
    auto s = Stmt0(Stmt::Kind::kIf, ts_.cur().line);
    ts_.next();
    while (true) {
      ExprPtr test = ex_.ParseTuple(false, {}, false);
      Body b = ParseStatements("if", s->line, {"elif", "else", "endif"}, false);
      s->branches.emplace_back(std::move(test), std::move(b));
      const std::string which = ts_.cur().text;
      ts_.next();
      if (which == "elif") continue;
      if (which == "else") s->else_body = ParseStatements("if", s->line, {"endif"}, true);
      break;
    }
    return s;
  }

  // Names (a / a, b / (a, b)) or, with `with_namespace`, one namespace attribute (ns.attr). As in
  // jinja2, a trailing comma is allowed only before a closing parenthesis.
  void ParseTargets(Stmt* s, bool with_namespace) {
    const bool paren = ts_.SkipOp("(");
    while (true) {
      const int line = ts_.cur().line;
      std::string n = ts_.ExpectName();
      if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
        ts_.Error("can't assign to '" + n + "'", line);
      if (with_namespace && s->targets.empty() && ts_.IsOp(".")) {
        ts_.next();
        s->ns_attr = ts_.ExpectName();
        s->targets.push_back(std::move(n));
        break;
      }
      s->targets.push_back(std::move(n));
      if (!ts_.IsOp(",")) break;
      ts_.next();
      s->unpack = true;
      if (paren && ts_.IsOp(")")) break;
    }
    if (paren) ts_.ExpectOp(")");
  }

  StmtPtr ParseFor() {
    auto s = Stmt0(Stmt::Kind::kFor, ts_.cur().line);
    ts_.next();
    ParseTargets(s.get(), false);
    if (!ts_.SkipName("in")) ts_.Error("expected 'in', got " + ts_.Describe(ts_.cur()));
    s->expr = ex_.ParseTuple(false, {"recursive"}, false);
    if (ts_.SkipName("if")) s->filter = ex_.ParseExpression(true);
    if (ts_.IsName("recursive")) ts_.Error("recursive for loops are not supported");
    ++loop_depth_;
    s->body = ParseStatements("for", s->line, {"endfor", "else"}, false);
    --loop_depth_;
    const std::string which = ts_.cur().text;
    ts_.next();
    if (which == "else") s->else_body = ParseStatements("for", s->line, {"endfor"}, true);
    return s;
  }

  StmtPtr ParseSet() {
    auto s = Stmt0(Stmt::Kind::kSet, ts_.cur().line);
    ts_.next();
    ParseTargets(s.get(), true);
    if (ts_.SkipOp("=")) {
      s->expr = ex_.ParseTuple(true, {}, false);
      return s;
    }
    if (s->unpack) ts_.Error("expected '=' after a tuple of names");
    s->kind = Stmt::Kind::kSetBlock;
    if (ts_.IsOp("|")) s->filter = ex_.ParseFilter(nullptr, false);
    s->body = ParseStatements("set", s->line, {"endset"}, true);
    return s;
  }

  void ParseSignature(Stmt* s) {
    ts_.ExpectOp("(");
    while (!ts_.IsOp(")")) {
      if (!s->params.empty()) ts_.ExpectOp(",");
      Param p;
      p.name = ts_.ExpectName();
      if (ts_.SkipOp("=")) {
        p.default_value = ex_.ParseExpression(true);
      } else if (!s->params.empty() && s->params.back().default_value) {
        ts_.Error("non-default argument follows default argument");
      }
      s->params.push_back(std::move(p));
    }
    ts_.ExpectOp(")");
  }

  // A macro or caller body: its own scope for break/continue and the special names it reads.
  Body ParseCallableBody(Stmt* s, const std::string& tag, std::string_view end) {
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    ex_.PushScope();
    Body b = ParseStatements(tag, s->line, {end}, true);
    const ExpressionParser::Scope used = ex_.PopScope();
    s->uses_caller = used.caller;
    s->uses_varargs = used.varargs;
    s->uses_kwargs = used.kwargs;
    loop_depth_ = saved_loops;
    return b;
  }

  StmtPtr ParseMacro() {
    auto s = Stmt0(Stmt::Kind::kMacro, ts_.cur().line);
    ts_.next();
    s->text = ts_.ExpectName();
    ParseSignature(s.get());
    s->body = ParseCallableBody(s.get(), "macro", "endmacro");
    return s;
  }

  StmtPtr ParseCallBlock() {
    auto s = Stmt0(Stmt::Kind::kCallBlock, ts_.cur().line);
    ts_.next();
    if (ts_.IsOp("(")) ParseSignature(s.get());
    s->expr = ex_.ParseExpression(true);
    if (s->expr->kind != K::kCall) ts_.Error("expected a call after 'call'", s->line);
    s->body = ParseCallableBody(s.get(), "call", "endcall");
    return s;
  }

  StmtPtr ParseFilterBlock() {
    auto s = Stmt0(Stmt::Kind::kFilterBlock, ts_.cur().line);
    ts_.next();
    s->filter = ex_.ParseFilter(nullptr, true);
    s->body = ParseStatements("filter", s->line, {"endfilter"}, true);
    return s;
  }

  StmtPtr ParseWith() {
    auto s = Stmt0(Stmt::Kind::kWith, ts_.cur().line);
    ts_.next();
    while (ts_.cur().type != TokenType::kBlockEnd) {
      if (!s->targets.empty()) ts_.ExpectOp(",");
      s->targets.push_back(ts_.ExpectName());
      ts_.ExpectOp("=");
      s->values.push_back(ex_.ParseExpression(true));
    }
    s->body = ParseStatements("with", s->line, {"endwith"}, true);
    return s;
  }

  TokenStream ts_;
  ExpressionParser ex_;
  int loop_depth_ = 0;
};

}  // namespace

StmtPtr Parse(std::string_view source) {
  auto root = std::make_unique<Stmt>();
  root->kind = Stmt::Kind::kScope;
  root->line = 1;
  root->body = Parser(Lex(source)).ParseTemplate();
  AnalyzeScopes(*root);
  return root;
}

}  // namespace ls::jinja
