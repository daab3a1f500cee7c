// Content-format detection over a template's syntax tree (jinja/ast.h): names
// and macro parameters that hold a message's content are found to a fixed point, then every use
// of such a value is checked for a list reading.
#include "chat/content_format.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/parser.h"

namespace ls::chat {
namespace {

using jinja::Body;
using jinja::Expr;
using jinja::Stmt;

// Filters that read their input as a list of items (a part list, not a string).
bool ListFilter(const std::string& name) {
  static const std::set<std::string> kNames = {"map",  "selectattr", "rejectattr", "select", "reject",
                                               "first", "last",      "batch",      "slice"};
  return kNames.count(name) > 0;
}

bool IsConstString(const Expr* e, const char* s) {
  return e && e->kind == Expr::Kind::kConst && e->value.is_string() && e->value.str() == s;
}

class Detector {
 public:
  explicit Detector(const Stmt& root) {
    Collect(root.body);
    // Content flows through assignments and macro calls in any order: repeat until nothing new.
    for (int round = 0; round < 16; ++round) {
      const size_t before = names_.size();
      Flow(root.body);
      if (names_.size() == before) break;
    }
    Uses(root.body);
  }
  bool parts() const { return parts_; }

 private:
  // A value that holds a message's content.
  bool Content(const Expr* e) const {
    if (!e) return false;
    switch (e->kind) {
      case Expr::Kind::kGetattr: return e->name == "content";
      case Expr::Kind::kGetitem: return IsConstString(e->b.get(), "content");
      case Expr::Kind::kName: return names_.count(e->name) > 0;
      case Expr::Kind::kCond: return Content(e->b.get()) || Content(e->c.get());
      case Expr::Kind::kOr:
      case Expr::Kind::kAnd: return Content(e->a.get()) || Content(e->b.get());
      case Expr::Kind::kFilter: return (e->name == "default" || e->name == "d") && Content(e->a.get());
      default: return false;
    }
  }

  void Collect(const Body& body) {
    for (const auto& s : body) {
      if (s->kind == Stmt::Kind::kMacro) macros_[s->text] = s.get();
      Collect(s->body);
      Collect(s->else_body);
      for (const auto& [test, b] : s->branches) Collect(b);
    }
  }

  // A call of a macro passes content to the parameters it fills with it.
  void Calls(const Expr* e) {
    if (!e) return;
    if (e->kind == Expr::Kind::kCall && e->a && e->a->kind == Expr::Kind::kName) {
      if (auto m = macros_.find(e->a->name); m != macros_.end()) {
        const std::vector<jinja::Param>& params = m->second->params;
        for (size_t i = 0; i < e->items.size() && i < params.size(); ++i)
          if (Content(e->items[i].get())) names_.insert(params[i].name);
        for (const auto& [name, value] : e->kwargs)
          if (Content(value.get())) names_.insert(name);
      }
    }
    Calls(e->a.get());
    Calls(e->b.get());
    Calls(e->c.get());
    for (const auto& i : e->items) Calls(i.get());
    for (const auto& [k, v] : e->kwargs) Calls(v.get());
  }

  void Flow(const Body& body) {
    for (const auto& s : body) {
      Calls(s->expr.get());
      Calls(s->filter.get());
      for (const auto& v : s->values) Calls(v.get());
      for (const auto& [test, b] : s->branches) {
        Calls(test.get());
        Flow(b);
      }
      if (s->kind == Stmt::Kind::kSet && s->ns_attr.empty() && !s->unpack && Content(s->expr.get()))
        for (const auto& t : s->targets) names_.insert(t);
      if (s->kind == Stmt::Kind::kWith)
        for (size_t i = 0; i < s->targets.size() && i < s->values.size(); ++i)
          if (Content(s->values[i].get())) names_.insert(s->targets[i]);
      Flow(s->body);
      Flow(s->else_body);
    }
  }

  // A use of content as a list: indexed by position or a part's key, or filtered as a list.
  void Use(const Expr* e) {
    if (!e || parts_) return;
    switch (e->kind) {
      case Expr::Kind::kGetitem:
        if (Content(e->a.get()) && e->b &&
            ((e->b->kind == Expr::Kind::kConst && e->b->value.is_int()) || IsConstString(e->b.get(), "type") ||
             IsConstString(e->b.get(), "text")))
          parts_ = true;
        break;
      case Expr::Kind::kGetattr:
        if (Content(e->a.get()) && (e->name == "type" || e->name == "text")) parts_ = true;
        break;
      case Expr::Kind::kFilter:
        if (Content(e->a.get()) && ListFilter(e->name)) parts_ = true;
        break;
      default:
        break;
    }
    Use(e->a.get());
    Use(e->b.get());
    Use(e->c.get());
    for (const auto& i : e->items) Use(i.get());
    for (const auto& [k, v] : e->kwargs) Use(v.get());
  }

  void Uses(const Body& body) {
    for (const auto& s : body) {
      if (s->kind == Stmt::Kind::kFor && Content(s->expr.get())) parts_ = true;
      Use(s->expr.get());
      Use(s->filter.get());
      for (const auto& v : s->values) Use(v.get());
      for (const auto& [test, b] : s->branches) {
        Use(test.get());
        Uses(b);
      }
      Uses(s->body);
      Uses(s->else_body);
      if (parts_) return;
    }
  }

  std::map<std::string, const Stmt*> macros_;
  std::set<std::string> names_;  // names (variables, macro parameters) that hold content
  bool parts_ = false;
};

}  // namespace

bool ParseContentFormat(std::string_view value, ContentFormat* out, std::string* error) {
  if (value == "auto") {
    *out = ContentFormat::kAuto;
  } else if (value == "string") {
    *out = ContentFormat::kString;
  } else if (value == "openai") {
    *out = ContentFormat::kOpenAi;
  } else {
    *error = "unknown --chat_template_content_format '" + std::string(value) + "' (expected auto, string or openai)";
    return false;
  }
  return true;
}

std::string_view ContentFormatName(ContentFormat f) {
  switch (f) {
    case ContentFormat::kAuto: return "auto";
    case ContentFormat::kString: return "string";
    case ContentFormat::kOpenAi: return "openai";
  }
  return "auto";
}

ContentFormat DetectContentFormat(std::string_view template_source) {
  try {
    const jinja::StmtPtr root = jinja::Parse(template_source);
    return Detector(*root).parts() ? ContentFormat::kOpenAi : ContentFormat::kString;
  } catch (const std::exception&) {
    return ContentFormat::kString;
  }
}

}  // namespace ls::chat
