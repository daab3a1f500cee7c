// Template parsing and rendering at the module boundary: TemplateError becomes absl::Status.
#include "jinja/template.h"

#include <new>

#include "absl/strings/str_cat.h"
#include "jinja/parser.h"
#include "jinja/python_json.h"

namespace ls::jinja {
namespace {

absl::Status ToStatus(const TemplateError& e) {
  if (e.raised) {
    const std::string msg = e.what();
    return absl::InvalidArgumentError(msg.empty() ? "the template called raise_exception() without a message" : msg);
  }
  const std::string msg = e.line > 0 ? absl::StrCat("line ", e.line, ": ", e.what()) : std::string(e.what());
  return e.limit ? absl::ResourceExhaustedError(msg) : absl::InvalidArgumentError(msg);
}

}  // namespace

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  try {
    return Template(std::shared_ptr<const Stmt>(jinja::Parse(source)));
  } catch (const TemplateError& e) {
    return ToStatus(e);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory while parsing the template");
  }
}

absl::StatusOr<std::string> Template::Render(const Dict& vars, const Limits& limits, bool* raised) const {
  if (raised) *raised = false;
  try {
    Interpreter interp(limits);
    return interp.Render(*root_, vars);
  } catch (const TemplateError& e) {
    if (raised) *raised = e.raised;
    return ToStatus(e);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory while rendering the template");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("template rendering failed: ", e.what()));
  }
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& vars, const Limits& limits,
                                             bool* raised) const {
  if (raised) *raised = false;
  if (!vars.is_object()) return absl::InvalidArgumentError("template variables must be a JSON object");
  Dict d;
  try {
    for (auto it = vars.begin(); it != vars.end(); ++it)
      d.Append(Value::Str(it.key()), FromJson(it.value(), kMaxValueNesting - 1));
  } catch (const TemplateError& e) {
    return ToStatus(e);
  }
  return Render(d, limits, raised);
}

}  // namespace ls::jinja
