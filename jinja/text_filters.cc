// Filters over text and numbers: trim, upper/lower/capitalize/title, replace, indent, center,
// escape, format, string/int/float, abs, round, tojson (transformers' json.dumps override),
// default, wordcount. Registered by name in filters.cc.
#include "jinja/text_filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/builtins.h"
#include "jinja/pystr.h"
#include "jinja/python_json.h"

namespace ls::jinja {
namespace {

std::string F(const char* name) { return std::string("filter '") + name + "'"; }

Value Trim(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("trim"), {"chars"});
  std::optional<std::string> chars;
  if (b.Get(0) && !b.Get(0)->is_none()) chars = in.ToStr(*b.Get(0));
  return Value::Str(py::Strip(in.ToStr(v), chars, true, true));
}

Value Upper(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("upper"), {});
  return Value::Str(py::Upper(in.ToStr(v)));
}

Value Lower(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("lower"), {});
  return Value::Str(py::Lower(in.ToStr(v)));
}

Value Capitalize(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("capitalize"), {});
  return Value::Str(py::Capitalize(in.ToStr(v)));
}

// jinja2's title: words start after runs of whitespace, '-', '(', '{', '[', '<'; each word's
// first character upper-cased, the rest lower-cased.
Value Title(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("title"), {});
  const std::u32string u = py::Decode(in.ToStr(v));
  auto sep = [](char32_t c) { return py::IsSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
  std::string out;
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    const bool is_sep = sep(u[i]);
    while (j < u.size() && sep(u[j]) == is_sep) ++j;
    const std::string piece = py::Encode(std::u32string_view(u).substr(i, j - i));
    if (is_sep) {
      out += piece;
    } else {
      out += py::Upper(py::Encode(std::u32string_view(u).substr(i, 1)));
      out += py::Lower(py::Encode(std::u32string_view(u).substr(i + 1, j - i - 1)));
    }
    i = j;
  }
  return Value::Str(std::move(out));
}

Value Replace(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("replace"), {"old", "new", "count"});
  if (!b.Get(0) || !b.Get(1)) Fail("filter 'replace' needs the old and new strings");
  int64_t count = -1;
  if (b.Get(2) && !b.Get(2)->is_none()) {
    if (!b.Get(2)->is_integral()) Fail("filter 'replace': count must be an integer");
    count = b.Get(2)->as_int();
  }
  auto r = py::Replace(in.ToStr(v), in.ToStr(*b.Get(0)), in.ToStr(*b.Get(1)), count, in.budget().max_bytes);
  if (!r) in.budget().CheckBytes(SIZE_MAX);
  in.budget().Built(r->size());
  return Value::Str(std::move(*r));
}

Value Indent(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("indent"), {"width", "first", "blank"});
  if (v.is_undefined()) Fail(v.str().empty() ? "undefined value" : v.str());
  if (!v.is_string())  // jinja2 appends "\n" to the value itself
    Fail("unsupported operand type(s) for +=: '" + std::string(TypeName(v)) + "' and 'str'");
  std::string pad = "    ";
  if (const Value* w = b.Get(0)) {
    if (w->is_string()) {
      pad = w->str();
    } else if (w->is_integral()) {
      const int64_t n = std::max<int64_t>(0, w->as_int());
      in.budget().CheckBytes(static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)));
      pad.assign(n, ' ');
    } else {
      Fail("filter 'indent': width must be an integer or a string");
    }
  }
  const bool first = b.Get(1) && b.Get(1)->Truthy();
  const bool blank = b.Get(2) && b.Get(2)->Truthy();
  const std::vector<std::string> lines = py::SplitLines(in.ToStr(v) + "\n", false);
  in.budget().CheckBytes(lines.size() * pad.size());
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    if (i && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  if (first) out = pad + out;
  in.budget().CheckBytes(out.size());
  in.budget().Built(out.size());
  return Value::Str(std::move(out));
}

Value Center(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("center"), {"width"});
  int64_t width = 80;
  if (b.Get(0)) {
    if (!b.Get(0)->is_integral()) Fail("filter 'center': width must be an integer");
    width = b.Get(0)->as_int();
  }
  std::string s = in.ToStr(v);
  const auto len = static_cast<int64_t>(py::Length(s));
  if (width <= len) return Value::Str(std::move(s));
  in.budget().CheckBytes(static_cast<size_t>(std::min<int64_t>(width, INT32_MAX)));
  const int64_t marg = width - len;
  const int64_t left = marg / 2 + (marg & width & 1);
  return Value::Str(std::string(left, ' ') + s + std::string(marg - left, ' '));
}

Value Escape(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("escape"), {});
  std::string out;
  for (char c : in.ToStr(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  in.budget().CheckBytes(out.size());
  return Value::Str(std::move(out));
}

Value Safe(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("safe"), {});
  return v;
}

Value Format(Interpreter& in, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty())
    Fail("filter 'format' can't handle positional and keyword arguments at the same time");
  Value fmt_args;
  if (!args.keyword.empty()) {
    Dict d;
    for (const auto& [k, x] : args.keyword) d.Set(Value::Str(k), x);
    fmt_args = Value::MakeDict(std::move(d));
  } else {
    fmt_args = Value::List(args.positional, Value::Seq::kTuple);
  }
  return Value::Str(PercentFormat(in, in.ToStr(v), fmt_args));
}

Value String(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("string"), {});
  return v.is_string() ? v : Value::Str(in.ToStr(v));
}

