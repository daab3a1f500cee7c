// Filters over sequences and mappings (length, first/last, join, map, select/reject(attr), sort,
// dictsort, unique, min/max, sum, list, items, reverse, batch, attr) and the filter registry.
// Where jinja2 returns a generator the result is an iterator value (always true, no len()).
#include <algorithm>
#include <string_view>

#include "jinja/builtins.h"
#include "jinja/pystr.h"
#include "jinja/text_filters.h"

namespace ls::jinja {
namespace {

std::string F(const char* name) { return std::string("filter '") + name + "'"; }

Value Iter(ValueList items) { return Value::List(std::move(items), Value::Seq::kIterator); }

// jinja2's attribute getter: "a.b.0" looks up a, then b, then item 0, each with getitem rules.
class AttrGetter {
 public:
  AttrGetter(const Value* attribute) {
    if (!attribute || attribute->is_none()) return;
    if (!attribute->is_string()) {
      parts_.push_back(*attribute);
      return;
    }
    for (const std::string& p : py::Split(attribute->str(), std::string("."), -1)) {
      const bool digits = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
      int64_t i = 0;
      parts_.push_back(digits && py::ParseInt(p, 10, &i) ? Value::Int(i) : Value::Str(p));
    }
  }
  Value operator()(Interpreter& in, Value item) const {
    for (const Value& p : parts_) item = in.GetItem(item, p);
    return item;
  }
  bool empty() const { return parts_.empty(); }

 private:
  ValueList parts_;
};

Value Lowered(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::Str(py::Lower(v.str())) : v;
}

bool Less(Interpreter& in, const Value& a, const Value& b) { return Compare(a, b, in.budget(), "<") < 0; }

Value Length(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("length"), {});
  return Value::Int(ls::jinja::Length(v));
}

Value List(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("list"), {});
  return Value::List(*Iterate(v, in.budget()));
}

Value First(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("first"), {});
  const auto items = Iterate(v, in.budget());
  return items->empty() ? Value::Undefined("No first item, sequence was empty.") : items->front();
}

Value Last(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("last"), {});
  if (v.is_list() && v.seq() == Value::Seq::kIterator) Fail("'generator' object is not reversible");
  const auto items = Iterate(v, in.budget());
  return items->empty() ? Value::Undefined("No last item, sequence was empty.") : items->back();
}

Value Join(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("join"), {"d", "attribute"});
  const std::string sep = b.Get(0) ? in.ToStr(*b.Get(0)) : "";
  const AttrGetter get(b.Get(1));
  std::string out;
  bool first = true;
  const auto items = Iterate(v, in.budget());  // keeps a fresh list alive for the loop
  for (const Value& x : *items) {
    if (!first) out += sep;
    first = false;
    AppendStr(get.empty() ? x : get(in, x), &out, in.budget());
  }
  in.budget().Built(out.size());
  return Value::Str(std::move(out));
}

