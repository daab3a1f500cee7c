// Value: the Jinja interpreter's data model, Python's as chat templates see it (None, bool, int,
// float, str, list/tuple, insertion-ordered dict, Jinja's Undefined, and host objects such as
// namespaces, loops and macros). Strings, lists and dicts are immutable and shared; only a
// Namespace changes in place. Budget bounds the work and size of one render.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ls::jinja {

class Value;
class Dict;
class Interpreter;
struct CallArgs;
using ValueList = std::vector<Value>;

// A template error: thrown inside the interpreter, turned into absl::Status at its boundary.
// line 0: not known where it was thrown; the interpreter fills in the line it was evaluating.
struct TemplateError : std::runtime_error {
  TemplateError(std::string msg, int line_no = 0, bool from_template = false, bool over_limit = false)
      : std::runtime_error(std::move(msg)), line(line_no), raised(from_template), limit(over_limit) {}
  int line;
  bool raised;  // raise_exception() in the template: the message is the template's own
  bool limit;   // a resource limit (work, size, nesting) was hit
};
[[noreturn]] void Fail(std::string msg);
[[noreturn]] void FailLimit(std::string msg);

// Per-render limits: steps (loop iterations, calls, elements visited by deep operations, bytes
// built / 64), the largest string or list one operation may build, and the nesting depth of
// evaluation and of values walked by repr/json/equality.
struct Budget {
  int64_t steps_left = 0;
  size_t max_bytes = 0;
  int max_depth = 0;
  void Step(int64_t n = 1) {
    steps_left -= n;
    if (steps_left < 0) FailLimit("template exceeded its work limit");
  }
  void CheckBytes(size_t n) const {
    if (n > max_bytes)
      FailLimit("template built a value larger than the size limit (" + std::to_string(max_bytes) + " bytes)");
  }
  void Built(size_t bytes) { Step(1 + static_cast<int64_t>(bytes / 64)); }
};

// Host objects: namespaces, loop contexts, macros, builtin functions, bound methods.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string_view TypeName() const = 0;
  virtual void Repr(std::string* out, Budget& budget, int depth) const = 0;
  virtual Value GetAttr(std::string_view name) const;  // undefined by default
  // obj.name(args); *handled = false when the object has no such method.
  virtual Value CallMethod(Interpreter& interp, std::string_view name, CallArgs& args, bool* handled);
  virtual bool IsCallable() const { return false; }
  virtual Value Call(Interpreter& interp, CallArgs& args) const;  // fails unless callable
};

// Lists and dicts nest at most this deep (deeper input or construction fails), which bounds the
// recursion of repr, json, equality and destruction.
constexpr int kMaxValueNesting = 512;

class Value {
 public:
  enum class Type : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kObject };
  // What a list-typed value is in Python: it decides repr, json and which operations apply.
  enum class Seq : uint8_t { kList, kTuple, kIterator, kItems, kKeys, kValues };

  Value() = default;  // undefined
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value Str(std::string s);
  static Value List(ValueList items, Seq seq = Seq::kList);
  static Value MakeDict(Dict d);
  static Value Obj(std::shared_ptr<Object> o);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_float() const { return type_ == Type::kFloat; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kFloat || type_ == Type::kBool; }
  bool is_integral() const { return type_ == Type::kInt || type_ == Type::kBool; }  // Python int incl. bool
  bool is_string() const { return type_ == Type::kString; }
  bool is_list() const { return type_ == Type::kList; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_object() const { return type_ == Type::kObject; }
  // A real list or tuple (indexable, sized), not an iterator or a dict view.
  bool is_sequence_list() const { return type_ == Type::kList && (seq_ == Seq::kList || seq_ == Seq::kTuple); }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return type_ == Type::kBool ? (b_ ? 1 : 0) : i_; }
  double as_float() const { return f_; }
  double ToDouble() const { return type_ == Type::kFloat ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const;  // kString; for kUndefined its hint
  const ValueList& list() const;   // kList
  std::shared_ptr<const ValueList> list_ptr() const;
  Seq seq() const { return seq_; }
  const Dict& dict() const;  // kDict
  Object* object() const;    // kObject
  std::shared_ptr<Object> object_ptr() const;

  bool Truthy() const;
  int nesting() const { return nesting_; }

 private:
  Type type_ = Type::kUndefined;
  Seq seq_ = Seq::kList;
  uint16_t nesting_ = 0;  // lists and dicts: 1 + the deepest element's nesting
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<const void> ptr_;  // std::string, ValueList, Dict or Object
};

class Dict {
 public:
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  void Set(Value key, Value value);     // replaces the value of an equal key in place, else appends
  void Append(Value key, Value value);  // the key is known not to be present yet
  size_t size() const { return items_.size(); }
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }

 private:
  std::vector<std::pair<Value, Value>> items_;
};

// Python semantics over values. Deep operations walk nested values against the budget.
std::string_view TypeName(const Value& v);  // Python's type name, for error messages
bool Equal(const Value& a, const Value& b, Budget& budget);
int Compare(const Value& a, const Value& b, Budget& budget, std::string_view op);  // <0, 0, >0; fails if unorderable
void AppendRepr(const Value& v, std::string* out, Budget& budget, int depth = 0);
void AppendStr(const Value& v, std::string* out, Budget& budget);  // str(v): strings as they are, Undefined as ""
std::string Repr(const Value& v, Budget& budget);
std::string Str(const Value& v, Budget& budget);
// The items a for loop or a filter visits: list items, dict keys, string characters; Undefined is empty.
std::shared_ptr<const ValueList> Iterate(const Value& v, Budget& budget);
// len(): fails for values without a length (numbers, iterators).
int64_t Length(const Value& v);
// Python's sorted(): stable, using only `less`; never reads out of bounds whatever `less` answers.
void StableSort(ValueList& items, const std::function<bool(const Value&, const Value&)>& less);

}  // namespace ls::jinja
