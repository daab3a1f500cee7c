// The interpreter (see interpreter.h): statements, expressions, scoping, loops and macros.
// Python's operators live in operators.cc; builtins in filters.cc, tests.cc, methods.cc, globals.cc.
#include "jinja/interpreter.h"

#include "jinja/builtins.h"
#include "jinja/loop_context.h"
#include "jinja/pystr.h"

namespace ls::jinja {
namespace {

using K = Expr::Kind;

[[noreturn]] void FailUndefined(const Value& v) { Fail(v.str().empty() ? "undefined value" : v.str()); }

// The name jinja2 gives an object in "has no attribute" messages.
std::string ObjectName(const Value& v) {
  if (v.is_none()) return "None";
  return std::string(TypeName(v)) + " object";
}

}  // namespace

class Macro : public Object {
 public:
  Macro(const Stmt* def, std::shared_ptr<Frame> closure) : def_(def), closure_(std::move(closure)) {}
  std::string_view TypeName() const override { return "Macro"; }
  void Repr(std::string* out, Budget&, int) const override { out->append("<Macro '" + def_->text + "'>"); }
  Value GetAttr(std::string_view name) const override {
    if (name == "name") return Value::Str(def_->text);
    return Object::GetAttr(name);
  }
  bool IsCallable() const override { return true; }
  Value Call(Interpreter& in, CallArgs& args) const override { return in.CallMacro(*def_, closure_, args); }

 private:
  const Stmt* def_;
  std::shared_ptr<Frame> closure_;
};

class Caller : public Object {
 public:
  Caller(const Stmt* block, std::shared_ptr<Frame> scope) : block_(block), scope_(std::move(scope)) {}
  std::string_view TypeName() const override { return "Macro"; }
  void Repr(std::string* out, Budget&, int) const override { out->append("<Macro 'caller'>"); }
  bool IsCallable() const override { return true; }
  Value Call(Interpreter& in, CallArgs& args) const override { return in.CallCaller(*block_, scope_, args); }

