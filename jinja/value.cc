// Value construction and Python semantics: truthiness, equality, ordering, str/repr, iteration.
#include "jinja/value.h"

#include <algorithm>

#include "jinja/pystr.h"

namespace ls::jinja {
namespace {

const std::string kEmpty;

void CheckDepth(int depth, const Budget& budget) {
  if (depth > budget.max_depth)
    FailLimit("value nested too deeply (more than " + std::to_string(budget.max_depth) + " levels)");
}

void AppendSeq(const ValueList& items, const char* open, const char* close, bool tuple, std::string* out,
               Budget& budget, int depth) {
  out->append(open);
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out->append(", ");
    AppendRepr(items[i], out, budget, depth + 1);
  }
  if (tuple && items.size() == 1) out->push_back(',');
  out->append(close);
}

}  // namespace

void Fail(std::string msg) { throw TemplateError(std::move(msg)); }

void FailLimit(std::string msg) { throw TemplateError(std::move(msg), 0, false, true); }

Value Object::GetAttr(std::string_view name) const {
  return Value::Undefined("'" + std::string(TypeName()) + " object' has no attribute '" + std::string(name) + "'");
}

Value Object::CallMethod(Interpreter&, std::string_view, CallArgs&, bool* handled) {
  *handled = false;
  return Value();
}

Value Object::Call(Interpreter&, CallArgs&) const { Fail("'" + std::string(TypeName()) + "' object is not callable"); }

namespace {

// Dict keys are equal as Python's hash keys are (1 == 1.0 == True). Keys are scalars or tuples of
// them, so comparing them needs no render budget.
bool SameKey(const Value& a, const Value& b) {
  if (a.is_string() || b.is_string()) return a.is_string() && b.is_string() && a.str() == b.str();
  Budget unbounded{INT64_MAX, SIZE_MAX, kMaxValueNesting};
  return Equal(a, b, unbounded);
}

}  // namespace

