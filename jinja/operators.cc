// Python's binary operators and `in` over values, with int64 overflow as an error (Python's ints
// are unbounded) and printf-style `str % args`.
#include <cmath>
#include <cstdio>

#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/pystr.h"

namespace ls::jinja {
namespace {

const char* Symbol(BinOp op) {
  switch (op) {
    case BinOp::kAdd:
      return "+";
    case BinOp::kSub:
      return "-";
    case BinOp::kMul:
      return "*";
    case BinOp::kDiv:
      return "/";
    case BinOp::kFloorDiv:
      return "//";
    case BinOp::kMod:
      return "%";
    case BinOp::kPow:
      return "**";
  }
  return "?";
}

[[noreturn]] void Overflow() { Fail("integer overflow (values beyond 64 bits are not supported)"); }

Value IntArith(BinOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  switch (op) {
    case BinOp::kAdd:
      if (__builtin_add_overflow(a, b, &r)) Overflow();
      return Value::Int(r);
    case BinOp::kSub:
      if (__builtin_sub_overflow(a, b, &r)) Overflow();
      return Value::Int(r);
    case BinOp::kMul:
      if (__builtin_mul_overflow(a, b, &r)) Overflow();
      return Value::Int(r);
    case BinOp::kDiv:
      if (b == 0) Fail("division by zero");
      return Value::Float(static_cast<double>(a) / static_cast<double>(b));
    case BinOp::kFloorDiv: {
      if (b == 0) Fail("integer division or modulo by zero");
      if (a == INT64_MIN && b == -1) Overflow();
      int64_t q = a / b;
      if (a % b != 0 && ((a < 0) != (b < 0))) --q;
      return Value::Int(q);
    }
    case BinOp::kMod: {
      if (b == 0) Fail("integer division or modulo by zero");
      if (b == -1) return Value::Int(0);
      int64_t m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return Value::Int(m);
    }
    case BinOp::kPow: {
      if (b < 0) {
        if (a == 0) Fail("0.0 cannot be raised to a negative power");
        return Value::Float(std::pow(static_cast<double>(a), static_cast<double>(b)));
      }
      int64_t result = 1, base = a;
      for (int64_t e = b; e > 0; e >>= 1) {
        if (e & 1)
          if (__builtin_mul_overflow(result, base, &result)) Overflow();
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) Overflow();
      }
      return Value::Int(result);
    }
  }
  return Value();
}

Value FloatArith(BinOp op, double a, double b) {
  switch (op) {
    case BinOp::kAdd:
      return Value::Float(a + b);
    case BinOp::kSub:
      return Value::Float(a - b);
    case BinOp::kMul:
      return Value::Float(a * b);
    case BinOp::kDiv:
      if (b == 0) Fail("float division by zero");
      return Value::Float(a / b);
    case BinOp::kFloorDiv: {
      if (b == 0) Fail("float floor division by zero");
      double mod = std::fmod(a, b);
      double div = (a - mod) / b;
      if (mod != 0) {
        if ((b < 0) != (mod < 0)) div -= 1.0;
      }
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, a / b);
      }
      return Value::Float(floordiv);
    }
    case BinOp::kMod: {
      if (b == 0) Fail("float modulo by zero");
      double mod = std::fmod(a, b);
      if (mod != 0) {
        if ((b < 0) != (mod < 0)) mod += b;
      } else {
        mod = std::copysign(0.0, b);
      }
      return Value::Float(mod);
    }
    case BinOp::kPow: {
      if (a == 0 && b < 0) Fail("0.0 cannot be raised to a negative power");
      if (a < 0 && b != std::floor(b)) Fail("a negative number cannot be raised to a fractional power");
      const double r = std::pow(a, b);
      if (std::isinf(r) && std::isfinite(a) && std::isfinite(b)) Fail("numerical result out of range");
      return Value::Float(r);
    }
  }
  return Value();
}

Value Repeat(const Value& seq, int64_t n, Budget& budget) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && static_cast<uint64_t>(n) > budget.max_bytes / s.size()) budget.CheckBytes(SIZE_MAX);
    std::string out;
    out.reserve(s.size() * n);
    for (int64_t i = 0; i < n; ++i) out += s;
    budget.Built(out.size());
    return Value::Str(std::move(out));
  }
  const ValueList& items = seq.list();
  if (!items.empty() && static_cast<uint64_t>(n) > budget.max_bytes / 16 / items.size()) budget.CheckBytes(SIZE_MAX);
  ValueList out;
  out.reserve(items.size() * n);
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  budget.Built(out.size() * 16);
  return Value::List(std::move(out), seq.seq());
}

}  // namespace