Value Map(Interpreter& in, const Value& v, CallArgs& args) {
  ValueList out;
  if (!v.Truthy()) return Iter(std::move(out));
  const auto items = Iterate(v, in.budget());
  if (args.positional.empty() && args.Keyword("attribute")) {
    ArgBinder b(args, F("map"), {"attribute", "default"});
    const AttrGetter get(b.Get(0));
    for (const Value& x : *items) {
      Value r = get(in, x);
      if (b.Get(1) && !b.Get(1)->is_none() && r.is_undefined()) r = *b.Get(1);
      out.push_back(std::move(r));
    }
    return Iter(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) Fail("map requires a filter argument");
  const FilterFn fn = FindFilter(args.positional[0].str());
  if (!fn) Fail("unknown filter '" + args.positional[0].str() + "' in 'map'");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& x : *items) {
    in.budget().Step();
    out.push_back(fn(in, x, rest));
  }
  return Iter(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value SelectOrReject(Interpreter& in, const Value& v, CallArgs& args, bool by_attr, bool keep_when) {
  ValueList out;
  if (!v.Truthy()) return Iter(std::move(out));
  size_t off = 0;
  AttrGetter get(nullptr);
  if (by_attr) {
    if (args.positional.empty()) Fail("Missing parameter for attribute name");
    get = AttrGetter(&args.positional[0]);
    off = 1;
  }
  TestFn test = nullptr;
  CallArgs rest;
  if (args.positional.size() > off) {
    if (!args.positional[off].is_string()) Fail("a test name must be a string");
    test = FindTest(args.positional[off].str());
    if (!test) Fail("unknown test '" + args.positional[off].str() + "'");
    rest.positional.assign(args.positional.begin() + off + 1, args.positional.end());
    rest.keyword = args.keyword;
  }
  const auto items = Iterate(v, in.budget());  // keeps a fresh list alive for the loop
  for (const Value& x : *items) {
    in.budget().Step();
    const Value subject = by_attr ? get(in, x) : x;
    const bool ok = test ? test(in, subject, rest) : subject.Truthy();
    if (ok == keep_when) out.push_back(x);
  }
  return Iter(std::move(out));
}

Value Select(Interpreter& in, const Value& v, CallArgs& a) { return SelectOrReject(in, v, a, false, true); }
Value Reject(Interpreter& in, const Value& v, CallArgs& a) { return SelectOrReject(in, v, a, false, false); }
Value SelectAttr(Interpreter& in, const Value& v, CallArgs& a) { return SelectOrReject(in, v, a, true, true); }
Value RejectAttr(Interpreter& in, const Value& v, CallArgs& a) { return SelectOrReject(in, v, a, true, false); }

Value Sort(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("sort"), {"reverse", "case_sensitive", "attribute"});
  const bool reverse = b.Get(0) && b.Get(0)->Truthy();
  const bool cs = b.Get(1) && b.Get(1)->Truthy();
  std::vector<AttrGetter> getters;
  if (b.Get(2) && b.Get(2)->is_string()) {
    for (const std::string& a : py::Split(b.Get(2)->str(), std::string(","), -1)) {
      const Value name = Value::Str(a);
      getters.emplace_back(&name);
    }
  } else if (b.Get(2)) {
    getters.emplace_back(b.Get(2));
  }
  const auto items = Iterate(v, in.budget());
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (const Value& x : *items) {
    ValueList key;
    for (const auto& g : getters) key.push_back(Lowered(g(in, x), cs));
    keyed.emplace_back(getters.empty() ? Lowered(x, cs) : Value::List(std::move(key)), x);
  }
  ValueList order;
  for (size_t i = 0; i < keyed.size(); ++i) order.push_back(Value::Int(static_cast<int64_t>(i)));
  StableSort(order, [&](const Value& a, const Value& c) {
    const Value& ka = keyed[a.as_int()].first;
    const Value& kc = keyed[c.as_int()].first;
    return reverse ? Less(in, kc, ka) : Less(in, ka, kc);
  });
  ValueList out;
  for (const Value& i : order) out.push_back(keyed[i.as_int()].second);
  return Value::List(std::move(out));
}

Value DictSort(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("dictsort"), {"case_sensitive", "by", "reverse"});
  const bool cs = b.Get(0) && b.Get(0)->Truthy();
  const std::string by = b.Get(1) ? in.ToStr(*b.Get(1)) : "key";
  if (by != "key" && by != "value") Fail("You can only sort by either \"key\" or \"value\"");
  const bool reverse = b.Get(2) && b.Get(2)->Truthy();
  if (v.is_undefined()) Fail(v.str().empty() ? "undefined value" : v.str());
  if (!v.is_dict()) Fail("filter 'dictsort' needs a mapping, got " + std::string(TypeName(v)));
  ValueList pairs;
  for (const auto& [k, x] : v.dict().items()) pairs.push_back(Value::List({k, x}, Value::Seq::kTuple));
  const size_t pos = by == "key" ? 0 : 1;
  StableSort(pairs, [&](const Value& a, const Value& c) {
    const Value ka = Lowered(a.list()[pos], cs), kc = Lowered(c.list()[pos], cs);
    return reverse ? Less(in, kc, ka) : Less(in, ka, kc);
  });
  return Value::List(std::move(pairs));
}

Value Unique(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("unique"), {"case_sensitive", "attribute"});
  const bool cs = b.Get(0) && b.Get(0)->Truthy();
  const AttrGetter get(b.Get(1));
  ValueList seen, out;
  const auto items = Iterate(v, in.budget());  // keeps a fresh list alive for the loop
  for (const Value& x : *items) {
    const Value key = Lowered(get.empty() ? x : get(in, x), cs);
    if (key.is_dict() || (key.is_list() && key.seq() == Value::Seq::kList))
      Fail("unhashable type: '" + std::string(TypeName(key)) + "'");
    bool dup = false;
    for (const Value& s : seen) dup = dup || Equal(s, key, in.budget());
    if (dup) continue;
    seen.push_back(key);
    out.push_back(x);
  }
  return Iter(std::move(out));
}