const Value* Dict::Find(const Value& key) const {
  if (key.is_string()) return Find(std::string_view(key.str()));
  for (const auto& kv : items_)
    if (SameKey(kv.first, key)) return &kv.second;
  return nullptr;
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items_)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void Dict::Set(Value key, Value value) {
  for (auto& kv : items_) {
    if (SameKey(kv.first, key)) {
      kv.second = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

void Dict::Append(Value key, Value value) { items_.emplace_back(std::move(key), std::move(value)); }

Value Value::Undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.ptr_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.type_ = Type::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.type_ = Type::kBool;
  v.b_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.type_ = Type::kInt;
  v.i_ = i;
  return v;
}

Value Value::Float(double f) {
  Value v;
  v.type_ = Type::kFloat;
  v.f_ = f;
  return v;
}

Value Value::Str(std::string s) {
  Value v;
  v.type_ = Type::kString;
  v.ptr_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::List(ValueList items, Seq seq) {
  Value v;
  int deepest = 0;
  for (const Value& x : items) deepest = std::max(deepest, static_cast<int>(x.nesting_));
  if (deepest + 1 > kMaxValueNesting)
    FailLimit("list nested too deeply (more than " + std::to_string(kMaxValueNesting) + " levels)");
  v.nesting_ = static_cast<uint16_t>(deepest + 1);
  v.type_ = Type::kList;
  v.seq_ = seq;
  v.ptr_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::MakeDict(Dict d) {
  Value v;
  int deepest = 0;
  for (const auto& kv : d.items())
    deepest = std::max({deepest, static_cast<int>(kv.first.nesting_), static_cast<int>(kv.second.nesting_)});
  if (deepest + 1 > kMaxValueNesting)
    FailLimit("dict nested too deeply (more than " + std::to_string(kMaxValueNesting) + " levels)");
  v.nesting_ = static_cast<uint16_t>(deepest + 1);
  v.type_ = Type::kDict;
  v.ptr_ = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::Obj(std::shared_ptr<Object> o) {
  Value v;
  v.type_ = Type::kObject;
  v.ptr_ = std::move(o);
  return v;
}

const std::string& Value::str() const {
  if (!ptr_ || (type_ != Type::kString && type_ != Type::kUndefined)) return kEmpty;
  return *static_cast<const std::string*>(ptr_.get());
}

const ValueList& Value::list() const { return *static_cast<const ValueList*>(ptr_.get()); }

std::shared_ptr<const ValueList> Value::list_ptr() const { return std::static_pointer_cast<const ValueList>(ptr_); }

const Dict& Value::dict() const { return *static_cast<const Dict*>(ptr_.get()); }

Object* Value::object() const { return const_cast<Object*>(static_cast<const Object*>(ptr_.get())); }

std::shared_ptr<Object> Value::object_ptr() const {
  return std::const_pointer_cast<Object>(std::static_pointer_cast<const Object>(ptr_));
}

bool Value::Truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone:
      return false;
    case Type::kBool:
      return b_;
    case Type::kInt:
      return i_ != 0;
    case Type::kFloat:
      return f_ != 0.0;
    case Type::kString:
      return !str().empty();
    case Type::kList:
      return seq_ == Seq::kIterator || !list().empty();
    case Type::kDict:
      return dict().size() != 0;
    case Type::kObject:
      return true;
  }
  return false;
}

std::string_view TypeName(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return "Undefined";
    case Value::Type::kNone:
      return "NoneType";
    case Value::Type::kBool:
      return "bool";
    case Value::Type::kInt:
      return "int";
    case Value::Type::kFloat:
      return "float";
    case Value::Type::kString:
      return "str";
    case Value::Type::kDict:
      return "dict";
    case Value::Type::kObject:
      return v.object()->TypeName();
    case Value::Type::kList:
      switch (v.seq()) {
        case Value::Seq::kList:
          return "list";
        case Value::Seq::kTuple:
          return "tuple";
        case Value::Seq::kIterator:
          return "generator";
        case Value::Seq::kItems:
          return "dict_items";
        case Value::Seq::kKeys:
          return "dict_keys";
        case Value::Seq::kValues:
          return "dict_values";
      }
  }
  return "object";
}

bool Equal(const Value& a, const Value& b, Budget& budget) {
  budget.Step();
  using T = Value::Type;
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.ToDouble() == b.ToDouble();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::kUndefined:
    case T::kNone:
      return true;
    case T::kString:
      return a.str() == b.str();
    case T::kObject:
      return a.object() == b.object();
    case T::kList: {
      if (a.seq() != b.seq()) return false;
      if (a.seq() == Value::Seq::kIterator || a.seq() == Value::Seq::kValues) return a.list_ptr() == b.list_ptr();
      const ValueList& x = a.list();
      const ValueList& y = b.list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!Equal(x[i], y[i], budget)) return false;
      return true;
    }
    case T::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* other = y.Find(k);
        if (!other || !Equal(v, *other, budget)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

int Compare(const Value& a, const Value& b, Budget& budget, std::string_view op) {
  budget.Step();
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    const double x = a.ToDouble(), y = b.ToDouble();
    return x < y ? -1 : x > y ? 1 : 0;  // NaN compares as equal here; all of <, > are then false in Python too
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_sequence_list() && b.is_sequence_list() && a.seq() == b.seq()) {
    const ValueList& x = a.list();
    const ValueList& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!Equal(x[i], y[i], budget)) return Compare(x[i], y[i], budget, op);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined() || b.is_undefined()) Fail(std::string(a.is_undefined() ? a.str() : b.str()));
  Fail("'" + std::string(op) + "' not supported between instances of '" + std::string(TypeName(a)) + "' and '" +
       std::string(TypeName(b)) + "'");
}

void AppendRepr(const Value& v, std::string* out, Budget& budget, int depth) {
  CheckDepth(depth, budget);
  budget.Step();
  if (out->size() > budget.max_bytes) budget.CheckBytes(out->size());
  switch (v.type()) {
    case Value::Type::kUndefined:
      out->append("Undefined");
      return;
    case Value::Type::kNone:
      out->append("None");
      return;
    case Value::Type::kBool:
      out->append(v.as_bool() ? "True" : "False");
      return;
    case Value::Type::kInt:
      out->append(std::to_string(v.as_int()));
      return;
    case Value::Type::kFloat:
      out->append(py::FloatRepr(v.as_float()));
      return;
    case Value::Type::kString:
      out->append(py::StrRepr(v.str()));
      return;
    case Value::Type::kObject:
      v.object()->Repr(out, budget, depth);
      return;
    case Value::Type::kDict: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, x] : v.dict().items()) {
        if (!first) out->append(", ");
        first = false;
        AppendRepr(k, out, budget, depth + 1);
        out->append(": ");
        AppendRepr(x, out, budget, depth + 1);
      }
      out->push_back('}');
      return;
    }
    case Value::Type::kList:
      switch (v.seq()) {
        case Value::Seq::kList:
          AppendSeq(v.list(), "[", "]", false, out, budget, depth);
          return;
        case Value::Seq::kTuple:
          AppendSeq(v.list(), "(", ")", true, out, budget, depth);
          return;
        case Value::Seq::kIterator:
          out->append("<generator object>");
          return;
        case Value::Seq::kItems:
          AppendSeq(v.list(), "dict_items([", "])", false, out, budget, depth);
          return;
        case Value::Seq::kKeys:
          AppendSeq(v.list(), "dict_keys([", "])", false, out, budget, depth);
          return;
        case Value::Seq::kValues:
          AppendSeq(v.list(), "dict_values([", "])", false, out, budget, depth);
          return;
      }
  }
}