// printf-style formatting: `fmt % args` and the format filter.
std::string PercentFormat(Interpreter& in, const std::string& fmt, const Value& args) {
  const bool mapping = args.is_dict() || args.is_undefined();
  ValueList positional;
  if (args.is_list() && args.seq() == Value::Seq::kTuple) {
    positional = args.list();
  } else if (!mapping) {
    positional.push_back(args);
  }
  size_t next = 0;
  std::string out;
  char buf[512];
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) Fail("incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos || !args.is_dict()) Fail("format requires a mapping");
      arg = args.dict().Find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!arg) Fail("format key '" + fmt.substr(i + 1, close - i - 1) + "' not found");
      i = close + 1;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::string_view("-+ 0#").find(fmt[i]) != std::string_view::npos) spec += fmt[i++];
    int width = 0, prec = -1;
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9' && width < 1000) width = width * 10 + (fmt[i++] - '0');
    if (i < fmt.size() && fmt[i] == '.') {
      prec = 0;
      ++i;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9' && prec < 100) prec = prec * 10 + (fmt[i++] - '0');
    }
    if (i >= fmt.size()) Fail("incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (!arg) {
      if (next >= positional.size()) Fail("not enough arguments for format string");
      arg = &positional[next++];
    }
    if (width > 500) Fail("format width too large");
    if (conv == 's' || conv == 'r' || conv == 'a') {
      std::string s = conv == 's' ? in.ToStr(*arg) : Repr(*arg, in.budget());
      if (prec >= 0) s = py::Encode(py::Decode(s).substr(0, prec));
      const auto len = static_cast<int>(py::Length(s));
      const bool left = spec.find('-') != std::string::npos;
      if (len < width && !left) out.append(width - len, ' ');
      out += s;
      if (len < width && left) out.append(width - len, ' ');
      continue;
    }
    if (!arg->is_number())
      Fail("%" + std::string(1, conv) + " format: a real number is required, not " + std::string(TypeName(*arg)));
    spec += std::to_string(width);
    if (prec >= 0) spec += "." + std::to_string(prec);
    if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o') {
      const int64_t v = arg->is_float() ? static_cast<int64_t>(std::trunc(arg->as_float())) : arg->as_int();
      spec += std::string("ll") + (conv == 'i' || conv == 'u' ? 'd' : conv);
      std::snprintf(buf, sizeof buf, spec.c_str(), static_cast<long long>(v));
    } else if (std::string_view("eEfFgG").find(conv) != std::string_view::npos) {
      spec += conv;
      std::snprintf(buf, sizeof buf, spec.c_str(), arg->ToDouble());
    } else {
      Fail(std::string("unsupported format character '") + conv + "'");
    }
    out += buf;
  }
  if (!mapping && next < positional.size()) Fail("not all arguments converted during string formatting");
  in.budget().Built(out.size());
  in.budget().CheckBytes(out.size());
  return out;
}

Value Interpreter::Binary(BinOp op, const Value& a, const Value& b) {
  // str % Undefined formats (Python takes an object with __getitem__ as a mapping); any other
  // operation on Undefined fails.
  if (op == BinOp::kMod && a.is_string() && b.is_undefined()) return Value::Str(PercentFormat(*this, a.str(), b));
  for (const Value* v : {&a, &b})
    if (v->is_undefined()) Fail(v->str().empty() ? "undefined value" : v->str());
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return IntArith(op, a.as_int(), b.as_int());
    return FloatArith(op, a.ToDouble(), b.ToDouble());
  }
  switch (op) {
    case BinOp::kAdd:
      if (a.is_string() && b.is_string()) {
        budget_.CheckBytes(a.str().size() + b.str().size());
        budget_.Built(a.str().size() + b.str().size());
        return Value::Str(a.str() + b.str());
      }
      if (a.is_sequence_list() && b.is_sequence_list() && a.seq() == b.seq()) {
        ValueList out = a.list();
        out.insert(out.end(), b.list().begin(), b.list().end());
        budget_.CheckBytes(out.size() * 16);
        budget_.Built(out.size() * 16);
        return Value::List(std::move(out), a.seq());
      }
      break;
    case BinOp::kMul:
      if ((a.is_string() || a.is_sequence_list()) && b.is_integral()) return Repeat(a, b.as_int(), budget_);
      if ((b.is_string() || b.is_sequence_list()) && a.is_integral()) return Repeat(b, a.as_int(), budget_);
      break;
    case BinOp::kMod:
      if (a.is_string()) return Value::Str(PercentFormat(*this, a.str(), b));
      break;
    default:
      break;
  }
  Fail(std::string("unsupported operand type(s) for ") + Symbol(op) + ": '" + std::string(TypeName(a)) + "' and '" +
       std::string(TypeName(b)) + "'");
}

bool Interpreter::Contains(const Value& c, const Value& item) {
  switch (c.type()) {
    case Value::Type::kUndefined:
      return false;
    case Value::Type::kString:
      if (!item.is_string()) Fail("'in <string>' requires string as left operand, not " + std::string(TypeName(item)));
      return c.str().find(item.str()) != std::string::npos;
    case Value::Type::kList:
      for (const Value& x : c.list())
        if (Equal(x, item, budget_)) return true;
      return false;
    case Value::Type::kDict:
      if (item.is_dict() || (item.is_list() && item.seq() != Value::Seq::kTuple))
        Fail("unhashable type: '" + std::string(TypeName(item)) + "'");
      budget_.Step(static_cast<int64_t>(c.dict().size()));
      return c.dict().Find(item) != nullptr;
    default:
      Fail("argument of type '" + std::string(TypeName(c)) + "' is not iterable");
  }
}

}  // namespace ls::jinja
