// Expression evaluation for the interpreter: names, literals, access, calls, filters, tests,
// boolean logic, comparisons, conditionals and slicing.
#include <optional>

#include "jinja/interpreter.h"
#include "jinja/pystr.h"

namespace ls::jinja {
namespace {

using K = Expr::Kind;

// Python's slice.indices(): clamps start/stop for a sequence of length n.
void AdjustSlice(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step, int64_t* b,
                 int64_t* e) {
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x = x < -n ? -1 : x + n;
      if (x < 0) return step < 0 ? int64_t{-1} : int64_t{0};
    } else if (x >= n) {
      return step < 0 ? n - 1 : n;
    }
    return x;
  };
  *b = clamp(start, step < 0 ? n - 1 : 0);
  *e = clamp(stop, step < 0 ? -1 : n);
}

}  // namespace

Value Interpreter::Eval(const Expr& e, const std::shared_ptr<Frame>& frame) {
  DepthGuard guard(this);
  line_ = e.line;
  switch (e.kind) {
    case K::kConst:
      return e.value;
    case K::kName: {
      if (const Value* v = frame->Find(e.name)) return *v;
      return Value::Undefined("'" + e.name + "' is undefined");
    }
    case K::kList:
    case K::kTuple: {
      ValueList items;
      items.reserve(e.items.size());
      for (const auto& x : e.items) items.push_back(Eval(*x, frame));
      budget_.Step(static_cast<int64_t>(items.size()));
      return Value::List(std::move(items), e.kind == K::kTuple ? Value::Seq::kTuple : Value::Seq::kList);
    }
    case K::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = Eval(*e.items[i], frame);
        if (k.is_dict() || (k.is_list() && k.seq() != Value::Seq::kTuple))
          Fail("unhashable type: '" + std::string(TypeName(k)) + "'");
        d.Set(std::move(k), Eval(*e.items[i + 1], frame));
      }
      budget_.Step(static_cast<int64_t>(d.size()));
      return Value::MakeDict(std::move(d));
    }
    case K::kGetattr: {
      const Value obj = Eval(*e.a, frame);
      line_ = e.line;
      return GetAttr(obj, e.name);
    }
    case K::kGetitem: {
      const Value obj = Eval(*e.a, frame);
      if (e.b->kind == K::kSlice) return Slice(obj, *e.b, frame);
      const Value key = Eval(*e.b, frame);
      line_ = e.line;
      return GetItem(obj, key);
    }
    case K::kSlice:
      Fail("slice outside of a subscript");
    case K::kCall:
      return EvalCall(e, frame, nullptr);
    case K::kFilter: {
      const Value input = e.a ? Eval(*e.a, frame) : Value();
      CallArgs args;
      EvalArgs(e, frame, &args);
      line_ = e.line;
      return e.filter(*this, input, args);
    }
    case K::kTest: {
      const Value input = Eval(*e.a, frame);
      CallArgs args;
      EvalArgs(e, frame, &args);
      line_ = e.line;
      return Value::Bool(e.test(*this, input, args) != e.negated);
    }
    case K::kNeg:
    case K::kPos: {
      const Value v = Eval(*e.a, frame);
      line_ = e.line;
      if (v.is_undefined()) Fail(v.str().empty() ? "undefined value" : v.str());
      if (!v.is_number())
        Fail("bad operand type for unary " + std::string(e.kind == K::kNeg ? "-" : "+") + ": '" +
             std::string(TypeName(v)) + "'");
      if (e.kind == K::kPos) return v.is_bool() ? Value::Int(v.as_int()) : v;
      if (v.is_float()) return Value::Float(-v.as_float());
      if (v.as_int() == INT64_MIN) Fail("integer overflow");
      return Value::Int(-v.as_int());
    }
    case K::kNot:
      return Value::Bool(!Eval(*e.a, frame).Truthy());
    case K::kBinary: {
      const Value a = Eval(*e.a, frame);
      const Value b = Eval(*e.b, frame);
      line_ = e.line;
      return Binary(e.op, a, b);
    }
    case K::kAnd: {
      Value l = Eval(*e.a, frame);
      if (!l.Truthy()) return l;
      return Eval(*e.b, frame);
    }
    case K::kOr: {
      Value l = Eval(*e.a, frame);
      if (l.Truthy()) return l;
      return Eval(*e.b, frame);
    }
    case K::kConcat: {
      std::string s;
      for (const auto& part : e.items) AppendStr(Eval(*part, frame), &s, budget_);
      budget_.Built(s.size());
      return Value::Str(std::move(s));
    }
    case K::kCompare: {
      Value left = Eval(*e.a, frame);
      for (size_t i = 0; i < e.items.size(); ++i) {
        Value right = Eval(*e.items[i], frame);
        line_ = e.line;
        if (!CompareOp(e.cmp[i], left, right)) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case K::kCond:
      if (Eval(*e.a, frame).Truthy()) return Eval(*e.b, frame);
      if (e.c) return Eval(*e.c, frame);
      return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  return Value();
}

bool Interpreter::CompareOp(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::kEq:
      return Equal(a, b, budget_);
    case CmpOp::kNe:
      return !Equal(a, b, budget_);
    case CmpOp::kLt:
      return Compare(a, b, budget_, "<") < 0;
    case CmpOp::kLe:
      return Compare(a, b, budget_, "<=") <= 0;
    case CmpOp::kGt:
      return Compare(a, b, budget_, ">") > 0;
    case CmpOp::kGe:
      return Compare(a, b, budget_, ">=") >= 0;
    case CmpOp::kIn:
      return Contains(b, a);
    case CmpOp::kNotIn:
      return !Contains(b, a);
  }
  return false;
}