Value MinMax(Interpreter& in, const Value& v, CallArgs& args, bool max) {
  ArgBinder b(args, max ? F("max") : F("min"), {"case_sensitive", "attribute"});
  const bool cs = b.Get(0) && b.Get(0)->Truthy();
  const AttrGetter get(b.Get(1));
  const auto items = Iterate(v, in.budget());
  if (items->empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = Lowered(get.empty() ? (*items)[0] : get(in, (*items)[0]), cs);
  for (size_t i = 1; i < items->size(); ++i) {
    Value k = Lowered(get.empty() ? (*items)[i] : get(in, (*items)[i]), cs);
    if (max ? Less(in, best_key, k) : Less(in, k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return (*items)[best];
}

Value Min(Interpreter& in, const Value& v, CallArgs& a) { return MinMax(in, v, a, false); }
Value Max(Interpreter& in, const Value& v, CallArgs& a) { return MinMax(in, v, a, true); }

Value Sum(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("sum"), {"attribute", "start"});
  const AttrGetter get(b.Get(0));
  Value total = b.Get(1) ? *b.Get(1) : Value::Int(0);
  if (total.is_string()) Fail("sum() can't sum strings [use ''.join(seq) instead]");
  const auto items = Iterate(v, in.budget());  // keeps a fresh list alive for the loop
  for (const Value& x : *items) total = in.Binary(BinOp::kAdd, total, get.empty() ? x : get(in, x));
  return total;
}

Value Items(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("items"), {});
  ValueList out;
  if (v.is_undefined()) return Iter(std::move(out));
  if (!v.is_dict()) Fail("Can only get item pairs from a mapping.");
  in.budget().Step(static_cast<int64_t>(v.dict().size()));
  for (const auto& [k, x] : v.dict().items()) out.push_back(Value::List({k, x}, Value::Seq::kTuple));
  return Iter(std::move(out));
}

Value Reverse(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("reverse"), {});
  if (v.is_string()) {
    std::u32string u = py::Decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value::Str(py::Encode(u));
  }
  if (!v.is_list() && !v.is_dict() && !v.is_undefined()) Fail("argument must be iterable");
  if (v.is_list() && v.seq() == Value::Seq::kIterator) {
    ValueList out = v.list();
    std::reverse(out.begin(), out.end());
    return Value::List(std::move(out));
  }
  ValueList out = *Iterate(v, in.budget());
  std::reverse(out.begin(), out.end());
  return Iter(std::move(out));
}

Value Batch(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("batch"), {"linecount", "fill_with"});
  if (!b.Get(0) || !b.Get(0)->is_integral() || b.Get(0)->as_int() < 1)
    Fail("filter 'batch' needs a positive line count");
  const auto n = static_cast<size_t>(b.Get(0)->as_int());
  ValueList out, cur;
  const auto items = Iterate(v, in.budget());  // keeps a fresh list alive for the loop
  for (const Value& x : *items) {
    if (cur.size() == n) out.push_back(Value::List(std::exchange(cur, {})));
    cur.push_back(x);
  }
  if (!cur.empty()) {
    if (b.Get(1) && !b.Get(1)->is_none()) {
      in.budget().CheckBytes((n - cur.size()) * 16);
      while (cur.size() < n) cur.push_back(*b.Get(1));
    }
    out.push_back(Value::List(std::move(cur)));
  }
  return Iter(std::move(out));
}

Value Attr(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder b(args, F("attr"), {"name"});
  if (!b.Get(0) || !b.Get(0)->is_string()) Fail("filter 'attr' needs an attribute name");
  const std::string& name = b.Get(0)->str();
  if (v.is_object()) return v.object()->GetAttr(name);
  if (v.is_undefined()) return in.GetAttr(v, name);
  bool found = false;
  Value m = BuiltinMethodAttr(v, name, &found);
  return found ? m : Value::Undefined("'" + std::string(TypeName(v)) + " object' has no attribute '" + name + "'");
}

const std::vector<std::pair<std::string_view, FilterFn>>& SeqFilters() {
  static const std::vector<std::pair<std::string_view, FilterFn>> kFilters = {
      {"length", Length},
      {"count", Length},
      {"list", List},
      {"first", First},
      {"last", Last},
      {"join", Join},
      {"map", Map},
      {"select", Select},
      {"reject", Reject},
      {"selectattr", SelectAttr},
      {"rejectattr", RejectAttr},
      {"sort", Sort},
      {"dictsort", DictSort},
      {"unique", Unique},
      {"min", Min},
      {"max", Max},
      {"sum", Sum},
      {"items", Items},
      {"reverse", Reverse},
      {"batch", Batch},
      {"attr", Attr},
  };
  return kFilters;
}

constexpr std::string_view kUnsupportedFilters[] = {"filesizeformat", "groupby",   "pprint",   "random",
                                                    "slice",          "striptags", "truncate", "urlencode",
                                                    "urlize",         "wordwrap",  "xmlattr"};

}  // namespace

FilterFn FindFilter(std::string_view name) {
  for (const auto* table : {&SeqFilters(), &TextFilters()})
    for (const auto& [n, fn] : *table)
      if (n == name) return fn;
  return nullptr;
}

bool IsUnsupportedFilter(std::string_view name) {
  return std::find(std::begin(kUnsupportedFilters), std::end(kUnsupportedFilters), name) !=
         std::end(kUnsupportedFilters);
}

}  // namespace ls::jinja