 private:
  const Stmt* block_;
  std::shared_ptr<Frame> scope_;
};

void Interpreter::FailDepth() const {
  FailLimit("template nested too deeply (more than " + std::to_string(limits_.max_depth) +
            " levels of evaluation; is a macro calling itself?)");
}

const Value* CallArgs::Keyword(std::string_view name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

ArgBinder::ArgBinder(const CallArgs& args, std::string_view what, std::initializer_list<std::string_view> params)
    : bound_(params.size(), nullptr) {
  if (args.positional.size() > params.size())
    Fail(std::string(what) + " takes at most " + std::to_string(params.size()) + " argument(s), got " +
         std::to_string(args.positional.size()));
  for (size_t i = 0; i < args.positional.size(); ++i) bound_[i] = &args.positional[i];
  for (const auto& [k, v] : args.keyword) {
    size_t i = 0;
    for (auto p : params) {
      if (p == k) break;
      ++i;
    }
    if (i == params.size()) Fail(std::string(what) + " got an unexpected keyword argument '" + k + "'");
    if (bound_[i]) Fail(std::string(what) + " got multiple values for argument '" + k + "'");
    bound_[i] = &v;
  }
}

const Value* Frame::Find(std::string_view name) const {
  for (const Frame* f = this; f; f = f->parent_.get())
    for (const auto& [k, v] : f->vars_)
      if (k == name) return &v;
  return nullptr;
}

void Frame::Set(std::string_view name, Value v) {
  for (auto& [k, x] : vars_) {
    if (k == name) {
      x = std::move(v);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(v));
}

void Namespace::Repr(std::string* out, Budget& budget, int depth) const {
  out->append("<Namespace ");
  AppendRepr(Value::MakeDict(attrs_), out, budget, depth + 1);
  out->append(">");
}

Value Namespace::GetAttr(std::string_view name) const {
  if (const Value* v = attrs_.Find(name)) return *v;
  return Object::GetAttr(name);
}

void Namespace::Set(std::string_view name, Value v) {
  if (!name.empty() && name[0] == '_')
    Fail("chat templates cannot store underscore-prefixed attributes on a namespace, but got '" + std::string(name) +
         "'");
  attrs_.Set(Value::Str(std::string(name)), std::move(v));
}

Interpreter::Interpreter(const Limits& limits) : limits_(limits) {
  budget_.steps_left = limits.max_steps;
  budget_.max_bytes = limits.max_output_bytes;
  budget_.max_depth = kMaxValueNesting + 8;
}

Interpreter::~Interpreter() {
  for (auto& ns : namespaces_) ns->Clear();
  for (auto& f : captured_frames_) f->Clear();
}

std::shared_ptr<Namespace> Interpreter::NewNamespace() {
  budget_.Step();
  auto ns = std::make_shared<Namespace>();
  namespaces_.push_back(ns);
  return ns;
}

std::shared_ptr<Frame> Interpreter::NewFrame(const std::shared_ptr<Frame>& parent,
                                             const std::vector<std::string>& names) {
  auto f = std::make_shared<Frame>(parent);
  for (const std::string& n : names) f->Set(n, Value::Undefined("'" + n + "' is undefined"));
  return f;
}

std::string Interpreter::Render(const Stmt& root, const Dict& vars) {
  auto globals = std::make_shared<Frame>(nullptr);
  AddGlobals(*globals);
  auto context = std::make_shared<Frame>(globals);
  for (const auto& [k, v] : vars.items()) context->Set(k.str(), v);
  auto top = NewFrame(context, root.predeclared);
  captured_frames_.push_back(top);
  std::string out;
  out_ = &out;
  try {
    Exec(root.body, top);
  } catch (TemplateError& e) {
    out_ = nullptr;
    if (!e.line) e.line = line_;
    throw;
  }
  out_ = nullptr;
  return out;
}

void Interpreter::Write(std::string_view text) {
  if (out_->size() + text.size() > limits_.max_output_bytes)
    FailLimit("rendered text exceeds the output limit (" + std::to_string(limits_.max_output_bytes) + " bytes)");
  out_->append(text);
  budget_.Step(static_cast<int64_t>(text.size() / 64));
}

std::string Interpreter::Capture(const Body& body, const std::shared_ptr<Frame>& frame, Flow* flow) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    const Flow f = Exec(body, frame);
    if (flow) *flow = f;
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Interpreter::Flow Interpreter::Exec(const Body& body, const std::shared_ptr<Frame>& frame) {
  for (const StmtPtr& s : body) {
    const Flow f = ExecStmt(*s, frame);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::ExecStmt(const Stmt& s, const std::shared_ptr<Frame>& frame) {
  DepthGuard guard(this);
  line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::kText:
      Write(s.text);
      break;
    case Stmt::Kind::kPrint: {
      const Value v = Eval(*s.expr, frame);
      if (v.is_string()) {
        Write(v.str());
      } else {
        std::string text;
        AppendStr(v, &text, budget_);
        Write(text);
      }
      break;
    }
    case Stmt::Kind::kIf:
      for (const auto& [test, body] : s.branches)
        if (Eval(*test, frame).Truthy()) return Exec(body, frame);
      return Exec(s.else_body, frame);
    case Stmt::Kind::kFor:
      return ExecFor(s, frame);
    case Stmt::Kind::kSet:
      ExecSet(s, frame, Eval(*s.expr, frame));
      break;
    case Stmt::Kind::kSetBlock: {
      // As in jinja2, a break or continue inside leaves the block: nothing is assigned.
      Flow flow = Flow::kNormal;
      Value v = Value::Str(Capture(s.body, NewFrame(frame, s.predeclared), &flow));
      if (flow != Flow::kNormal) return flow;
      if (s.filter) v = ApplyFilterChain(*s.filter, std::move(v), frame);
      ExecSet(s, frame, std::move(v));
      break;
    }
    case Stmt::Kind::kMacro:
      frame->Set(s.text, Value::Obj(std::make_shared<Macro>(&s, frame)));
      if (captured_frames_.empty() || captured_frames_.back() != frame) captured_frames_.push_back(frame);
      break;
    case Stmt::Kind::kCallBlock:
      ExecCallBlock(s, frame);
      break;
    case Stmt::Kind::kFilterBlock: {
      Flow flow = Flow::kNormal;
      const std::string body = Capture(s.body, NewFrame(frame, s.predeclared), &flow);
      if (flow != Flow::kNormal) return flow;  // nothing is written, as in jinja2
      const Value v = ApplyFilterChain(*s.filter, Value::Str(body), frame);
      Write(ToStr(v));
      break;
    }
    case Stmt::Kind::kWith: {
      auto child = NewFrame(frame, s.predeclared);
      for (size_t i = 0; i < s.targets.size(); ++i) child->Set(s.targets[i], Eval(*s.values[i], frame));
      return Exec(s.body, child);
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kScope:
      return Exec(s.body, NewFrame(frame, s.predeclared));
  }
  return Flow::kNormal;
}

void Interpreter::ExecSet(const Stmt& s, const std::shared_ptr<Frame>& frame, Value v) {
  if (!s.ns_attr.empty()) {
    const Value* ns = frame->Find(s.targets[0]);
    auto* target = ns && ns->is_object() ? dynamic_cast<Namespace*>(ns->object()) : nullptr;
    if (!target) Fail("cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
    target->Set(s.ns_attr, std::move(v));
    return;
  }
  if (!s.unpack) {
    frame->Set(s.targets[0], std::move(v));
    return;
  }
  const auto items = Iterate(v, budget_);
  if (items->size() != s.targets.size())
    Fail(items->size() > s.targets.size()
             ? "too many values to unpack (expected " + std::to_string(s.targets.size()) + ")"
             : "not enough values to unpack (expected " + std::to_string(s.targets.size()) + ", got " +
                   std::to_string(items->size()) + ")");
  for (size_t i = 0; i < items->size(); ++i) frame->Set(s.targets[i], (*items)[i]);
}

Interpreter::Flow Interpreter::ExecFor(const Stmt& s, const std::shared_ptr<Frame>& frame) {
  const Value iterable = Eval(*s.expr, frame);
  line_ = s.line;
  std::shared_ptr<const ValueList> seq = Iterate(iterable, budget_);
  LoopContext::Filter filter;
  if (s.filter) {  // evaluated item by item as the loop pulls them, as jinja2 does
    filter = [this, &s, frame](const Value& item) {
      budget_.Step();
      auto f = std::make_shared<Frame>(frame);
      ExecSet(s, f, item);
      return Eval(*s.filter, f).Truthy();
    };
  }
  auto loop = LoopContext::Make(std::move(seq), std::move(filter));
  const Value loop_value = Value::Obj(loop);
  // jinja2 marks a loop as having iterated at the end of a body that ran through, so `else`
  // also runs when every iteration ended in break or continue.
  bool completed_once = false;
  Value item;
  while (loop->Advance(&item)) {
    budget_.Step();
    auto f = NewFrame(frame, s.predeclared);
    f->Set("loop", loop_value);
    ExecSet(s, f, item);
    const Flow flow = Exec(s.body, f);
    if (flow == Flow::kBreak) break;
    if (flow == Flow::kNormal) completed_once = true;
  }
  if (!completed_once && !s.else_body.empty()) return Exec(s.else_body, NewFrame(frame, s.else_predeclared));
  return Flow::kNormal;
}

void Interpreter::ExecCallBlock(const Stmt& s, const std::shared_ptr<Frame>& frame) {
  std::pair<std::string, Value> caller{"caller", Value::Obj(std::make_shared<Caller>(&s, frame))};
  const Value result = EvalCall(*s.expr, frame, &caller);
  Write(ToStr(result));
}

Value Interpreter::ApplyFilterChain(const Expr& chain, Value input, const std::shared_ptr<Frame>& frame) {
  // The chain is nested Filter nodes whose innermost input is null: apply from the inside out.
  std::vector<const Expr*> filters;
  for (const Expr* e = &chain; e; e = e->a.get()) filters.push_back(e);
  for (auto it = filters.rbegin(); it != filters.rend(); ++it) {
    CallArgs args;
    EvalArgs(**it, frame, &args);
    line_ = (*it)->line;
    input = (*it)->filter(*this, input, args);
  }
  return input;
}

void Interpreter::EvalArgs(const Expr& e, const std::shared_ptr<Frame>& frame, CallArgs* args) {
  args->positional.reserve(e.items.size());
  for (const auto& a : e.items) args->positional.push_back(Eval(*a, frame));
  for (const auto& [k, v] : e.kwargs) args->keyword.emplace_back(k, Eval(*v, frame));
}

Value Interpreter::EvalCall(const Expr& e, const std::shared_ptr<Frame>& frame,
                            std::pair<std::string, Value>* extra_kwarg) {
  const Expr& callee = *e.a;
  if (callee.kind == K::kGetattr) {
    const Value obj = Eval(*callee.a, frame);
    CallArgs args;
    EvalArgs(e, frame, &args);
    if (extra_kwarg) args.keyword.push_back(*extra_kwarg);
    line_ = e.line;
    if (obj.is_undefined()) FailUndefined(obj);
    bool handled = false;
    budget_.Step();
    Value r = obj.is_object() ? obj.object()->CallMethod(*this, callee.name, args, &handled)
                              : CallBuiltinMethod(*this, obj, callee.name, args, &handled);
    if (handled) return r;
    return CallValue(GetAttr(obj, callee.name), args);
  }
  const Value fn = Eval(callee, frame);
  CallArgs args;
  EvalArgs(e, frame, &args);
  if (extra_kwarg) args.keyword.push_back(*extra_kwarg);
  line_ = e.line;
  return CallValue(fn, args);
}

Value Interpreter::CallValue(const Value& callee, CallArgs& args) {
  if (callee.is_object() && callee.object()->IsCallable()) {
    budget_.Step();
    return callee.object()->Call(*this, args);
  }
  if (callee.is_undefined()) FailUndefined(callee);
  Fail("'" + std::string(TypeName(callee)) + "' object is not callable");
}

Value Interpreter::CallMacro(const Stmt& def, const std::shared_ptr<Frame>& closure, CallArgs& args) {
  DepthGuard guard(this);
  const std::string what = def.kind == Stmt::Kind::kMacro ? "macro '" + def.text + "'" : "caller()";
  auto f = NewFrame(closure, def.predeclared);
  const size_t np = def.params.size();
  if (args.positional.size() > np && !def.uses_varargs)
    Fail(what + " takes not more than " + std::to_string(np) + " argument(s)");
  std::vector<bool> given(np, false);
  for (size_t i = 0; i < np && i < args.positional.size(); ++i) {
    f->Set(def.params[i].name, args.positional[i]);
    given[i] = true;
  }
  Dict extra_kwargs;
  for (auto& [k, v] : args.keyword) {
    if (k == "caller" && def.kind == Stmt::Kind::kMacro) {
      if (!def.uses_caller) Fail(what + " takes no keyword argument 'caller'");
      f->Set("caller", v);
      continue;
    }
    size_t j = 0;
    while (j < np && def.params[j].name != k) ++j;
    if (j < np) {
      if (given[j]) Fail(what + " got multiple values for argument '" + k + "'");
      f->Set(k, v);
      given[j] = true;
    } else if (def.uses_kwargs) {
      extra_kwargs.Set(Value::Str(k), v);
    } else {
      Fail(what + " takes no keyword argument '" + k + "'");
    }
  }
  for (size_t j = 0; j < np; ++j) {
    if (given[j]) continue;
    const Param& p = def.params[j];
    f->Set(p.name, p.default_value ? Eval(*p.default_value, f)
                                   : Value::Undefined("parameter '" + p.name + "' was not provided"));
  }
  if (def.uses_varargs) {
    ValueList rest;
    for (size_t i = np; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    f->Set("varargs", Value::List(std::move(rest), Value::Seq::kTuple));
  }
  if (def.uses_kwargs) f->Set("kwargs", Value::MakeDict(std::move(extra_kwargs)));
  return Value::Str(Capture(def.body, f));
}

Value Interpreter::CallCaller(const Stmt& block, const std::shared_ptr<Frame>& scope, CallArgs& args) {
  return CallMacro(block, scope, args);
}

Value Interpreter::GetAttr(const Value& obj, std::string_view name) {
  switch (obj.type()) {
    case Value::Type::kUndefined:
      FailUndefined(obj);
    case Value::Type::kObject:
      return obj.object()->GetAttr(name);
    case Value::Type::kDict: {
      bool found = false;
      Value m = BuiltinMethodAttr(obj, name, &found);
      if (found) return m;
      if (const Value* v = obj.dict().Find(name)) return *v;
      break;
    }
    case Value::Type::kString:
    case Value::Type::kList: {
      bool found = false;
      Value m = BuiltinMethodAttr(obj, name, &found);
      if (found) return m;
      break;
    }
    default:
      break;
  }
  return Value::Undefined("'" + ObjectName(obj) + "' has no attribute '" + std::string(name) + "'");
}

Value Interpreter::GetItem(const Value& obj, const Value& key) {
  switch (obj.type()) {
    case Value::Type::kUndefined:
      FailUndefined(obj);
    case Value::Type::kDict:
      if (key.is_dict() || (key.is_list() && key.seq() != Value::Seq::kTuple)) break;  // unhashable
      if (const Value* v = obj.dict().Find(key)) return *v;
      break;
    case Value::Type::kList:
      if (key.is_integral() && obj.is_sequence_list()) {
        const auto n = static_cast<int64_t>(obj.list().size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.list()[i];
        return Value::Undefined("'" + ObjectName(obj) + "' has no element " + std::to_string(key.as_int()));
      }
      break;
    case Value::Type::kString:
      if (key.is_integral()) {
        const std::string& s = obj.str();
        std::u32string u = py::Decode(s);
        const auto n = static_cast<int64_t>(u.size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value::Str(py::Encode(std::u32string_view(&u[i], 1)));
        return Value::Undefined("'str object' has no element " + std::to_string(key.as_int()));
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined("'" + ObjectName(obj) + "' has no element " + Repr(key, budget_));
}

}  // namespace ls::jinja