void AppendStr(const Value& v, std::string* out, Budget& budget) {
  if (v.is_string()) {
    out->append(v.str());
  } else if (!v.is_undefined()) {
    AppendRepr(v, out, budget);
  }
  if (out->size() > budget.max_bytes) budget.CheckBytes(out->size());
}

std::string Repr(const Value& v, Budget& budget) {
  std::string out;
  AppendRepr(v, &out, budget);
  return out;
}

std::string Str(const Value& v, Budget& budget) {
  if (v.is_string()) return v.str();
  std::string out;
  AppendStr(v, &out, budget);
  return out;
}

std::shared_ptr<const ValueList> Iterate(const Value& v, Budget& budget) {
  switch (v.type()) {
    case Value::Type::kList:
      return v.list_ptr();
    case Value::Type::kUndefined:
      return std::make_shared<const ValueList>();
    case Value::Type::kDict: {
      ValueList keys;
      keys.reserve(v.dict().size());
      for (const auto& kv : v.dict().items()) keys.push_back(kv.first);
      return std::make_shared<const ValueList>(std::move(keys));
    }
    case Value::Type::kString: {
      ValueList chars;
      const std::u32string u = py::Decode(v.str());
      budget.Step(static_cast<int64_t>(u.size()));
      chars.reserve(u.size());
      for (char32_t c : u) chars.push_back(Value::Str(py::Encode(std::u32string_view(&c, 1))));
      return std::make_shared<const ValueList>(std::move(chars));
    }
    default:
      Fail("'" + std::string(TypeName(v)) + "' object is not iterable");
  }
}

int64_t Length(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return 0;
    case Value::Type::kString:
      return static_cast<int64_t>(py::Length(v.str()));
    case Value::Type::kDict:
      return static_cast<int64_t>(v.dict().size());
    case Value::Type::kList:
      if (v.seq() != Value::Seq::kIterator) return static_cast<int64_t>(v.list().size());
      [[fallthrough]];
    default:
      Fail("object of type '" + std::string(TypeName(v)) + "' has no len()");
  }
}

void StableSort(ValueList& items, const std::function<bool(const Value&, const Value&)>& less) {
  // Bottom-up merge sort: stable, and only ever indexes within the two runs it merges.
  ValueList buf(items.size());
  for (size_t width = 1; width < items.size(); width *= 2) {
    for (size_t lo = 0; lo < items.size(); lo += 2 * width) {
      const size_t mid = std::min(lo + width, items.size()), hi = std::min(lo + 2 * width, items.size());
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) buf[k++] = less(items[j], items[i]) ? items[j++] : items[i++];
      while (i < mid) buf[k++] = items[i++];
      while (j < hi) buf[k++] = items[j++];
    }
    items.swap(buf);
  }
}

}  // namespace ls::jinja
