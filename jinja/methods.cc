// Methods of strings, dicts and lists (x.strip(), d.items(), ...) with Python's semantics.
// Methods that change a list or dict are refused, as jinja2's immutable sandbox refuses them.
#include <algorithm>
#include <optional>
#include <string_view>

#include "jinja/builtins.h"
#include "jinja/pystr.h"

namespace ls::jinja {
namespace {

constexpr std::string_view kStrMethods[] = {
    "startswith", "endswith", "strip",   "lstrip",  "rstrip",     "split",        "rsplit",
    "splitlines", "upper",    "lower",   "title",   "capitalize", "replace",      "find",
    "rfind",      "index",    "rindex",  "count",   "join",       "format",       "isdigit",
    "isalpha",    "isalnum",  "isspace", "islower", "isupper",    "removeprefix", "removesuffix"};
constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get", "copy"};
constexpr std::string_view kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kListMethods[] = {"index", "count", "copy"};
constexpr std::string_view kListUnsafe[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
constexpr std::string_view kObjectMethods[] = {"cycle", "changed"};

template <size_t N>
bool In(const std::string_view (&set)[N], std::string_view name) {
  return std::find(std::begin(set), std::end(set), name) != std::end(set);
}

std::string What(const Value& self, std::string_view name) {
  return std::string(TypeName(self)) + "." + std::string(name) + "()";
}

const std::string& StrArg(const Value* v, const Value& self, std::string_view name) {
  if (!v || !v->is_string())
    Fail(What(self, name) + " expects a string argument, got " + (v ? std::string(TypeName(*v)) : "nothing"));
  return v->str();
}

std::optional<std::string> OptStrArg(const Value* v, const Value& self, std::string_view name) {
  if (!v || v->is_none()) return std::nullopt;
  return StrArg(v, self, name);
}

int64_t IntArg(const Value* v, int64_t dflt, const Value& self, std::string_view name) {
  if (!v || v->is_none()) return dflt;
  if (!v->is_integral()) Fail(What(self, name) + " expects an integer, got " + std::string(TypeName(*v)));
  return v->as_int();
}

Value StrList(std::vector<std::string> parts) {
  ValueList items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::Str(std::move(p)));
  return Value::List(std::move(items));
}

// str.format with positional ({} {0}) and keyword ({name}) fields, !r / !s, no format specs.
std::string Format(Interpreter& in, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        Fail("single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) Fail("single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conv = 's';
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : '?';
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos) Fail("format specifications in str.format are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size())
        Fail("Replacement index " + std::to_string(auto_index) + " out of range");
      v = &args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t k = std::stoul(field.substr(0, 9));
      if (k >= args.positional.size()) Fail("Replacement index " + field + " out of range");
      v = &args.positional[k];
    } else {
      v = args.Keyword(field);
      if (!v) Fail("format field '" + field + "' not given");
    }
    if (conv == 's') {
      out += in.ToStr(*v);
    } else if (conv == 'r') {
      out += Repr(*v, in.budget());
    } else {
      Fail("unknown conversion in format string");
    }
    in.budget().CheckBytes(out.size());
  }
  return out;
}

Value StrMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  const std::string& s = self.str();
  const std::string what = What(self, name);
  Budget& budget = in.budget();
  budget.Built(s.size());
  if (name == "format") return Value::Str(Format(in, s, args));
  if (name == "startswith" || name == "endswith") {
    ArgBinder b(args, what, {"prefix"});
    const Value* p = b.Get(0);
    auto match = [&](const std::string& x) {
      return name == "startswith" ? s.compare(0, x.size(), x) == 0
                                  : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
    };
    if (p && p->is_list() && p->seq() == Value::Seq::kTuple) {
      for (const Value& x : p->list())
        if (match(StrArg(&x, self, name))) return Value::Bool(true);
      return Value::Bool(false);
    }
    return Value::Bool(match(StrArg(p, self, name)));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgBinder b(args, what, {"chars"});
    return Value::Str(py::Strip(s, OptStrArg(b.Get(0), self, name), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ArgBinder b(args, what, {"sep", "maxsplit"});
    const auto sep = OptStrArg(b.Get(0), self, name);
    if (sep && sep->empty()) Fail("empty separator");
    const int64_t maxsplit = IntArg(b.Get(1), -1, self, name);
    return StrList(name == "split" ? py::Split(s, sep, maxsplit) : py::RSplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    ArgBinder b(args, what, {"keepends"});
    return StrList(py::SplitLines(s, b.Get(0) && b.Get(0)->Truthy()));
  }
  if (name == "replace") {
    ArgBinder b(args, what, {"old", "new", "count"});
    auto r = py::Replace(s, StrArg(b.Get(0), self, name), StrArg(b.Get(1), self, name),
                         IntArg(b.Get(2), -1, self, name), budget.max_bytes);
    if (!r) budget.CheckBytes(SIZE_MAX);
    budget.Built(r->size());
    return Value::Str(std::move(*r));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    ArgBinder b(args, what, {"sub"});
    const int64_t at = py::Find(s, StrArg(b.Get(0), self, name), name == "rfind" || name == "rindex");
    if (at < 0 && (name == "index" || name == "rindex")) Fail("substring not found");
    return Value::Int(at);
  }
  if (name == "count") {
    ArgBinder b(args, what, {"sub"});
    return Value::Int(py::Count(s, StrArg(b.Get(0), self, name)));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgBinder b(args, what, {"affix"});
    const std::string& a = StrArg(b.Get(0), self, name);
    if (name == "removeprefix" && s.compare(0, a.size(), a) == 0) return Value::Str(s.substr(a.size()));
    if (name == "removesuffix" && !a.empty() && s.size() >= a.size() &&
        s.compare(s.size() - a.size(), a.size(), a) == 0)
      return Value::Str(s.substr(0, s.size() - a.size()));
    return self;
  }
  if (name == "join") {
    ArgBinder b(args, what, {"iterable"});
    if (!b.Get(0)) Fail(what + " takes exactly one argument");
    const auto items = Iterate(*b.Get(0), budget);
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      const Value& x = (*items)[i];
      if (!x.is_string())
        Fail("sequence item " + std::to_string(i) + ": expected str instance, " + std::string(TypeName(x)) + " found");
      if (i) out += s;
      out += x.str();
      budget.CheckBytes(out.size());
    }
    budget.Built(out.size());
    return Value::Str(std::move(out));
  }
  ArgBinder none(args, what, {});
  if (name == "upper") return Value::Str(py::Upper(s));
  if (name == "lower") return Value::Str(py::Lower(s));
  if (name == "title") return Value::Str(py::Title(s));
  if (name == "capitalize") return Value::Str(py::Capitalize(s));
  if (name == "islower") return Value::Bool(py::IsLowerStr(s));
  if (name == "isupper") return Value::Bool(py::IsUpperStr(s));
  const std::u32string u = py::Decode(s);
  auto all = [&](bool (*pred)(char32_t)) { return !u.empty() && std::all_of(u.begin(), u.end(), pred); };
  if (name == "isdigit") return Value::Bool(all(py::IsDigit));
  if (name == "isalpha") return Value::Bool(all(py::IsAlpha));
  if (name == "isspace") return Value::Bool(all(py::IsSpace));
  if (name == "isalnum") return Value::Bool(all([](char32_t c) { return py::IsAlpha(c) || py::IsDigit(c); }));
  Fail("unknown method " + what);
}

Value DictMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  const std::string what = What(self, name);
  if (name == "get") {
    ArgBinder b(args, what, {"key", "default"});
    if (!b.Get(0)) Fail(what + " expected at least 1 argument");
    if (const Value* v = self.dict().Find(*b.Get(0))) return *v;
    return b.Get(1) ? *b.Get(1) : Value::None();
  }
  ArgBinder none(args, what, {});
  if (name == "copy") return self;
  ValueList out;
  out.reserve(self.dict().size());
  in.budget().Step(static_cast<int64_t>(self.dict().size()));
  for (const auto& [k, v] : self.dict().items()) {
    if (name == "items")
      out.push_back(Value::List({k, v}, Value::Seq::kTuple));
    else
      out.push_back(name == "keys" ? k : v);
  }
  return Value::List(std::move(out), name == "items"  ? Value::Seq::kItems
                                     : name == "keys" ? Value::Seq::kKeys
                                                      : Value::Seq::kValues);
}

Value ListMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args) {
  const std::string what = What(self, name);
  if (name == "copy") {
    ArgBinder none(args, what, {});
    return Value::List(self.list(), self.seq() == Value::Seq::kTuple ? Value::Seq::kTuple : Value::Seq::kList);
  }
  ArgBinder b(args, what, {"value"});
  if (!b.Get(0)) Fail(what + " takes exactly one argument");
  int64_t count = 0;
  for (size_t i = 0; i < self.list().size(); ++i) {
    if (!Equal(self.list()[i], *b.Get(0), in.budget())) continue;
    if (name == "index") return Value::Int(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") Fail(Repr(*b.Get(0), in.budget()) + " is not in " + std::string(TypeName(self)));
  return Value::Int(count);
}

class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string_view TypeName() const override { return "builtin_function_or_method"; }
  void Repr(std::string* out, Budget&, int) const override {
    out->append("<built-in method " + name_ + " of " + std::string(ls::jinja::TypeName(self_)) + " object>");
  }
  bool IsCallable() const override { return true; }
  Value Call(Interpreter& in, CallArgs& args) const override {
    bool handled = false;
    Value r = self_.is_object() ? self_.object()->CallMethod(in, name_, args, &handled)
                                : CallBuiltinMethod(in, self_, name_, args, &handled);
    if (!handled) Fail("'" + std::string(ls::jinja::TypeName(self_)) + "' object has no method '" + name_ + "'");
    return r;
  }

 private:
  Value self_;
  std::string name_;
};

}  // namespace

