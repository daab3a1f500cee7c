// Template: a Jinja2 template parsed once and rendered many times, the subset of Jinja that chat
// templates use, byte for byte as jinja2 renders it with transformers' chat-template environment
// (trim_blocks, lstrip_blocks, loopcontrols, generation blocks, tojson as json.dumps,
// raise_exception, strftime_now). Immutable once parsed: Render may run on many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "jinja/interpreter.h"
#include "nlohmann/json.hpp"

namespace ls::jinja {

class Template {
 public:
  // Parses the whole template; an unknown tag, filter, test or method, an unclosed block or a
  // syntax error is an InvalidArgument error "line N: ...".
  static absl::StatusOr<Template> Parse(std::string_view source);

  // Renders with `vars` (a JSON object: variable name to value; key order is kept, as tojson
  // prints it). Errors: InvalidArgument "line N: ..." for a template error (e.g. a missing
  // attribute used, a type error), InvalidArgument with exactly the message the template gave
  // to raise_exception(), ResourceExhausted "line N: ..." when one of `limits` is hit.
  // `raised`, when given, is set to whether the error came from raise_exception().
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& vars, const Limits& limits = {},
                                     bool* raised = nullptr) const;
  // The same with variables already converted.
  absl::StatusOr<std::string> Render(const Dict& vars, const Limits& limits = {}, bool* raised = nullptr) const;

 private:
  explicit Template(std::shared_ptr<const Stmt> root) : root_(std::move(root)) {}
  std::shared_ptr<const Stmt> root_;
};

}  // namespace ls::jinja
