// ExpressionParser: Jinja expressions from a TokenStream, with jinja2's precedence from loosest
// to tightest: conditional, or, and, not, comparisons and `in`, + -, ~, * / // %, **, unary - +,
// then postfix (.attr, [item], call) and filters / tests. Filter, test and method names are
// checked here, at load time. Trees and the parser's recursion are bounded in depth.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/token_stream.h"

namespace ls::jinja {

class ExpressionParser {
 public:
  // Which special names a macro or caller body reads (it then accepts those arguments).
  struct Scope {
    bool caller = false, varargs = false, kwargs = false;
  };

  explicit ExpressionParser(TokenStream& ts) : ts_(ts) {}

  ExprPtr ParseExpression(bool with_condexpr);
  // An expression or a tuple of them (a, b). extra_end: names that end the tuple (e.g. "in").
  ExprPtr ParseTuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end, bool explicit_parens);
  // Filters applied to `input` (null: a filter block or set block chain); start_inline: no leading '|'.
  ExprPtr ParseFilter(ExprPtr input, bool start_inline);

  void PushScope() { scopes_.emplace_back(); }
  Scope PopScope() {
    Scope s = scopes_.back();
    scopes_.pop_back();
    return s;
  }

 private:
  struct Nest;
  ExprPtr Node(Expr::Kind kind, int line);
  ExprPtr Finish(ExprPtr e);
  bool IsTupleEnd(std::initializer_list<std::string_view> extra) const;
  ExprPtr ParseCondExpr();
  ExprPtr ParseBool(Expr::Kind kind, const char* word, ExprPtr (ExpressionParser::*sub)());
  ExprPtr ParseOr();
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr ParseBinary(std::initializer_list<std::pair<std::string_view, BinOp>> ops,
                      ExprPtr (ExpressionParser::*sub)());
  ExprPtr ParseMath1();
  ExprPtr ParseConcat();
  ExprPtr ParseMath2();
  ExprPtr ParsePow();
  ExprPtr ParseUnaryFiltered();
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParsePrimary();
  ExprPtr ParseListOrDict(bool dict);
  ExprPtr ParsePostfix(ExprPtr e);
  ExprPtr ParseFilterExpr(ExprPtr e);
  ExprPtr ParseSubscript(ExprPtr obj);
  ExprPtr ParseSubscribed();
  void ParseCallArgs(Expr* e);
  ExprPtr ParseCall(ExprPtr callee);
  std::string DottedName();
  void CheckNamedArg(const Expr& e, size_t index, bool filter);
  ExprPtr ParseTest(ExprPtr input);

  TokenStream& ts_;
  int nesting_ = 0;
  std::vector<Scope> scopes_;
};

}  // namespace ls::jinja