Value MakeBoundMethod(Value self, std::string name) {
  return Value::Obj(std::make_shared<BoundMethod>(std::move(self), std::move(name)));
}

bool IsMethodName(std::string_view name) {
  return In(kStrMethods, name) || In(kDictMethods, name) || In(kDictUnsafe, name) || In(kListMethods, name) ||
         In(kListUnsafe, name) || In(kObjectMethods, name);
}

Value CallBuiltinMethod(Interpreter& in, const Value& obj, std::string_view name, CallArgs& args, bool* handled) {
  *handled = true;
  if (obj.is_string() && In(kStrMethods, name)) return StrMethod(in, obj, name, args);
  if (obj.is_dict()) {
    if (In(kDictMethods, name)) return DictMethod(in, obj, name, args);
    if (In(kDictUnsafe, name)) Fail("access to attribute '" + std::string(name) + "' of 'dict' object is unsafe.");
  }
  if (obj.is_list()) {
    if (In(kListUnsafe, name))
      Fail("access to attribute '" + std::string(name) + "' of '" + std::string(TypeName(obj)) + "' object is unsafe.");
    if (obj.is_sequence_list() && In(kListMethods, name)) return ListMethod(in, obj, name, args);
  }
  *handled = false;
  return Value();
}

Value BuiltinMethodAttr(const Value& obj, std::string_view name, bool* found) {
  *found = (obj.is_string() && In(kStrMethods, name)) ||
           (obj.is_dict() && (In(kDictMethods, name) || In(kDictUnsafe, name))) ||
           (obj.is_list() && (In(kListUnsafe, name) || (obj.is_sequence_list() && In(kListMethods, name))));
  return *found ? MakeBoundMethod(obj, std::string(name)) : Value();
}

}  // namespace ls::jinja
