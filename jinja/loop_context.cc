// LoopContext (see loop_context.h).
#include "jinja/loop_context.h"

#include "jinja/builtins.h"

namespace ls::jinja {

std::shared_ptr<LoopContext> LoopContext::Make(std::shared_ptr<const ValueList> items, Filter filter) {
  std::shared_ptr<LoopContext> loop(new LoopContext(std::move(items), std::move(filter)));
  loop->self_ = loop;
  return loop;
}

bool LoopContext::Pull(Value* item) const {
  while (raw_ < items_->size()) {
    const Value& v = (*items_)[raw_++];
    if (!filter_ || filter_(v)) {
      *item = v;
      return true;
    }
  }
  return false;
}

bool LoopContext::Peek() const {
  if (!ahead_.empty()) return true;
  Value v;
  if (!Pull(&v)) return false;
  ahead_.push_back(std::move(v));
  return true;
}

int64_t LoopContext::Length() const {
  Value v;
  while (Pull(&v)) ahead_.push_back(std::move(v));
  return index0_ + 1 + static_cast<int64_t>(ahead_.size());
}

bool LoopContext::Advance(Value* item) {
  Value next;
  if (!ahead_.empty()) {
    next = std::move(ahead_.front());
    ahead_.pop_front();
  } else if (!Pull(&next)) {
    return false;
  }
  if (index0_ >= 0) previous_ = current_;
  current_ = next;
  ++index0_;
  *item = std::move(next);
  return true;
}

void LoopContext::Repr(std::string* out, Budget&, int) const {
  out->append("<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(Length()) + ">");
}

Value LoopContext::GetAttr(std::string_view name) const {
  const int64_t i = index0_;
  if (name == "index") return Value::Int(i + 1);
  if (name == "index0") return Value::Int(i);
  if (name == "first") return Value::Bool(i == 0);
  if (name == "depth") return Value::Int(1);
  if (name == "depth0") return Value::Int(0);
  if (name == "previtem") return i > 0 ? previous_ : Value::Undefined("there is no previous item");
  if (name == "last") return Value::Bool(!Peek());
  if (name == "nextitem") return Peek() ? ahead_.front() : Value::Undefined("there is no next item");
  if (name == "length") return Value::Int(Length());
  if (name == "revindex") return Value::Int(Length() - i);
  if (name == "revindex0") return Value::Int(Length() - i - 1);
  if (name == "cycle" || name == "changed") return MakeBoundMethod(Value::Obj(self_.lock()), std::string(name));
  return Object::GetAttr(name);
}

Value LoopContext::CallMethod(Interpreter& in, std::string_view name, CallArgs& args, bool* handled) {
  *handled = true;
  if (!args.keyword.empty()) Fail("loop." + std::string(name) + "() takes no keyword arguments");
  if (name == "cycle") {
    if (args.positional.empty()) Fail("no items for cycling given");
    return args.positional[static_cast<size_t>(index0_) % args.positional.size()];
  }
  if (name == "changed") {
    Value now = Value::List(args.positional);
    const bool changed = !has_changed_ || !Equal(now, last_changed_, in.budget());
    last_changed_ = std::move(now);
    has_changed_ = true;
    return Value::Bool(changed);
  }
  *handled = false;
  return Value();
}

}  // namespace ls::jinja
