// The template's global functions, as transformers' chat-template environment provides them:
// range (with the sandbox's 100000-item bound), dict, namespace, raise_exception, strftime_now.
#include <ctime>

#include "jinja/builtins.h"

namespace ls::jinja {
namespace {

using GlobalFn = Value (*)(Interpreter& in, CallArgs& args);

class BuiltinFunction : public Object {
 public:
  BuiltinFunction(std::string name, GlobalFn fn) : name_(std::move(name)), fn_(fn) {}
  std::string_view TypeName() const override { return "builtin_function_or_method"; }
  void Repr(std::string* out, Budget&, int) const override { out->append("<built-in function " + name_ + ">"); }
  bool IsCallable() const override { return true; }
  Value Call(Interpreter& in, CallArgs& args) const override { return fn_(in, args); }

 private:
  std::string name_;
  GlobalFn fn_;
};

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Value Range(Interpreter& in, CallArgs& args) {
  if (!args.keyword.empty()) Fail("range() takes no keyword arguments");
  const ValueList& a = args.positional;
  if (a.empty() || a.size() > 3) Fail("range expected 1 to 3 arguments, got " + std::to_string(a.size()));
  for (const Value& v : a)
    if (!v.is_integral()) Fail("'" + std::string(TypeName(v)) + "' object cannot be interpreted as an integer");
  int64_t start = 0, stop = 0, step = 1;
  if (a.size() == 1) {
    stop = a[0].as_int();
  } else {
    start = a[0].as_int();
    stop = a[1].as_int();
    if (a.size() == 3) step = a[2].as_int();
  }
  if (step == 0) Fail("range() arg 3 must not be zero");
  // Count in floating point first: the bound check must not overflow.
  const long double span = static_cast<long double>(stop) - start;
  const long double n = step > 0 ? (span > 0 ? (span - 1) / step + 1 : 0)
                                 : (span < 0 ? (-span - 1) / -static_cast<long double>(step) + 1 : 0);
  if (n > kMaxRange) Fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  const auto count = static_cast<int64_t>(n);
  ValueList items;
  items.reserve(count);
  for (int64_t i = 0; i < count; ++i) items.push_back(Value::Int(start + i * step));
  in.budget().Step(count);
  return Value::List(std::move(items));
}

// dict(*args, **kwargs) as Python builds it: a mapping or pairs, then keywords.
Dict BuildDict(Interpreter& in, const CallArgs& args, const char* what) {
  if (args.positional.size() > 1) Fail(std::string(what) + " expected at most 1 positional argument");
  Dict d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.dict();
    } else {
      const auto pairs = Iterate(src, in.budget());
      for (const Value& p : *pairs) {
        if (!p.is_list() || p.list().size() != 2 || p.seq() == Value::Seq::kIterator)
          Fail(std::string(what) + ": each element must be a pair");
        d.Set(p.list()[0], p.list()[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.Set(Value::Str(k), v);
  return d;
}

Value MakeDictFn(Interpreter& in, CallArgs& args) { return Value::MakeDict(BuildDict(in, args, "dict()")); }

Value MakeNamespace(Interpreter& in, CallArgs& args) {
  const Dict d = BuildDict(in, args, "namespace()");
  auto ns = in.NewNamespace();
  for (const auto& [k, v] : d.items()) {
    if (!k.is_string()) Fail("namespace() attribute names must be strings");
    ns->Set(k.str(), v);
  }
  return Value::Obj(ns);
}

Value RaiseException(Interpreter& in, CallArgs& args) {
  ArgBinder b(args, "raise_exception()", {"message"});
  const std::string msg = b.Get(0) ? in.ToStr(*b.Get(0)) : "";
  throw TemplateError(msg, in.line(), /*from_template=*/true);
}

Value StrftimeNow(Interpreter& in, CallArgs& args) {
  ArgBinder b(args, "strftime_now()", {"format"});
  if (!b.Get(0) || !b.Get(0)->is_string()) Fail("strftime_now() expects a format string");
  const std::string& fmt = b.Get(0)->str();
  if (fmt.size() > 1000) Fail("strftime_now() format too long");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::string out(fmt.size() * 16 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
  out.resize(n);
  in.budget().Built(n);
  return Value::Str(std::move(out));
}

}  // namespace

void AddGlobals(Frame& frame) {
  const std::pair<const char*, GlobalFn> fns[] = {{"range", Range},
                                                  {"dict", MakeDictFn},
                                                  {"namespace", MakeNamespace},
                                                  {"raise_exception", RaiseException},
                                                  {"strftime_now", StrftimeNow}};
  for (const auto& [name, fn] : fns) frame.Set(name, Value::Obj(std::make_shared<BuiltinFunction>(name, fn)));
}

}  // namespace ls::jinja
