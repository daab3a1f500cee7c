// LoopContext: the `loop` variable of a for loop (index, first, last, length, previtem,
// nextitem, cycle(), changed()). Like jinja2's, it pulls items one at a time, so the loop's
// `if` filter runs item by item as the loop advances (the body may change what it tests), and
// looks ahead only when last / nextitem / length / revindex ask for it.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string_view>

#include "jinja/value.h"

namespace ls::jinja {

class LoopContext : public Object {
 public:
  using Filter = std::function<bool(const Value&)>;  // empty: every item passes
  static std::shared_ptr<LoopContext> Make(std::shared_ptr<const ValueList> items, Filter filter);

  // Moves to the next item that passes the filter; false at the end.
  bool Advance(Value* item);

  std::string_view TypeName() const override { return "LoopContext"; }
  void Repr(std::string* out, Budget& budget, int depth) const override;
  Value GetAttr(std::string_view name) const override;
  Value CallMethod(Interpreter& in, std::string_view name, CallArgs& args, bool* handled) override;

 private:
  LoopContext(std::shared_ptr<const ValueList> items, Filter filter)
      : items_(std::move(items)), filter_(std::move(filter)) {}
  bool Pull(Value* item) const;  // the next passing item from the source
  bool Peek() const;             // makes sure ahead_ holds the next item, if any
  int64_t Length() const;

  std::shared_ptr<const ValueList> items_;
  Filter filter_;
  mutable size_t raw_ = 0;           // next source index to examine
  mutable std::deque<Value> ahead_;  // passing items pulled ahead of the loop
  int64_t index0_ = -1;
  Value current_, previous_;
  std::weak_ptr<LoopContext> self_;
  Value last_changed_;
  bool has_changed_ = false;
};

}  // namespace ls::jinja