Value Interpreter::Slice(const Value& obj, const Expr& slice, const std::shared_ptr<Frame>& frame) {
  bool bad = false;
  auto index = [&](const ExprPtr& p) -> std::optional<int64_t> {
    if (!p) return std::nullopt;
    const Value v = Eval(*p, frame);
    if (v.is_none()) return std::nullopt;
    if (!v.is_integral()) bad = true;
    return v.is_integral() ? std::optional<int64_t>(v.as_int()) : std::nullopt;
  };
  const auto start = index(slice.a);
  const auto stop = index(slice.b);
  const auto step_opt = index(slice.c);
  line_ = slice.line;
  if (obj.is_undefined()) Fail(obj.str().empty() ? "undefined value" : obj.str());
  // jinja2 compiles a slice to Python's own subscript: no undefined fallback here.
  if (obj.is_dict()) Fail("unhashable type: 'slice'");
  if (!(obj.is_string() || obj.is_sequence_list()))
    Fail("'" + std::string(TypeName(obj)) + "' object is not subscriptable");
  if (bad) Fail("slice indices must be integers or None or have an __index__ method");
  int64_t step = step_opt.value_or(1);
  if (step == 0) Fail("slice step cannot be zero");
  std::u32string u;
  const bool str = obj.is_string();
  const bool ascii = str && py::IsAscii(obj.str());
  if (str && !ascii) u = py::Decode(obj.str());
  const int64_t n =
      str ? static_cast<int64_t>(ascii ? obj.str().size() : u.size()) : static_cast<int64_t>(obj.list().size());
  int64_t b, e;
  AdjustSlice(n, start, stop, step, &b, &e);
  if (step > n + 1) step = n + 1;  // any larger step selects the same items
  if (step < -(n + 1)) step = -(n + 1);
  const int64_t count = step > 0 ? (b < e ? (e - b - 1) / step + 1 : 0) : (e < b ? (b - e - 1) / -step + 1 : 0);
  budget_.Step(1 + count / 16);
  if (str) {
    std::string out;
    for (int64_t k = 0; k < count; ++k) {
      const int64_t i = b + k * step;
      if (ascii) {
        out.push_back(obj.str()[i]);
      } else {
        py::AppendUtf8(u[i], &out);
      }
    }
    return Value::Str(std::move(out));
  }
  ValueList out;
  out.reserve(count);
  for (int64_t k = 0; k < count; ++k) out.push_back(obj.list()[b + k * step]);
  return Value::List(std::move(out), obj.seq());
}

}  // namespace ls::jinja
