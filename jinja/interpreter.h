// Interpreter: renders a parsed template (ast.h) against variables with Jinja's semantics as
// jinja2's ImmutableSandboxedEnvironment has them (scoping, loops, macros, Undefined, getattr and
// getitem fallbacks). One Interpreter renders once, on one thread; builtins (filters, tests,
// methods, globals) call back into it. Errors are thrown as TemplateError.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace ls::jinja {

// Bounds on one render, so that no template (or input) can hang, exhaust memory or the stack.
// The defaults leave real chat templates far inside them (a 200-message chat takes well under
// 1% of the steps) while bounding a render to about a second of CPU and 64 MiB of text.
struct Limits {
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text, and any single string or list built
  int64_t max_steps = 50'000'000;              // loop iterations + calls + elements visited + bytes built / 64
  int max_depth = 400;                         // nesting of evaluation: expressions, blocks, macro calls
};

struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(std::string_view name) const;
};

// Binds call arguments to a builtin's parameters: Get(i) is the i-th parameter, given by position
// or by name, or null. Fails on extra or unknown arguments, naming `what` (e.g. "filter 'join'").
class ArgBinder {
 public:
  ArgBinder(const CallArgs& args, std::string_view what, std::initializer_list<std::string_view> params);
  const Value* Get(size_t i) const { return i < bound_.size() ? bound_[i] : nullptr; }

 private:
  std::vector<const Value*> bound_;
};

class Frame {
 public:
  explicit Frame(std::shared_ptr<Frame> parent) : parent_(std::move(parent)) {}
  const Value* Find(std::string_view name) const;
  void Set(std::string_view name, Value v);
  void Clear() { vars_.clear(); }

 private:
  std::shared_ptr<Frame> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

// namespace(...): the one mutable value, assigned with {% set ns.attr = ... %}.
class Namespace : public Object {
 public:
  std::string_view TypeName() const override { return "Namespace"; }
  void Repr(std::string* out, Budget& budget, int depth) const override;
  Value GetAttr(std::string_view name) const override;
  void Set(std::string_view name, Value v);  // fails for names starting with '_' (as transformers does)
  void Clear() { attrs_ = Dict(); }

 private:
  Dict attrs_;
};

class Interpreter {
 public:
  explicit Interpreter(const Limits& limits);
  ~Interpreter();  // clears namespaces and macro scopes, which may reference each other

  // Renders the template `root` (parser.h) with `vars` as its variables (globals underneath).
  std::string Render(const Stmt& root, const Dict& vars);

  Budget& budget() { return budget_; }
  int line() const { return line_; }

  // Jinja's attribute and item access (obj.name tries the attribute then the item, obj[key] the
  // item then the attribute); missing ones are Undefined, and Undefined objects fail.
  Value GetAttr(const Value& obj, std::string_view name);
  Value GetItem(const Value& obj, const Value& key);
  Value CallValue(const Value& callee, CallArgs& args);
  std::shared_ptr<Namespace> NewNamespace();
  // Text of a value as {{ }} prints it, within the size limit.
  std::string ToStr(const Value& v) { return Str(v, budget_); }
  // Python's binary operators (+ - * / // % **) and `in`.
  Value Binary(BinOp op, const Value& a, const Value& b);
  bool Contains(const Value& container, const Value& item);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  struct DepthGuard {  // bounds the recursion of evaluation (and so the native stack)
    explicit DepthGuard(Interpreter* in) : in_(in) {
      if (in_->depth_ >= in_->limits_.max_depth) in_->FailDepth();
      ++in_->depth_;
    }
    ~DepthGuard() { --in_->depth_; }
    Interpreter* in_;
  };
  [[noreturn]] void FailDepth() const;
  friend class Macro;
  friend class Caller;

  Flow Exec(const Body& body, const std::shared_ptr<Frame>& frame);
  // A frame for a scope's body, starting with its predeclared names undefined.
  static std::shared_ptr<Frame> NewFrame(const std::shared_ptr<Frame>& parent, const std::vector<std::string>& names);
  Flow ExecStmt(const Stmt& s, const std::shared_ptr<Frame>& frame);
  Flow ExecFor(const Stmt& s, const std::shared_ptr<Frame>& frame);
  void ExecSet(const Stmt& s, const std::shared_ptr<Frame>& frame, Value v);
  void ExecCallBlock(const Stmt& s, const std::shared_ptr<Frame>& frame);
  // Runs `body` into a string instead of the output; *flow (optional) gets a break/continue.
  std::string Capture(const Body& body, const std::shared_ptr<Frame>& frame, Flow* flow = nullptr);
  Value Eval(const Expr& e, const std::shared_ptr<Frame>& frame);
  Value EvalCall(const Expr& e, const std::shared_ptr<Frame>& frame, std::pair<std::string, Value>* extra_kwarg);
  void EvalArgs(const Expr& e, const std::shared_ptr<Frame>& frame, CallArgs* args);
  Value ApplyFilterChain(const Expr& chain, Value input, const std::shared_ptr<Frame>& frame);
  Value Slice(const Value& obj, const Expr& slice, const std::shared_ptr<Frame>& frame);
  bool CompareOp(CmpOp op, const Value& a, const Value& b);
  void Write(std::string_view text);
  Value CallMacro(const Stmt& def, const std::shared_ptr<Frame>& closure, CallArgs& args);
  Value CallCaller(const Stmt& block, const std::shared_ptr<Frame>& scope, CallArgs& args);

  Limits limits_;
  Budget budget_;
  std::string* out_ = nullptr;
  int line_ = 0;
  int depth_ = 0;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
  std::vector<std::shared_ptr<Frame>> captured_frames_;
};

}  // namespace ls::jinja