Value Int(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("int"), {"default", "base"});
  const Value dflt = b.Get(0) ? *b.Get(0) : Value::Int(0);
  int base = 10;
  if (b.Get(1)) {
    if (!b.Get(1)->is_integral()) Fail("filter 'int': base must be an integer");
    base = static_cast<int>(std::clamp<int64_t>(b.Get(1)->as_int(), -1, 37));
  }
  if (v.is_undefined()) Fail(v.str().empty() ? "undefined value" : v.str());
  if (v.is_integral()) return Value::Int(v.as_int());
  double d = 0;
  if (v.is_float()) {
    d = v.as_float();
  } else if (v.is_string()) {
    int64_t i = 0;
    if (py::ParseInt(v.str(), base, &i)) return Value::Int(i);
    if (!py::ParseFloat(v.str(), &d)) return dflt;
  } else {
    return dflt;
  }
  if (std::isnan(d)) return dflt;
  if (std::isinf(d)) Fail("cannot convert float infinity to integer");
  if (std::fabs(d) >= 9.2233720368547758e18) Fail("integer overflow (values beyond 64 bits are not supported)");
  return Value::Int(static_cast<int64_t>(std::trunc(d)));
}

Value Float(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("float"), {"default"});
  const Value dflt = b.Get(0) ? *b.Get(0) : Value::Float(0.0);
  if (v.is_undefined()) Fail(v.str().empty() ? "undefined value" : v.str());
  if (v.is_number()) return Value::Float(v.ToDouble());
  double d = 0;
  if (v.is_string() && py::ParseFloat(v.str(), &d)) return Value::Float(d);
  return dflt;
}

Value Abs(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("abs"), {});
  if (v.is_float()) return Value::Float(std::fabs(v.as_float()));
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) Fail("integer overflow (values beyond 64 bits are not supported)");
    return Value::Int(std::llabs(v.as_int()));
  }
  if (v.is_undefined()) Fail(v.str().empty() ? "undefined value" : v.str());
  Fail("bad operand type for abs(): '" + std::string(TypeName(v)) + "'");
}

// Python's round(x, n) for floats: the decimal nearest to x's exact binary value, ties to even.
double PyRound(double x, int64_t n) {
  if (!std::isfinite(x) || n > 320) return x;
  if (n >= 0) {
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(n), x);
    return std::strtod(buf, nullptr);
  }
  if (n < -320) return std::copysign(0.0, x);
  const double p = std::pow(10.0, static_cast<double>(-n));
  const double y = x / p;
  double r = std::nearbyint(y);
  return r * p;
}

Value Round(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("round"), {"precision", "method"});
  int64_t precision = 0;
  if (b.Get(0)) {
    if (!b.Get(0)->is_integral()) Fail("filter 'round': precision must be an integer");
    precision = b.Get(0)->as_int();
  }
  const std::string method = b.Get(1) && b.Get(1)->is_string() ? b.Get(1)->str() : b.Get(1) ? "?" : "common";
  if (method != "common" && method != "ceil" && method != "floor") Fail("method must be common, ceil or floor");
  if (v.is_undefined()) Fail(v.str().empty() ? "undefined value" : v.str());
  if (!v.is_number()) Fail("type " + std::string(TypeName(v)) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_integral()) {
      if (precision >= 0) return Value::Int(v.as_int());
      return Value::Int(static_cast<int64_t>(PyRound(static_cast<double>(v.as_int()), precision)));
    }
    return Value::Float(PyRound(v.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.ToDouble() * scale;
  return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

// transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value ToJson(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("tojson"), {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions opt;
  opt.ensure_ascii = b.Get(0) && b.Get(0)->Truthy();
  if (const Value* ind = b.Get(1); ind && !ind->is_none()) {
    if (ind->is_string()) {
      opt.indent = ind->str();
    } else if (ind->is_integral()) {
      const int64_t n = std::max<int64_t>(0, ind->as_int());
      in.budget().CheckBytes(static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)));
      opt.indent = std::string(n, ' ');
    } else {
      opt.invalid_indent = std::string(TypeName(*ind));
    }
  }
  if (const Value* sep = b.Get(2); sep && !sep->is_none()) {
    if (!sep->is_sequence_list() || sep->list().size() != 2 || !sep->list()[0].is_string() ||
        !sep->list()[1].is_string())
      Fail("filter 'tojson': separators must be a pair of strings");
    opt.item_separator = sep->list()[0].str();
    opt.key_separator = sep->list()[1].str();
  }
  opt.sort_keys = b.Get(3) && b.Get(3)->Truthy();
  std::string out;
  DumpJson(v, opt, &out, in.budget());
  in.budget().Built(out.size());
  return Value::Str(std::move(out));
}

Value Default(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("default"), {"default_value", "boolean"});
  const bool boolean = b.Get(1) && b.Get(1)->Truthy();
  if (v.is_undefined() || (boolean && !v.Truthy())) return b.Get(0) ? *b.Get(0) : Value::Str("");
  return v;
}

Value WordCount(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("wordcount"), {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : py::Decode(in.ToStr(v))) {
    const bool w = c == '_' || py::IsAlpha(c) || py::IsDigit(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::Int(n);
}

}  // namespace

const std::vector<std::pair<std::string_view, FilterFn>>& TextFilters() {
  static const std::vector<std::pair<std::string_view, FilterFn>> kFilters = {
      {"trim", Trim},
      {"upper", Upper},
      {"lower", Lower},
      {"capitalize", Capitalize},
      {"title", Title},
      {"replace", Replace},
      {"indent", Indent},
      {"center", Center},
      {"escape", Escape},
      {"e", Escape},
      {"forceescape", Escape},
      {"safe", Safe},
      {"format", Format},
      {"string", String},
      {"int", Int},
      {"float", Float},
      {"abs", Abs},
      {"round", Round},
      {"tojson", ToJson},
      {"default", Default},
      {"d", Default},
      {"wordcount", WordCount},
  };
  return kFilters;
}

}  // namespace ls::jinja
