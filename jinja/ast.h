// The syntax tree of a parsed template: expressions and statements as plain data, built by the
// Parser, owned by the Template, walked read-only by the Interpreter (so one parsed template
// renders concurrently from many threads).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace ls::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Builtins the parser resolves by name (filters.cc, tests.cc).
using FilterFn = Value (*)(Interpreter& in, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter& in, const Value& input, CallArgs& args);

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr {
  enum class Kind : uint8_t {
    kConst,    // value
    kName,     // name
    kList,     // items
    kTuple,    // items
    kDict,     // items: key, value, key, value, ...
    kGetattr,  // a.name
    kGetitem,  // a[b]; b may be a kSlice
    kSlice,    // a:b:c, each optional
    kCall,     // a(items..., kwargs...)
    kFilter,   // a | name(items..., kwargs...); a is null inside filter blocks and `set` blocks
    kTest,     // a is [not] name(items...)
    kNeg,      // -a
    kPos,      // +a
    kNot,      // not a
    kBinary,   // a op b
    kAnd,      // a and b
    kOr,       // a or b
    kConcat,   // items joined with ~
    kCompare,  // a cmp[0] items[0] cmp[1] items[1] ...
    kCond,     // b if a else c (c optional)
  };
  Kind kind;
  int line;
  int depth = 1;  // height of this subtree (bounded by the parser)
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  BinOp op = BinOp::kAdd;
  std::vector<CmpOp> cmp;
  FilterFn filter = nullptr;
  TestFn test = nullptr;
  bool negated = false;  // kTest: `is not`
};

struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind : uint8_t {
    kText,         // text
    kPrint,        // expr
    kIf,           // branches (test, body); else_body
    kFor,          // targets in expr [if filter]: body; else_body
    kSet,          // targets (or targets[0].ns_attr) = expr
    kSetBlock,     // targets = body's output [| filter]
    kMacro,        // text(name)(params): body
    kCallBlock,    // expr (a call) with caller(params): body
    kFilterBlock,  // body's output | filter
    kWith,         // targets = values: body
    kBreak,
    kContinue,
    kScope,  // body rendered in place ({% generation %})
  };
  Kind kind;
  int line;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<std::string> targets;
  bool unpack = false;  // targets came as a tuple: a, b = ...
  std::string ns_attr;  // kSet: set targets[0].ns_attr
  std::vector<Param> params;
  std::vector<ExprPtr> values;
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;  // kMacro: names its body reads
  // Names the frame of `body` (and of a for loop's `else_body`) starts with as undefined locals:
  // jinja2 makes a name assigned in a scope before any use there a local of that scope, hiding
  // the same name from outside (scope_analysis.cc).
  std::vector<std::string> predeclared, else_predeclared;
};

}  // namespace ls::jinja
