// Jinja's tests (`x is name`), as jinja2 defines them, looked up by name at load time.
#include <cmath>
#include <string_view>
#include <utility>

#include "jinja/builtins.h"
#include "jinja/pystr.h"

namespace ls::jinja {
namespace {

const Value& Arg(const CallArgs& args, const char* test) {
  ArgBinder b(args, std::string("test '") + test + "'", {"other"});
  if (!b.Get(0)) Fail(std::string("test '") + test + "' needs an argument");
  return *b.Get(0);
}

void NoArgs(const CallArgs& args, const char* test) { ArgBinder b(args, std::string("test '") + test + "'", {}); }

// Python's `value % 2` etc. for the number tests (fails on non-numbers as Python does).
Value Mod(Interpreter& in, const Value& v, const Value& d) { return in.Binary(BinOp::kMod, v, d); }

bool Defined(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "defined"), !v.is_undefined(); }
bool Undefined(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "undefined"), v.is_undefined(); }
bool None(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "none"), v.is_none(); }
bool Boolean(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "boolean"), v.is_bool(); }
bool False(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "false"), v.is_bool() && !v.as_bool(); }
bool True(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "true"), v.is_bool() && v.as_bool(); }
bool Integer(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "integer"), v.is_int(); }
bool Float(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "float"), v.is_float(); }
bool Number(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "number"), v.is_number(); }
bool String(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "string"), v.is_string(); }
bool Mapping(Interpreter&, const Value& v, CallArgs& a) { return NoArgs(a, "mapping"), v.is_dict(); }
bool Callable(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "callable");
  return v.is_undefined() || (v.is_object() && v.object()->IsCallable());  // Undefined has __call__ (it fails)
}
bool Escaped(Interpreter&, const Value&, CallArgs& a) { return NoArgs(a, "escaped"), false; }
bool Lower(Interpreter& in, const Value& v, CallArgs& a) { return NoArgs(a, "lower"), py::IsLowerStr(in.ToStr(v)); }
bool Upper(Interpreter& in, const Value& v, CallArgs& a) { return NoArgs(a, "upper"), py::IsUpperStr(in.ToStr(v)); }

bool Sequence(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "sequence");
  return v.is_string() || v.is_dict() || v.is_sequence_list() || v.is_undefined();
}
bool Iterable(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "iterable");
  return v.is_string() || v.is_dict() || v.is_list() || v.is_undefined();
}
bool Odd(Interpreter& in, const Value& v, CallArgs& a) {
  NoArgs(a, "odd");
  return Equal(Mod(in, v, Value::Int(2)), Value::Int(1), in.budget());
}
bool Even(Interpreter& in, const Value& v, CallArgs& a) {
  NoArgs(a, "even");
  return Equal(Mod(in, v, Value::Int(2)), Value::Int(0), in.budget());
}
bool DivisibleBy(Interpreter& in, const Value& v, CallArgs& a) {
  return Equal(Mod(in, v, Arg(a, "divisibleby")), Value::Int(0), in.budget());
}
bool In(Interpreter& in, const Value& v, CallArgs& a) { return in.Contains(Arg(a, "in"), v); }
bool SameAs(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = Arg(a, "sameas");
  if (v.type() != o.type()) return false;
  if (v.is_none() || v.is_undefined()) return v.is_none();
  if (v.is_bool()) return v.as_bool() == o.as_bool();
  if (v.is_int()) return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;  // CPython's small ints
  if (v.is_object()) return v.object() == o.object();
  return false;
}
bool IsFilter(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "filter");
  return v.is_string() && FindFilter(v.str()) != nullptr;
}
bool IsTest(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "test");
  return v.is_string() && FindTest(v.str()) != nullptr;
}

template <CmpOp op>
bool Cmp(Interpreter& in, const Value& v, CallArgs& a) {
  const Value& o = Arg(a, "comparison");
  Budget& b = in.budget();
  switch (op) {
    case CmpOp::kEq:
      return Equal(v, o, b);
    case CmpOp::kNe:
      return !Equal(v, o, b);
    case CmpOp::kLt:
      return Compare(v, o, b, "<") < 0;
    case CmpOp::kLe:
      return Compare(v, o, b, "<=") <= 0;
    case CmpOp::kGt:
      return Compare(v, o, b, ">") > 0;
    case CmpOp::kGe:
      return Compare(v, o, b, ">=") >= 0;
    default:
      return false;
  }
}

constexpr std::pair<std::string_view, TestFn> kTests[] = {
    {"defined", Defined},
    {"undefined", Undefined},
    {"none", None},
    {"boolean", Boolean},
    {"false", False},
    {"true", True},
    {"integer", Integer},
    {"float", Float},
    {"number", Number},
    {"string", String},
    {"mapping", Mapping},
    {"sequence", Sequence},
    {"iterable", Iterable},
    {"callable", Callable},
    {"escaped", Escaped},
    {"lower", Lower},
    {"upper", Upper},
    {"odd", Odd},
    {"even", Even},
    {"divisibleby", DivisibleBy},
    {"in", In},
    {"sameas", SameAs},
    {"filter", IsFilter},
    {"test", IsTest},
    {"==", Cmp<CmpOp::kEq>},
    {"eq", Cmp<CmpOp::kEq>},
    {"equalto", Cmp<CmpOp::kEq>},
    {"!=", Cmp<CmpOp::kNe>},
    {"ne", Cmp<CmpOp::kNe>},
    {"<", Cmp<CmpOp::kLt>},
    {"lt", Cmp<CmpOp::kLt>},
    {"lessthan", Cmp<CmpOp::kLt>},
    {"<=", Cmp<CmpOp::kLe>},
    {"le", Cmp<CmpOp::kLe>},
    {">", Cmp<CmpOp::kGt>},
    {"gt", Cmp<CmpOp::kGt>},
    {"greaterthan", Cmp<CmpOp::kGt>},
    {">=", Cmp<CmpOp::kGe>},
    {"ge", Cmp<CmpOp::kGe>},
};

}  // namespace

TestFn FindTest(std::string_view name) {
  for (const auto& [n, fn] : kTests)
    if (n == name) return fn;
  return nullptr;
}

bool IsUnsupportedTest(std::string_view) { return false; }

}  // namespace ls::jinja
